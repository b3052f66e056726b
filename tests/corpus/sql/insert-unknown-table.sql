-- expect: 2
-- contains: unknown table
INSERT INTO no_such_table SELECT * FROM nation
