-- expect: 2
-- contains: reads itself
WITH nation AS (SELECT * FROM nation WHERE n_regionkey = 1) SELECT * FROM nation
