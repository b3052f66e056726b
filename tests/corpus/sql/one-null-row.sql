-- expect: 0
-- command: run
SELECT avg(l_quantity) AS avg_yearly FROM lineitem WHERE l_quantity < 0
