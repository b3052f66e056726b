-- TPC-H Q2, truncated (tests/corpus/generate_tpch_mutations.py)
-- expect: 2
-- TPC-H Q2: minimum cost supplier
select s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
from
