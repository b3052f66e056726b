-- TPC-H Q4, unbalanced-quote (tests/corpus/generate_tpch_mutations.py)
-- expect: 2
-- TPC-H Q4: order priority checking
select o_orderpriority, count(*) as order_count
from orders
where o_orderdate >= date '1993-07-01 and o_orderdate < date '1993-07-01' + interval '3' month
  and exists (select * from lineitem where l_orderkey = o_orderkey and l_commitdate < l_receiptdate)
group by o_orderpriority
order by o_orderpriority