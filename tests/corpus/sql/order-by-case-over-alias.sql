-- expect: 0
-- command: run
select n_name as nm from nation order by case when nm like 'A%' then 0 else 1 end, nm
