-- expect: 2
SELECT * FROM nation n JOIN region n ON n.n_regionkey = n.r_regionkey
