-- TPC-H Q14, truncated (tests/corpus/generate_tpch_mutations.py)
-- expect: 2
-- TPC-H Q14: promotion effect
select
