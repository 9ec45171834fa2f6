#!/usr/bin/env python3
"""Trial-by-trial comparison of Hot DoG with each ADAM learning rate in a coreset-fig1 report.

Usage: python3 paired.py <run dir or report.json> [...]

Trial t of every optimiser uses the same seed (the same coreset points and initial state), so
the comparison is paired: for each problem, coreset size M and ADAM rate, it counts the trials in
which Hot DoG's final metric (the paper's Fig. 1 y-axis) is below ADAM's, and prints the medians.
"""

import json
import statistics
import sys
from pathlib import Path
from typing import Any


def label(optimiser: dict[str, Any]) -> str:
    kind = optimiser["kind"]
    if kind == "Untrained":
        return "untrained"
    ((name, params),) = kind.items()
    if name == "HotDog":
        return f"Hot DoG r={params['r']:g}"
    if name == "Adam":
        return f"ADAM {params['learning_rate']:g}"
    return f"{name} {params}"


def main(paths: list[str]) -> None:
    for arg in paths:
        path = Path(arg)
        report = json.loads((path / "report.json" if path.is_dir() else path).read_text())
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for cell in report["cells"]:
            groups.setdefault((cell["problem"], str(cell["size"])), []).append(cell)
        print(f"== {arg}")
        for (problem, size), cells in groups.items():
            hot = [c for c in cells if "HotDog" in c["optimiser"]["kind"]]
            adam = [c for c in cells if "Adam" in str(c["optimiser"]["kind"])]
            if len(hot) != 1:
                continue
            h = hot[0]["final_metric"]
            median = statistics.median(h)
            print(f"{problem}, M = {size}: Hot DoG median {median:.4g} over {len(h)} trials")
            for c in sorted(adam, key=lambda c: c["optimiser"]["kind"]["Adam"]["learning_rate"]):
                a = c["final_metric"]
                n = min(len(a), len(h))
                below = sum(h[t] < a[t] for t in range(n))
                ratio = statistics.median(a[:n]) / statistics.median(h[:n])
                print(
                    f"  {label(c['optimiser']):>14}: median {statistics.median(a):.4g}; "
                    f"Hot DoG below in {below} of {n} trials; median ratio {ratio:.3g}"
                )


if __name__ == "__main__":
    main(sys.argv[1:] or ["."])
