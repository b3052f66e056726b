-- expect: 2
SELECT n_name, count(*) FROM nation GROUP BY 5
