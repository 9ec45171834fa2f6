#!/usr/bin/env python3
"""Per-parameter comparison of an `sgmcmc run` summary.json with a reference posterior.

Usage: compare.py SUMMARY.json REFERENCE
REFERENCE is a JSON file from `sgmcmc reference` (mean, sd, parameter_names) or the
bike-sharing data directory (Stan's mean and covariance, intercept first in the files).
Prints one line per parameter and a last line: the sd ratio range, how many parameters are
within 10 %, the largest |mean difference| in reference sds, the largest R-hat, the bias check.
Standard library only.
"""
import csv
import json
import os
import sys


def reference(path):
    if os.path.isdir(path):
        mean = [float(x) for x in next(csv.reader(open(os.path.join(path, "stan_posterior_mean.csv"))))]
        cov = [[float(x) for x in row] for row in csv.reader(open(os.path.join(path, "stan_posterior_cov.csv")))]
        order = list(range(1, 9)) + [0]  # files: intercept, x1..x8; model: x1..x8, intercept
        names = [f"x{j}" for j in range(1, 9)] + ["intercept"]
        return dict(zip(names, ((mean[f], cov[f][f] ** 0.5) for f in order)))
    r = json.load(open(path))
    return dict(zip(r["parameter_names"], zip(r["mean"], r["sd"])))


def main():
    summary = json.load(open(sys.argv[1]))
    ref = reference(sys.argv[2])
    ratios, shifts = [], []
    print(f"{'parameter':<12} {'mean':>11} {'ref mean':>11} {'sd':>10} {'ref sd':>10} {'ratio':>7} {'r_hat':>7}")
    for p in summary["parameters"]:
        m, s = ref[p["name"]]
        ratios.append((p["sd"] / s, p["name"]))
        shifts.append(abs(p["mean"] - m) / s)
        print(f"{p['name']:<12} {p['mean']:11.5f} {m:11.5f} {p['sd']:10.5f} {s:10.5f} {p['sd'] / s:7.3f} {p['rhat']:7.4f}")
    ratios.sort()
    within = sum(1 for r, _ in ratios if abs(r - 1) <= 0.10)
    check = summary.get("bias_check", {})
    if check.get("status") == "done":
        test = check.get("test") or {}
        ids = check["identities"]
        verdict = (f"bias check {'passed' if check['passed'] else 'FAILED'}: KSD p = {test.get('p_value')}, "
                   f"worst E[s*phi] = {ids['spread']['error'] - 1:.3f} (z = {ids['spread']['z']:.1f}), "
                   f"worst E[s] = {ids['location']['error']:.3f} (z = {ids['location']['z']:.1f})")
    else:
        verdict = f"bias check: {check}"
    print(f"SUMMARY sd ratio {ratios[0][0]:.3f} ({ratios[0][1]}) to {ratios[-1][0]:.3f} ({ratios[-1][1]}); "
          f"{within} of {len(ratios)} within 10 %; max |mean diff| {max(shifts):.3f} ref sd; "
          f"max R-hat {max(p['rhat'] for p in summary['parameters']):.4f}; {verdict}")


main()
