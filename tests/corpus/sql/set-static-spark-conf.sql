-- expect: 2
-- command: run
-- contains: cannot change while it runs
SET spark.executor.memory=3g;
SELECT r_name FROM region;
