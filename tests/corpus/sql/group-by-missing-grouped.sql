-- expect: 2
-- position: yes
-- contains: must appear in GROUP BY
SELECT n_name, n_regionkey, count(*) FROM nation GROUP BY n_regionkey
