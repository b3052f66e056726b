-- expect: 1
-- setup: missing-file
-- command: run
-- contains: table add
SELECT * FROM t
