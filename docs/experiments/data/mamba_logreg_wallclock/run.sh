#!/bin/bash
# Must-show 3 of the MAMBA issue on a quiet machine: `sgmcmc tune` (MAMBA, MAP included) on each of
# run 4's six run files, timed by GNU time. Run from the repository root with nothing else running
# (on 2026-11-29 the two background experiments were paused with kill -STOP during these 55 s).
# Writes OUT/NAME/{tune.json,rounds.csv,winner.toml,stdout.txt,time.txt}; the draws are not kept.
set -euo pipefail
SGMCMC=${SGMCMC:-target/release/sgmcmc}
OUT=${OUT:-mamba_logreg_wallclock}
mkdir -p "$OUT"
for s in sgld sgld-cv sghmc sghmc-cv sgnht sgnht-cv; do
  /usr/bin/time -v "$SGMCMC" tune "docs/experiments/data/mamba_logreg_run4/configs/$s.toml" \
    --out "$OUT/$s" --overwrite > "$OUT/$s.stdout.txt" 2> "$OUT/$s.time.txt"
  mv "$OUT/$s.stdout.txt" "$OUT/$s/stdout.txt"; mv "$OUT/$s.time.txt" "$OUT/$s/time.txt"
  rm -rf "$OUT/$s/winner_draws.zarr" "$OUT/$s/checkpoints"
done
