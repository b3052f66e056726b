-- expect: 2
-- contains: IF EXISTS
DROP TABLE no_such_table
