-- expect: 2
SELECT max(count(*)) FROM nation
