-- expect: 2
SELECT n_name FROM nation WHERE n_nationkey > ALL (SELECT r_regionkey FROM region)
