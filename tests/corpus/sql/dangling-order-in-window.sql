-- expect: 2
-- position: yes
SELECT n_name, rank() OVER (PARTITION BY n_regionkey ORDER BY) FROM nation
