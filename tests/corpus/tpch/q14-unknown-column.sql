-- TPC-H Q14, unknown-column (tests/corpus/generate_tpch_mutations.py)
-- expect: 2
-- TPC-H Q14: promotion effect
select 100.00 * sum(case when p_type like 'PROMO%' then l_extendedprice * (1 - l_discount) else 0 end)
       / sum(l_extendedprice * (1 - l_discount)) as promo_revenue
from lineitem, part
where l_partkey = p_partkey and l_shipdate >= date '1995-09-01'
  and l_shipdatex < date '1995-09-01' + interval '1' month