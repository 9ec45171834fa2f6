#!/usr/bin/env bash
# Reproduces docs/experiments/default_path.md (issue 22, must-shows 1 and 2) from the
# repository root: sgmcmc run on the three data sets with no sampler settings, their
# references, the biased hand-set configurations, and the comparisons. Needs ../shared.
# The 1M-row NUTS reference takes ~12 minutes on 2 cores; the rest ~5 minutes.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
OUT=docs/experiments/data/default_path
BIN=target/release/sgmcmc
cargo build --release
run() {  # name, config, [reference]
  local name=$1 config=$2
  local t0=$(date +%s.%N)
  "$BIN" run "$config" --out "target/default_path/$name" > "$OUT/$name.log" 2>&1
  local t1=$(date +%s.%N)
  python3 -c "print(f'wall seconds: {$t1 - $t0:.1f}')" >> "$OUT/$name.log"
  cp "target/default_path/$name/summary.json" "$OUT/$name.summary.json"
  cp "target/default_path/$name/diagnostics.svg" "$OUT/$name.diagnostics.svg"
  if [ $# -ge 3 ]; then
    python3 "$OUT/compare.py" "$OUT/$name.summary.json" "$3" > "$OUT/$name.compare.txt"
  fi
}
# References (NUTS with the dense Laplace metric; bike sharing: the Stan moments shipped with the data).
[ -f "$OUT/a9a.nuts.json" ] || "$BIN" reference examples/a9a_libsvm.toml --seed 3 --dense-metric --out "$OUT/a9a.nuts.json" > "$OUT/a9a.nuts.log" 2>&1
[ -f "$OUT/logistic_1m.nuts.json" ] || "$BIN" reference examples/demo.toml --seed 3 --dense-metric --out "$OUT/logistic_1m.nuts.json" > "$OUT/logistic_1m.nuts.log" 2>&1
# Must-show 1: the default path.
run a9a examples/a9a_libsvm.toml "$OUT/a9a.nuts.json"
run bike examples/bike_sharing.toml ../shared/data/bike-sharing-poisson
run demo examples/demo.toml "$OUT/logistic_1m.nuts.json"   # what `sgmcmc demo` runs
# Must-show 2: hand-set configurations, with the bias check's verdict.
run bike_sgld_1e-4 "$OUT/configs/bike_sgld_1e-4.toml" ../shared/data/bike-sharing-poisson
run bike_sgld_cv_1e-4 "$OUT/configs/bike_sgld_cv_1e-4.toml" ../shared/data/bike-sharing-poisson
run bike_sgld_1e-6 "$OUT/configs/bike_sgld_1e-6.toml" ../shared/data/bike-sharing-poisson
run a9a_sgld_shipped "$OUT/configs/a9a_sgld_shipped.toml" "$OUT/a9a.nuts.json"
run a9a_sgld_cv "$OUT/configs/a9a_sgld_cv.toml" "$OUT/a9a.nuts.json"
grep -h SUMMARY "$OUT"/*.compare.txt
