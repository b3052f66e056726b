-- expect: 2
-- contains: reads itself
-- position: yes
WITH x AS (SELECT * FROM x) SELECT * FROM x
