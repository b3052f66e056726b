-- expect: 2
SET hive.strict.checks.cartesian.product=maybe;
SELECT count(*) FROM lineitem, orders
