-- expect: 0
-- command: run
SELECT 1 AS one, 'x' AS letter, 2 + 3 AS five
