-- expect: 2
-- contains: must appear in GROUP BY
SELECT n_name, n_regionkey, count(*) FROM nation GROUP BY n_regionkey
