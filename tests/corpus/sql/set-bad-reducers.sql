-- expect: 2
SET spark.sql.shuffle.partitions=zero;
SELECT n_name FROM nation
