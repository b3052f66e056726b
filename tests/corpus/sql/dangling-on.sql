-- expect: 2
-- contains: ON is not followed by a join condition
-- position: yes
SELECT * FROM lineitem l JOIN orders o ON
