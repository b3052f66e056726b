-- expect: 0
-- setup: foreign-statistics
-- command: run
SELECT count(*) AS n FROM nation
