-- expect: 0
-- setup: tables
-- command: run
SELECT count(*) AS n FROM region
