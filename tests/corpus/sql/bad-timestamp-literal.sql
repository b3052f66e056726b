-- expect: 2
-- position: yes
SELECT o_orderkey FROM orders WHERE o_orderdate < TIMESTAMP '1995-01-01 24:00:00'
