#!/bin/bash
# MAMBA with the paper's FSSD-opt kernel (IMQ, c = 1; `metric = "fssd_imq"`) on run 4's six run
# files, everything else unchanged. Run from the repository root. Writes
# OUT/NAME/{tune.json,rounds.csv,winner.toml,stdout.txt,time.txt}; the draws are not kept.
set -euo pipefail
SGMCMC=${SGMCMC:-target/release/sgmcmc}
OUT=${OUT:-mamba_logreg_fssd_imq}
mkdir -p "$OUT"
for s in sgld sgld-cv sghmc sghmc-cv sgnht sgnht-cv; do
  mkdir -p "$OUT/$s"
  sed 's/^metric = "ksd"$/metric = "fssd_imq"/' "docs/experiments/data/mamba_logreg_run4/configs/$s.toml" > "$OUT/$s/run.toml"
  /usr/bin/time -v "$SGMCMC" tune "$OUT/$s/run.toml" --out "$OUT/$s/tune" --overwrite \
    > "$OUT/$s/stdout.txt" 2> "$OUT/$s/time.txt"
  mv "$OUT/$s/tune/"{tune.json,rounds.csv,winner.toml} "$OUT/$s/"; rm -rf "$OUT/$s/tune"
done
