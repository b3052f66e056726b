-- expect: 0
-- command: run
SELECT count(*) AS n FROM orders WHERE o_orderdate < DATE '1996-02-29'
