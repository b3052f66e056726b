-- expect: 0
-- command: run
SELECT n_name, NULL AS nothing FROM nation
