-- expect: 2
-- command: run
SELECT upper(n_name, n_comment) FROM nation
