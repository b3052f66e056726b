-- expect: 0
-- setup: corrupt-statistics
-- command: run
SELECT count(*) AS n FROM nation
