-- expect: 0
-- command: run
SELECT r_name, r_regionkey + '10' AS x FROM region
