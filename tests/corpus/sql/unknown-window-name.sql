-- expect: 2
-- contains: no window named
SELECT rank() OVER v FROM nation WINDOW w AS (ORDER BY n_name)
