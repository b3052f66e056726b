-- expect: 2
-- position: yes
SELECT n_name,, n_regionkey FROM nation
