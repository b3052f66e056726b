-- expect: 2
SELECT 😀 FROM nation
