-- expect: 2
-- position: yes
-- command: run
SELECT no_such_function(n_name) FROM nation
