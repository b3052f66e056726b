-- expect: 2
SET hive.exec.reducers.bytes.per.reducer=lots;
SELECT n_name FROM nation
