-- expect: 2
-- contains: unknown table
-- position: yes
SELECT * FROM natoin
