-- expect: 2
-- contains: cannot read the SQL text
SELECT 'abc FROM nation
