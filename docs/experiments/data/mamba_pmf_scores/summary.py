"""MAMBA's choice on PMF with the control-variate surrogate (cv/) and with full-data scores (full/),
beside the choice of the mamba-pmf experiment's run 2 (../mamba_pmf_run2/report.json).

Run from this directory: python3 summary.py
"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLERS = ["sgld", "sgld-cv", "sghmc", "sghmc-cv", "sgnht", "sgnht-cv"]


def short(label: str) -> str:
    for word in ("log10_step_size=", "batch_size=", "inner_steps="):
        label = label.replace(word, "")
    return label


def main() -> None:
    run2 = json.load(open(os.path.join(HERE, "..", "mamba_pmf_run2", "report.json")))
    experiment = {
        s["sampler"].lower(): next(m["choice"] for m in s["methods"] if m["method"] == "MAMBA-KSD")
        for s in run2["samplers"]
    }
    print("| sampler | experiment run 2 | surrogate (cv/) | full-data scores (full/) |")
    print("|---|---|---|---|")
    for sampler in SAMPLERS:
        cells = [sampler.upper(), experiment[sampler]]
        for variant in ("cv", "full"):
            tune = json.load(open(os.path.join(HERE, variant, sampler, "tune.json")))
            last = sorted(tune["outcome"]["rounds"][-1], key=lambda arm: arm["metric"])
            ranked = "; ".join(f"{short(a['label'])}: {a['metric']:.4g}" for a in last)
            cells.append(f"**{short(last[0]['label'])}** ({ranked})")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
