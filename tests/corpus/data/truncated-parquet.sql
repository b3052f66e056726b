-- expect: 1
-- setup: truncated-file
-- command: run
-- contains: part-0.parquet
SELECT * FROM t
