-- expect: 2
-- contains: --allow-overwrite
DROP TABLE nation
