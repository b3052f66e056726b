-- expect: 2
-- contains: unknown column 'nope'
SELECT n_name FROM nation;
SELECT nope FROM region
