-- expect: 2
CREATE TABLE corpus_t1 AS SELECT n_nationkey, n_name FROM nation;
INSERT INTO corpus_t1 SELECT n_nationkey FROM nation
