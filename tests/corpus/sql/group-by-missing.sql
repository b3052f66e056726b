-- expect: 2
-- contains: must appear in GROUP BY
SELECT n_name, count(*) FROM nation
