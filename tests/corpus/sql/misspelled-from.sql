-- expect: 2
SELECT n_name FORM nation
