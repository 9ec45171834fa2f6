"""Run 4 (full-data scores, MAMBA only) against run 3 (parts a and b), run by run (seed r
against seed r). Run from the repository root:
python3 docs/experiments/data/mamba_bnn_run4_full/compare_with_run3.py"""
import json, statistics as st
D = "docs/experiments/data/"
run3 = {}
for part in ("mamba_bnn_run3", "mamba_bnn_run3b"):
    for s in json.load(open(D + part + "/report.json"))["samplers"]:
        if len(s["methods"]) == 3:  # part a's SGHMC-CV was stopped before its cells
            run3[s["sampler"]] = {m["method"]: m for m in s["methods"]}
new = json.load(open(D + "mamba_bnn_run4_full/report.json"))
def pct(x): return 100 * x
for s in new["samplers"]:
    name = s["sampler"]
    f = s["methods"][0]
    old = run3[name]
    fe = [r["ece"] for r in f["runs"]]
    line = f"{name}: full {f['choice']}: ECE {pct(st.mean(fe)):.2f} ± {pct(st.stdev(fe)):.2f} %, acc {pct(f['mean']['accuracy']):.2f} %, draws {min(r['draws'] for r in f['runs'])}-{max(r['draws'] for r in f['runs'])}"
    print(line)
    for meth in ("MAMBA-KSD", "grid search", "heuristic"):
        m = old[meth]
        e = [r["ece"] for r in m["runs"]]
        below = sum(a < b for a, b in zip(fe, e))
        print(f"   run 3 {meth} {m['choice']}: ECE {pct(st.mean(e)):.2f} ± {pct(st.stdev(e)):.2f} %; full below it in {below}/{len(e)} seeds")
    both = sum(a < g and a < h for a, g, h in zip(fe, [r['ece'] for r in old['grid search']['runs']], [r['ece'] for r in old['heuristic']['runs']]))
    mean_both = st.mean(fe) < min(st.mean([r['ece'] for r in old[k]['runs']]) for k in ('grid search', 'heuristic'))
    print(f"   full below both baselines: {both}/5 seeds; by the mean: {mean_both}")
