-- expect: 2
SELECT n_name FROM nation WHERE rank() OVER (ORDER BY n_name) = 1
