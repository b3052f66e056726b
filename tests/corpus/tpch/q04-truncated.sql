-- TPC-H Q4, truncated (tests/corpus/generate_tpch_mutations.py)
-- expect: 2
-- TPC-H Q4: order priority checking
select o_orderpriority, count(*) as order_count
from orders
where o_orderdate >= date '1993-07-01' and
