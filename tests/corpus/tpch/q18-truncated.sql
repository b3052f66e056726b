-- TPC-H Q18, truncated (tests/corpus/generate_tpch_mutations.py)
-- expect: 2
-- TPC-H Q18: large volume customer
select c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity)
from customer, orders, lineitem
where
