-- TPC-H Q9, truncated (tests/corpus/generate_tpch_mutations.py)
-- expect: 2
-- TPC-H Q9: product type profit measure
select nation, o_year, sum(amount) as sum_profit
from (
  select n_name as nation, extract(year from o_orderdate) as o_year,
         l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity as amount
  from part, supplier, lineitem, partsupp, orders, nation
  where s_suppkey = l_suppkey and ps_suppkey = l_suppkey and
