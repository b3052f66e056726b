-- expect: 2
-- position: yes
-- contains: unknown table 'tpch.nation'
USE tpch;
SELECT n_name FROM nation
