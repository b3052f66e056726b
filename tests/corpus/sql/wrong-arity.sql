-- expect: 2
-- position: yes
-- command: run
SELECT substr() FROM nation
