-- expect: 2
SELECT o_orderdate + INTERVAL 'x' DAY FROM orders
