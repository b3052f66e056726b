-- expect: 2
SELECT n_name FROM nation INTERSECT ALL SELECT r_name FROM region
