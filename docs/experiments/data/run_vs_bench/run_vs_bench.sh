#!/bin/bash
# sgmcmc run (thin 1, one chain, synthetic 1M x 10 logistic, batch 10,000) against sgmcmc bench on
# the same workload, alternating, REPEATS times per scheme. Run from the repository root.
B=./target/release/sgmcmc
D=docs/experiments/data/run_vs_bench
echo "# $(date -u +%F' '%H:%M) UTC, commit $(git rev-parse --short HEAD)"
for r in $(seq 1 ${REPEATS:-6}); do
  echo "## repeat $r"
  for s in block uniform; do
    rm -rf /tmp/rvb_out
    echo "run $s: $($B run $D/run_$s.toml --out /tmp/rvb_out 2>&1 | grep 'per chain')"
    echo "bench: $($B bench --precision f64 --batches 10000 --scheme $s --seconds 1 --repeats 3 2>&1 | grep -E "^f64 +$s")"
  done
done
