"""Summarise a `sgmcmc experiment mamba-bnn` report with several final runs per choice.

Prints, per sampler: each method's choice, ECE mean ± sd and range over the runs, MCE, accuracy,
iterations and draws; how many runs (paired by seed) have MAMBA-KSD's ECE below both baselines';
and how many of each method's runs are below the MAP-only control's ECE.

Usage: python summary.py report.json [map_control_ece_percent]
"""

import json
import statistics
import sys

MAP_ECE = 1.79  # % (mamba_bnn_map_control.json, the same Adam MAP)


def pct(xs: list[float]) -> list[float]:
    return [100.0 * x for x in xs]


def main() -> None:
    with open(sys.argv[1]) as f:
        report = json.load(f)
    map_ece = float(sys.argv[2]) if len(sys.argv) > 2 else MAP_ECE
    h = report["settings"]["harness"]
    print(
        f"final runs: {h['final_runs']} x {h['final_seconds']} s, seeds {h['seed']}..; "
        f"MAP-only ECE {map_ece} %"
    )
    print(
        "| sampler | method | choice | ECE % mean ± sd (min–max) | MCE % | accuracy % | "
        "iterations | draws | runs below the MAP's ECE |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for s in report["samplers"]:
        for m in s["methods"]:
            runs = [r for r in m["runs"] if not r["diverged"]]
            ece = pct([r["ece"] for r in runs])
            sd = statistics.stdev(ece) if len(ece) > 1 else 0.0
            mce = statistics.mean(pct([r["mce"] for r in runs]))
            acc = statistics.mean(pct([r["accuracy"] for r in runs]))
            its = statistics.mean(r["iterations"] for r in runs)
            draws = [r["predictive_draws"] for r in runs]
            below = sum(e < map_ece for e in ece)
            diverged = len(m["runs"]) - len(runs)
            note = f" ({diverged} diverged)" if diverged else ""
            print(
                f"| {s['sampler']} | {m['method']} | {m['choice']} | "
                f"{statistics.mean(ece):.2f} ± {sd:.2f} ({min(ece):.2f}–{max(ece):.2f}){note} | "
                f"{mce:.1f} | {acc:.1f} | {its:.0f} | {min(draws)}–{max(draws)} | "
                f"{below} of {len(runs)} |"
            )
    print()
    print(
        "| sampler | MAMBA's mean ECE below both baselines' "
        "| runs where MAMBA's ECE is below both (paired by seed) |"
    )
    print("|---|---|---|")
    for s in report["samplers"]:
        by = {m["method"]: {r["seed"]: r for r in m["runs"]} for m in s["methods"]}
        mamba = by["MAMBA-KSD"]
        others = [by[k] for k in by if k != "MAMBA-KSD"]
        wins = 0
        for seed, r in mamba.items():
            if r["diverged"]:
                continue
            if all(
                seed in o and (o[seed]["diverged"] or r["ece"] < o[seed]["ece"])
                for o in others
            ):
                wins += 1
        means = {
            k: statistics.mean(x["ece"] for x in v.values() if not x["diverged"])
            for k, v in by.items()
        }
        below = all(
            means["MAMBA-KSD"] < v for k, v in means.items() if k != "MAMBA-KSD"
        )
        print(
            f"| {s['sampler']} | {'yes' if below else 'no'} | {wins} of {len(mamba)} |"
        )
    print()
    print("ECE (%) against time, mean ± 2 sd over the runs:")
    for s in report["samplers"]:
        for m in s["methods"]:
            c = m["curve"]
            cells = []
            for i, t in enumerate(c["seconds"]):
                v = [100.0 * run[i] for run in c["runs"] if run[i] is not None]
                if not v:
                    cells.append(f"{t:.0f} s: n/a")
                    continue
                sd = statistics.stdev(v) if len(v) > 1 else 0.0
                cells.append(f"{t:.0f} s: {statistics.mean(v):.2f} ± {2 * sd:.2f}")
            print(f"  {s['sampler']} / {m['method']}: " + "; ".join(cells))


if __name__ == "__main__":
    main()
