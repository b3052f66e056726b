-- expect: any
SELECT n_nationkey, 2147483647 + 1 AS big FROM nation
