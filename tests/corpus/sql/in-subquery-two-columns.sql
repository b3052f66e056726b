-- expect: 2
SELECT n_name FROM nation WHERE n_regionkey IN (SELECT r_regionkey, r_name FROM region)
