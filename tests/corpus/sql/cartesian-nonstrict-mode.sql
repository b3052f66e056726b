-- expect: 0
-- args: --conf hive.mapred.mode=nonstrict
SELECT count(*) FROM lineitem, orders
