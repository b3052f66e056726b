-- TPC-H Q3, truncated (tests/corpus/generate_tpch_mutations.py)
-- expect: 2
-- TPC-H Q3: shipping priority
select l_orderkey, sum(l_extendedprice * (1 - l_discount)) as revenue, o_orderdate, o_shippriority
from customer, orders, lineitem
where c_mktsegment = 'BUILDING' and
