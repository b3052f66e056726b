-- expect: 2
SELECT select FROM nation
