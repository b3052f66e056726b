-- expect: 2
-- contains: --allow-overwrite
INSERT OVERWRITE TABLE nation SELECT * FROM nation
