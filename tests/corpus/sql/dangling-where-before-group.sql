-- expect: 2
-- position: yes
SELECT n_name, count(*) FROM nation WHERE GROUP BY n_name
