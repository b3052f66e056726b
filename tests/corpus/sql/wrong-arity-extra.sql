-- expect: 2
-- position: yes
-- command: run
SELECT upper(n_name, n_comment) FROM nation
