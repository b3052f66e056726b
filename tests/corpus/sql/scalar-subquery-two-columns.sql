-- expect: 2
SELECT (SELECT r_regionkey, r_name FROM region) FROM nation
