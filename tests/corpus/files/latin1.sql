-- expect: 2
-- contains: UTF-8
SELECT 'café' AS c FROM nation
