-- expect: 2
INSERT INTO nation VALUES (1, 'x', 1, 'y')
