-- expect: 2
-- position: yes
-- contains: cannot read the temporary view t
CREATE TEMPORARY VIEW t AS SELECT * FROM nation;
CREATE VIEW v AS SELECT * FROM t
