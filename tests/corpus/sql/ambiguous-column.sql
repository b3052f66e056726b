-- expect: 2
-- contains: ambiguous column 'n_name'
-- contains: a.n_name
-- position: yes
SELECT n_name FROM nation a JOIN nation b ON a.n_nationkey = b.n_regionkey
