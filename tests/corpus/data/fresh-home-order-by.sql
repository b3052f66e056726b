-- expect: 0
-- setup: tables
-- command: run
SELECT r_name FROM region ORDER BY r_name
