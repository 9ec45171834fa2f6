"""Run 3 (full-data scores, MAMBA only) against run 2, run by run (seed r against seed r).

Run from the repository root: python3 docs/experiments/data/mamba_pmf_run3_full/compare_with_run2.py
"""
import json, statistics as st
a = json.load(open('docs/experiments/data/mamba_pmf_run2/report.json'))
b = json.load(open('docs/experiments/data/mamba_pmf_run3_full/report.json'))
def runs(rep, sampler, method):
    for s in rep['samplers']:
        if s['sampler'] == sampler:
            for m in s['methods']:
                if m['method'] == method:
                    return m['choice'], m['runs'], m['mean']
    return None
for s in b['samplers']:
    name = s['sampler']
    cf, rf, mf = runs(b, name, 'MAMBA-KSD')
    cs, rs, ms = runs(a, name, 'MAMBA-KSD')
    _, rg, mg = runs(a, name, 'grid search')
    _, rh, mh = runs(a, name, 'heuristic')
    k = lambda r: r['ksd'] if r['ksd'] is not None else float('inf')
    def below(x, y): return sum(k(p) < k(q) for p, q in zip(x, y))
    both = sum(k(p) < k(g) and k(p) < k(h) for p, g, h in zip(rf, rg, rh))
    print(f"{name}: full {cf} KSD {mf['ksd']:.1f} xi {mf['xi']:.3f} rmse {mf['rmse']:.3f} it {mf['iterations']} | surrogate {cs} KSD {ms['ksd']:.1f} xi {ms['xi']:.3f} rmse {ms['rmse']:.3f} | grid {mg['ksd']} heur {mh['ksd']:.1f}")
    print(f"   per seed: full<surr {below(rf, rs)}/5, full<grid {below(rf, rg)}/5, full<heur {below(rf, rh)}/5, full<both {both}/5; seeds {[r.get('seed') for r in rf]}")
    print("   full ksd", [round(k(r),1) for r in rf], "grid", [round(k(r),1) for r in rg], "heur", [round(k(r),1) for r in rh])
