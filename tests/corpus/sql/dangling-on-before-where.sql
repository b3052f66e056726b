-- expect: 2
-- position: yes
SELECT * FROM nation n JOIN region r ON WHERE r_name = 'ASIA'
