#!/usr/bin/env bash
# Why Hot DoG stalls on Poisson's seed 5 at M = 1000 (coreset_fig1.md): `sgmcmc coreset` runs
# that repeat trials of `sgmcmc experiment coreset-fig1` (same seed, M, optimiser, kernel and
# chain starts, so the same chains: the final metrics equal the experiment's) and keep their
# final weights. Writes NAME.json (each run's coreset.json: points, weights, metric) here;
# analyze.py prints the table. Run from the repository root (NAME...: only those runs):
#   SGMCMC=target/release/sgmcmc docs/experiments/data/coreset/poisson_seed5_probe/run.sh [NAME...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data="$(cd "$here/../../../../.." && pwd)/../shared/data/bike-sharing-poisson"
sgmcmc="${SGMCMC:-sgmcmc}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
run() { # name seed iterations optimiser hot_start_enabled [subsample_scheme [size]]
    if [ -n "${only:-}" ] && [[ " $only " != *" $1 "* ]]; then return; fi
    cat > "$work/$1.toml" <<TOML
[data]
bike_sharing = "$data"

[model]
kind = "poisson"
link = "softplus"
prior_variance = 1.0

[coreset]
seed = $2
size = ${7:-1000}
iterations = $3
draws = 2
record_every = $(($3 / 100))
kernel = { kind = "slice" }
subsample_scheme = "${6:-uniform}"
optimiser = $4
hot_start = { enabled = $5 }

[evaluation]
reference = "$data"
TOML
    RAYON_NUM_THREADS=1 "$sgmcmc" coreset "$work/$1.toml" --out "$work/$1" > "$work/$1.log"
    cp "$work/$1/coreset.json" "$here/$1.json"
    tail -n 3 "$work/$1.log" | head -n 2
}
only="$*"
hot='{ kind = "hot_dog", r = 1e-3 }'
adam='{ kind = "adam", learning_rate = 1.0 }'
for seed in 1 2 3 4 5; do run "hot_dog_seed${seed}_40k" "$seed" 40000 "$hot" true; done
run hot_dog_seed5_200k 5 200000 "$hot" true
# The reference code's subsample scheme (a deterministic cyclic scan over the data).
run hot_dog_cyclic_scan_seed5_40k 5 40000 "$hot" true cyclic_scan
for it in 40000 60000 80000 100000 200000; do run "adam1_seed5_$((it / 1000))k" 5 "$it" "$adam" false; done
# M = 500: the two trials (seeds 5 and 9) in which Hot DoG stalls at the paper's length.
for seed in 5 9; do run "hot_dog_m500_seed${seed}_200k" "$seed" 200000 "$hot" true uniform 500; done
