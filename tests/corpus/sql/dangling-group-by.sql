-- expect: 2
-- contains: GROUP BY is not followed
-- position: yes
SELECT sum(l_quantity) FROM lineitem GROUP BY
