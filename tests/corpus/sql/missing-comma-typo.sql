-- expect: any
SELECT n_name n_regionkey FROM nation
