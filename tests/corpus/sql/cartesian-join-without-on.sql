-- expect: 2
-- contains: Cartesian product
SELECT count(*) FROM lineitem JOIN orders
