-- expect: 2
-- position: yes
SELECT n.r_name FROM nation n
