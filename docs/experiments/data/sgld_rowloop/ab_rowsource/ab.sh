#!/bin/sh
# base = binary of 9c9455e1, v2 = the RowSource build (adf83db2's code before its doc-comment edits); 2026-11-30 04:26-04:36 UTC, Intel Xeon VM model 167, nothing else running
# Alternating rounds: base (9c9455e1) then new, full SGLD bench.
out=${OUT:-/work/runs/ab61}
for r in 1 2 3; do
  for b in base v2; do
    /work/runs/bin/sgmcmc-$b bench --scheme block,uniform --batches 10000,1000 --precision f64,f32 --repeats 3 > $out/${b}_round$r.txt 2>&1
  done
done
