-- expect: 0
-- command: run
SELECT count(*) AS n FROM nation HAVING count(*) > 1
