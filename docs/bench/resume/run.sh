#!/usr/bin/env bash
# Resume after a kill at the last statement of a 10-statement workflow, against a full rerun (TPC-H SF 1).
set -u

H=${AIPQ_HOME:-~/.aipq}
W=docs/bench/resume/nightly.sql
aipq --home $H run $W --quiet --allow-overwrite > /dev/null 2>&1   # warm-up; makes the tables this file's own
for round in 1 2; do
  s=$(date +%s.%N); aipq --home $H run $W --quiet > /dev/null 2>&1; e=$(date +%s.%N)
  full=$(echo "$e - $s" | bc)
  AIPQ_KILL_AT=statement@10 aipq --home $H run $W --quiet > /dev/null 2>&1; killed=$?
  s=$(date +%s.%N); aipq --home $H run $W --quiet --resume > /dev/null 2>&1; rc=$?; e=$(date +%s.%N)
  resumed=$(echo "$e - $s" | bc)
  echo "round $round: full rerun ${full} s; killed exit $killed; resume ${resumed} s (exit $rc); ratio $(echo "scale=2; $full / $resumed" | bc)"
done
