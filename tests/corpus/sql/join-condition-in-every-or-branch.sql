-- expect: 0
-- command: run
-- A join condition written in every branch of an OR is a join condition (TPC-DS Q13, Q48), not a filter over a
-- Cartesian product refused by the strict check.
SELECT count(*) AS n, sum(l_quantity) AS q
FROM lineitem, orders
WHERE (l_orderkey = o_orderkey AND l_quantity < 3 AND o_orderpriority = '1-URGENT')
   OR (o_orderkey = l_orderkey AND l_quantity < 3 AND o_totalprice > 300000)
   OR (l_orderkey = o_orderkey AND l_quantity < 3 AND l_shipmode = 'AIR' AND o_orderstatus = 'F')
