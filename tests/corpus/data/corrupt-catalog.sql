-- expect: 2
-- setup: corrupt-catalog
-- contains: catalog
SELECT * FROM nation
