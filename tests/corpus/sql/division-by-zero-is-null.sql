-- expect: 0
-- command: run
SELECT n_name, n_nationkey / 0 AS q FROM nation
