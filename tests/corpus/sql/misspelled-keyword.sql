-- expect: 2
SELEC n_name FROM nation
