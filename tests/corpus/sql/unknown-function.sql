-- expect: 2
-- command: run
SELECT no_such_function(n_name) FROM nation
