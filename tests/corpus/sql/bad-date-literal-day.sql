-- expect: 2
-- position: yes
SELECT o_orderkey FROM orders WHERE o_orderdate < DATE '1995-02-30'
