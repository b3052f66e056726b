-- expect: 2
SELECT n_name FROM nation UNION ALL SELECT r_regionkey, r_name FROM region
