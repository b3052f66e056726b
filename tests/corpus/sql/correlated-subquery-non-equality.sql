-- expect: 2
SELECT (SELECT max(r_regionkey) FROM region r WHERE r.r_regionkey > n.n_regionkey) FROM nation n
