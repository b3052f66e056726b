-- TPC-H Q21, truncated (tests/corpus/generate_tpch_mutations.py)
-- expect: 2
-- TPC-H Q21: suppliers who kept orders waiting
select s_name, count(*) as numwait
from supplier, lineitem l1, orders, nation
where s_suppkey = l1.l_suppkey and o_orderkey = l1.l_orderkey and o_orderstatus = 'F'
  and
