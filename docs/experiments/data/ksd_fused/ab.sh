#!/usr/bin/env bash
# Alternating rounds of `sgmcmc bench --ksd`: OLD (the tile-GEMM KSD) then NEW (the fused pair
# kernel), ROUNDS times, from the repository root. Usage: OLD=bin NEW=bin ab.sh
set -euo pipefail
out=docs/experiments/data/ksd_fused
for r in $(seq 1 "${ROUNDS:-3}"); do
  "$OLD" bench --ksd --json "$out/old_run$r.json" > "$out/old_run$r.txt"
  "$NEW" bench --ksd --json "$out/new_run$r.json" > "$out/new_run$r.txt"
done
