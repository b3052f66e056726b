-- expect: 0
-- command: run
-- INTERSECT ALL keeps a row as often as both inputs hold it (region keys: each once; nation's: five times each).
SELECT n_regionkey FROM nation INTERSECT ALL SELECT r_regionkey FROM region JOIN nation ON r_regionkey = n_regionkey WHERE n_nationkey < 12
