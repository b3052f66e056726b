-- expect: 0
-- command: run
-- Literal rows joined with a table (a lookup written inline).
SELECT n_name, label FROM nation JOIN (VALUES (1, 'one'), (2, 'two'), (3, NULL)) AS t(k, label) ON n_nationkey = t.k
