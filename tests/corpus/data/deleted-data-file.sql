-- expect: 0
-- setup: deleted-data-file
-- command: run
SELECT count(*) AS n FROM t
