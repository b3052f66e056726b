-- expect: 2
-- position: yes
SELECT n_name FROM nation LIMIT
