#!/usr/bin/env bash
# Seconds per coreset run (M = 1000, 3,000 iterations, one thread) on the two slice-sampler
# problems, before and after the vectorised log-likelihoods, in alternating rounds.
# Usage: OLD=<binary> NEW=<binary> ab.sh   (from the repository root, ../shared present)
set -euo pipefail
out=$(dirname "$0")
rounds=${ROUNDS:-3}
for round in $(seq 1 "$rounds"); do
    for side in OLD NEW; do
        bin=${!side}
        for problem in nba bike; do
            if [ "$problem" = nba ]; then
                flags=(--nba ../shared/data/nba-games --nuts-warmup 100 --nuts-draws 100)
            else
                flags=(--bike-sharing ../shared/data/bike-sharing-poisson)
            fi
            echo "== round $round $side $problem"
            RAYON_NUM_THREADS=1 "$bin" experiment coreset-fig1 --no-gaussian "${flags[@]}" \
                --sizes 1000 --iterations 3000 --trials 1 --learning-rates 1 \
                --out "/tmp/coreset_speed_$side" 2>&1 | grep "per run"
        done
    done
done
