-- expect: 2
SELECT n_name FROM nation WHERE n_regionkey = 1 WHERE n_nationkey = 2
