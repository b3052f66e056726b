-- expect: 2
-- position: yes
SELECT
