-- expect: 2
-- contains: already exists
CREATE TABLE region AS SELECT * FROM nation
