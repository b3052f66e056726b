-- expect: 2
SET hive.auto.convert.join=sometimes;
SELECT n_name FROM nation
