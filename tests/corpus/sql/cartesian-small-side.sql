-- expect: 0
-- command: run
SELECT count(*) AS n FROM orders, region
