-- expect: 2
-- position: yes
-- contains: 3 value(s) where 2 are named
SELECT a FROM (VALUES (1, 'x'), (2, 'y', 3)) AS t(a, b)
