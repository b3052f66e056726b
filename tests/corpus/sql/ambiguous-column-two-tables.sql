-- expect: 2
-- contains: ambiguous
SELECT n_name FROM nation JOIN (SELECT n_nationkey AS k, n_name FROM nation) t ON n_nationkey = t.k
