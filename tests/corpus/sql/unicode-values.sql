-- expect: 0
-- command: run
SELECT concat(n_name, ' ñ ü 中') AS u FROM nation
