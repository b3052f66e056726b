-- expect: 2
-- contains: Cartesian product
SELECT count(*) FROM (SELECT l_orderkey FROM lineitem, partsupp) t
