-- expect: 2
-- position: yes
-- contains: :4:8
SELECT n_nmae FROM nation
