-- expect: 0
-- setup: mixed-schema
-- command: run
SELECT count(*) AS n, count(n_name) AS named, count(r_name) AS regions FROM t
