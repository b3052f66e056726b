-- expect: any
SELECT o_orderkey, '2020-01-01' + o_orderdate FROM orders WHERE o_orderkey < 10
