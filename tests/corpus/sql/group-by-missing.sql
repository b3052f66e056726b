-- expect: 2
-- position: yes
-- contains: must appear in GROUP BY
SELECT n_name, count(*) FROM nation
