-- expect: 2
-- command: run
SELECT substr() FROM nation
