-- TPC-H Q22, truncated (tests/corpus/generate_tpch_mutations.py)
-- expect: 2
-- TPC-H Q22: global sales opportunity
select cntrycode, count(*) as numcust, sum(c_acctbal) as totacctbal
from (
  select substring(c_phone, 1, 2) as cntrycode, c_acctbal
  from customer
  where
