-- TPC-H Q16, truncated (tests/corpus/generate_tpch_mutations.py)
-- expect: 2
-- TPC-H Q16: parts/supplier relationship
select p_brand, p_type, p_size, count(distinct ps_suppkey) as supplier_cnt
from partsupp, part
where p_partkey = ps_partkey and p_brand <> 'Brand#45' and p_type not like 'MEDIUM POLISHED%'
  and
