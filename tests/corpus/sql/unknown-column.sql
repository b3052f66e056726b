-- expect: 2
-- contains: unknown column
-- position: yes
SELECT n_nmae FROM nation
