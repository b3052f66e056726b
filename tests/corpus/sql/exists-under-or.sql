-- expect: 2
SELECT n_name FROM nation WHERE n_nationkey = 1 OR EXISTS (SELECT 1 FROM region)
