-- expect: 0
-- command: run
SELECT concat(n_name, ', "x"') AS q, concat(' ', n_name, ' ') AS spaced FROM nation
