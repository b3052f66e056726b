-- expect: 0
-- command: run
SELECT count(*) AS n FROM nation CROSS JOIN region
