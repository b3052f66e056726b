-- expect: 0
-- command: run
select n_name, n_regionkey from nation order by concat(n_name, '-', n_regionkey) desc
