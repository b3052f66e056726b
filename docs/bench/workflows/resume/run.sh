#!/usr/bin/env bash
# Resume after a kill at the last statement of a 10-statement workflow, against a full rerun (TPC-H SF 1).
set -u

H=${AIPQ_HOME:-~/.aipq}
mkdir -p $H/bench-resume
W=$H/bench-resume/nightly.sql  # one path: tables a workflow file created count as its own on later runs
rm -f $W
# nine tables from TPC-H queries, then a SELECT that joins two of them
for n in 1 3 5 7 9 10 13 18 21; do
  { echo "create or replace table rb_q$n as"; aipq --home $H tpch query $n | grep -v '^--' | sed 's/;*$//'; echo ";"; } >> $W
done
echo "select q5.n_name, q5.revenue, q9.sum_profit from rb_q5 q5 join rb_q9 q9 on q5.n_name = q9.nation
where q9.o_year = 1995 order by q5.n_name;" >> $W
aipq --home $H run $W --quiet --allow-overwrite > /dev/null 2>&1   # warm-up; makes the tables this file's own
for round in 1 2; do
  s=$(date +%s.%N); aipq --home $H run $W --quiet > /dev/null 2>&1; e=$(date +%s.%N)
  full=$(echo "$e - $s" | bc)
  AIPQ_KILL_AT=statement@10 aipq --home $H run $W --quiet > /dev/null 2>&1; killed=$?
  s=$(date +%s.%N); aipq --home $H run $W --quiet --resume > /dev/null 2>&1; rc=$?; e=$(date +%s.%N)
  resumed=$(echo "$e - $s" | bc)
  echo "round $round: full rerun ${full} s; killed exit $killed; resume ${resumed} s (exit $rc); ratio $(echo "scale=2; $full / $resumed" | bc)"
done
