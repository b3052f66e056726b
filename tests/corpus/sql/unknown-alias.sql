-- expect: 2
SELECT x.n_name FROM nation n
