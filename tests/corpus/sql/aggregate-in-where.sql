-- expect: 2
-- contains: HAVING
-- position: yes
SELECT n_name FROM nation WHERE count(*) > 1
