#!/bin/sh
# v2 = binary of adf83db2 (RowSource), v3 = the fused-sigma build (9bbd4984 before a rename and doc edits: the same code); 2026-11-30 05:13-05:23 UTC, model 167, nothing else running
# Alternating rounds: the RowSource build (adf83db2) then the fused-σ build, full SGLD bench.
out=${OUT:-/work/runs/ab62}
for r in 1 2 3; do
  for b in v2 v3; do
    /work/runs/bin/sgmcmc-$b bench --scheme block,uniform --batches 10000,1000 --precision f64,f32 --repeats 3 > $out/${b}_round$r.txt 2>&1
  done
done
