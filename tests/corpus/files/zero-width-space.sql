-- expect: 2
SELECT n_name​ FROM nation
