-- expect: 0
-- args: --conf hive.strict.checks.cartesian.product=false
SELECT count(*) FROM lineitem, orders
