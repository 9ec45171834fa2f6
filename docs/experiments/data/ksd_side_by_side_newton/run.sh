#!/bin/bash
# Three alternating rounds: our KSD (the kernel without the divider) then SGMCMCJax's imq_KSD,
# the same workload (scripts/peer_ksd.py). Run from the repository root with
# SGMCMC=<sgmcmc binary> PY=<python of ../shared/bench/peers/setup.sh's venv>.
set -eu
out=docs/experiments/data/ksd_side_by_side_newton
for r in 1 2 3; do
  "$SGMCMC" bench --ksd --json $out/ours_run$r.json > $out/ours_run$r.txt 2>&1
  "$PY" scripts/peer_ksd.py > $out/peer_run$r.txt 2>&1
done
