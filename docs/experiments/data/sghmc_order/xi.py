"""ξ of each run in mamba_logreg.md's SGHMC-order table: the mean over coordinates of
|sd / sd_NUTS - 1|, from each run's summary.json and nuts_reference.json (standard library only).
Run from this directory: python3 xi.py"""
import json

ref = json.load(open("nuts_reference.json"))
for name in ["doc_h", "ref_h", "refres_1e-6", "res_true_2e-6", "res_false_2e-6",
             "nores_1e-6", "nores_1e-7", "docnores_1e-6"]:
    run = json.load(open(f"{name}.summary.json"))
    ratios = [p["sd"] / r for p, r in zip(run["parameters"], ref["sd"])]
    xi = sum(abs(x - 1) for x in ratios) / len(ratios)
    sampler = run["settings"]["config"]["sampler"]
    print(f"{name}: xi {100 * xi:.2f} %, sd / NUTS sd {min(ratios):.2f}-{max(ratios):.2f}, "
          f"step {sampler['step_size']}, before {sampler['gradient_before_position_update']}, "
          f"no resampling {sampler['no_momentum_resampling']}, "
          f"iterations {run['settings']['config']['run']['iterations']}")
