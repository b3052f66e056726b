-- expect: 0
-- command: run
SELECT	n_nameFROM	nation WHERE n_regionkey = 3
