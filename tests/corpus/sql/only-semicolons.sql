-- expect: 2
-- contains: no statement
;;;
