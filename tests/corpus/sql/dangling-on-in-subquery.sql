-- expect: 2
-- position: yes
SELECT * FROM nation WHERE n_regionkey IN (SELECT r_regionkey FROM region r JOIN nation m ON)
