-- expect: 2
-- contains: Cartesian product
-- position: yes
SELECT count(*) FROM lineitem, orders
