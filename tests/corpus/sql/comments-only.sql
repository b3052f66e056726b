-- expect: 2
-- contains: no statement
-- nothing here
/* nor here */
