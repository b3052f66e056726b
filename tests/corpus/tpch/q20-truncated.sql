-- TPC-H Q20, truncated (tests/corpus/generate_tpch_mutations.py)
-- expect: 2
-- TPC-H Q20: potential part promotion
select s_name, s_address
from supplier, nation
where s_suppkey in (
    select ps_suppkey
    from
