-- TPC-H Q15, truncated (tests/corpus/generate_tpch_mutations.py)
-- expect: 2
-- TPC-H Q15: top supplier (the revenue view as a CTE)
with revenue0 (supplier_no, total_revenue) as (
  select l_suppkey, sum(l_extendedprice * (1 - l_discount))
  from lineitem
  where l_shipdate >= date '1996-01-01' and
