-- expect: 0
-- setup: tables
-- command: run
SELECT r_name, count(*) AS n FROM nation JOIN region ON n_regionkey = r_regionkey GROUP BY r_name
