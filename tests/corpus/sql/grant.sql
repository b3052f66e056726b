-- expect: 2
-- contains: GRANT
GRANT SELECT ON nation TO bob
