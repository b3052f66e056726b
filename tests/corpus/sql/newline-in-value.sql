-- expect: 0
-- command: run
SELECT concat(n_name, '\n', r_name) AS two_lines FROM nation JOIN region ON n_regionkey = r_regionkey
