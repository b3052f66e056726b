-- expect: 0
-- command: run
select n_name from nation order by upper(n_name)
