-- expect: 2
-- position: yes
SELECT max(count(*)) FROM nation
