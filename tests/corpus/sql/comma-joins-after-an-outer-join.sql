-- expect: 0
-- command: run
-- Comma joins after an outer join take their conditions from WHERE (TPC-DS Q40, Q49): not a Cartesian product.
SELECT n_name, count(*) AS orders, count(l_orderkey) AS returned_lines
FROM orders LEFT JOIN lineitem ON o_orderkey = l_orderkey AND l_returnflag = 'R', customer, nation
WHERE c_custkey = o_custkey AND n_nationkey = c_nationkey AND o_orderdate < DATE '1993-01-01'
GROUP BY n_name
