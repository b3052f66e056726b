-- expect: 2
-- position: yes
SELECT n_name FROM nation WHERE n_nationkey > 1 OR ORDER BY n_name
