-- expect: 2
-- position: yes
SELECT n_regionkey, count(*) FROM nation GROUP BY n_regionkey HAVING
