-- TPC-H Q13, truncated (tests/corpus/generate_tpch_mutations.py)
-- expect: 2
-- TPC-H Q13: customer distribution
select c_count, count(*) as custdist
from (
  select c_custkey, count(o_orderkey)
  from customer left outer join orders on
