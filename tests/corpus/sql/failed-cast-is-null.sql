-- expect: 0
-- command: run
SELECT n_name, CAST(n_name AS DATE) AS d FROM nation
