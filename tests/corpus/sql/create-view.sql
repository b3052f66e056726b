-- expect: 2
CREATE VIEW v AS SELECT * FROM nation
