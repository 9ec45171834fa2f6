#!/bin/bash
# Three alternating rounds of the division build (base, commit 3481026) and the Newton build.
out=/work/main/docs/experiments/data/ksd_newton
for r in 1 2 3; do
  for b in base newton; do
    /work/runs/bin/sgmcmc-$b bench --ksd --json $out/${b}_$r.json > $out/${b}_$r.txt 2>&1
  done
done
echo finished > /tmp/kb/ab.done
