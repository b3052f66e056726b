-- expect: 2
SELECT DISTINCT n_name FROM nation ORDER BY n_regionkey
