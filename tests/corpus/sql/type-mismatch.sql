-- expect: 2
-- position: yes
-- command: run
SELECT n_name FROM nation WHERE n_nationkey = array(1)
