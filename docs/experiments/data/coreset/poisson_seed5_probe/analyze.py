"""Prints the seed-5 probe's table (coreset_fig1.md): each run's metric at its last training
iteration (the experiment's final metric: the command's trace equals the experiment trial's bit
for bit up to there, and goes one sweep further for its 2 draws), the weight on
the coreset's rows whose covariate 5 is below -10 sd (19 rows of the data), and its largest
weights. Run from the repository root: python3 docs/experiments/data/coreset/poisson_seed5_probe/analyze.py"""

import csv
import math
import json
from pathlib import Path

here = Path(__file__).parent
data = here.parents[4] / ".." / "shared" / "data" / "bike-sharing-poisson" / "poisson_reg.csv"
rows = [[float(v) for v in r] for r in csv.reader(open(data))]
outliers = {i for i, r in enumerate(rows) if r[5] < -10}
print(f"{len(outliers)} rows with covariate 5 below -10 sd: "
      f"{sorted((round(rows[i][5], 1), int(rows[i][9])) for i in outliers)} (value, count)")
print("| run | iterations | final metric | total weight / N | outlier rows in the coreset: row (count) weight | three largest weights: row (covariate 5, count) weight |")
print("|---|---|---|---|---|---|")
runs = [(path.stem, json.loads(path.read_text())) for path in here.glob("*.json")]
runs.sort(key=lambda r: (r[0].split("_seed")[0], r[1]["config"]["coreset"]["seed"], r[1]["config"]["coreset"]["iterations"]))
for stem, c in runs:
    points, weights = c["points"], c["weights"]
    out = ", ".join(f"{p} ({int(rows[p][9])}) {w:.1f}" for p, w in zip(points, weights) if p in outliers)
    top = sorted(range(len(weights)), key=lambda k: -weights[k])[:3]
    big = ", ".join(f"{points[k]} ({rows[points[k]][5]:.1f}, {int(rows[points[k]][9])}) {weights[k]:.0f}" for k in top)
    print(f"| {stem} | {c['config']['coreset']['iterations']:,} | {dict(map(tuple, c['metric']))[c['config']['coreset']['iterations']]!r} | "
          f"{sum(weights) / c['num_data']:.2f} | {out or 'none'} | {big} |")

# The largest weight's row against the reference: its count and its predicted rate softplus(x·θ)
# at the Stan posterior mean (the Stan files put the intercept first; the data's column 8 is the
# constant 1 and column 9 the count).
moments = here.parents[4] / ".." / "shared" / "data" / "bike-sharing-poisson" / "stan_posterior_mean.csv"
mean = [float(v) for r in csv.reader(open(moments)) for v in r if v.strip()]


def predicted_rate(row):
    eta = mean[0] + sum(b * x for b, x in zip(mean[1:], row[:8]))
    return eta if eta > 30 else math.log1p(math.exp(eta))


print()
print("| run | M | largest weight: row, weight / N | its count | its predicted rate at the reference mean |")
print("|---|---|---|---|---|")
for stem, c in runs:
    points, weights = c["points"], c["weights"]
    k = max(range(len(weights)), key=lambda k: weights[k])
    row = rows[points[k]]
    print(f"| {stem} | {c['config']['coreset']['size']} | {points[k]}, {weights[k] / c['num_data']:.3g} | "
          f"{int(row[9])} | {predicted_rate(row):.3g} |")
