-- expect: 2
-- contains: is not a valid date
-- position: yes
SELECT n_name FROM nation WHERE DATE 'not-a-date' > DATE '2020-01-01'
