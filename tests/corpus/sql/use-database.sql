-- expect: 2
USE tpch
