-- expect: 0
-- command: run
SELECT n_name FROM nation WHERE n_nationkey = 1 OR EXISTS (SELECT 1 FROM region)
