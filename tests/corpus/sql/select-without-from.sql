-- expect: 2
SELECT 1
