"""A ``sample(..., out=...)`` killed (kill -9) at random moments and continued with
``resume=True`` returns exactly the draws of an uninterrupted run, and a running chain's last
checkpoint at a kill is at most one checkpoint interval old (issue 25).

``SGMCMC_KILLS=20 python -m pytest -s tests/test_resume.py`` kills 20 times (2 by default) and
prints what each kill left.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import sgmcmc

SCRIPT = """
import sys
import numpy as np
import sgmcmc
rng = np.random.default_rng(0)
x = rng.standard_normal((20_000, 4))
y = (rng.random(20_000) < 1 / (1 + np.exp(-x @ np.ones(4)))).astype(float)
idata = sgmcmc.sample(
    sgmcmc.models.Logistic(x, y), sgmcmc.SGLD(step_size=2e-5),
    sgmcmc.ControlVariates(batch_size=50),
    chains=2, iterations=2_000_000, burn_in=1000, thin=200, seed=5, bias_check=False,
    checkpoint_seconds=0.5, progress=False, quiet=True, out=sys.argv[1],
    resume=sys.argv[2] == "resume",
)
np.save(sys.argv[1] + ".npy", idata.posterior["theta"].values)
"""


def spawn(script: str, out: Path, mode: str) -> subprocess.Popen[str]:
    """Runs `script` with the output directory `out` and `mode` ("new" or "resume")."""
    return subprocess.Popen(
        [sys.executable, "-c", script, str(out), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RAYON_NUM_THREADS": "2"},
    )


def run(out: Path, mode: str) -> subprocess.Popen[str]:
    return spawn(SCRIPT, out, mode)


def finish(proc: subprocess.Popen[str]) -> None:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err


def stored(out: Path) -> np.ndarray:
    import zarr

    return np.asarray(zarr.open_group(str(out / "draws.zarr"), mode="r")["posterior/theta"][:])


def finished(out: Path, chain: int) -> bool:
    """Whether `chain` has every draw in the store (it then takes no more checkpoints)."""
    try:
        theta = stored(out)
    except Exception:
        return False
    return bool(theta.shape[1] == 10_000 and np.isfinite(theta[chain, -1]).all())


def test_killed_runs_resume_to_the_uninterrupted_draws(tmp_path: Path) -> None:
    kills = int(os.environ.get("SGMCMC_KILLS", "2"))
    whole = tmp_path / "whole"
    started = time.monotonic()
    finish(run(whole, "new"))
    length = time.monotonic() - started
    expected = np.load(str(whole) + ".npy")
    assert expected.shape == (2, 10_000, 4)
    moments = random.Random(25)
    for k in range(kills):
        out = tmp_path / f"killed{k}"
        at = length * moments.uniform(0.1, 0.9)
        proc = run(out, "new")
        time.sleep(at)
        proc.kill()
        killed_at = time.time()
        proc.communicate()
        left = []
        checkpointed = [(out / "checkpoints" / f"chain-{c}.state").exists() for c in range(2)]
        for c in range(2):
            state = out / "checkpoints" / f"chain-{c}.state"
            age = killed_at - state.stat().st_mtime if state.exists() else None
            left.append("none" if age is None else f"{age:.3f} s old")
            # A chain still sampling (its store not complete) lost at most one interval (0.5 s),
            # with room for writing it and a busy machine.
            if age is not None and not (out / "summary.json").exists() and not finished(out, c):
                assert age <= 1.2, f"kill {k}: chain {c}'s last checkpoint is {age:.2f} s old"
        print(f"kill {k} at {at:.2f} s of {length:.2f} s: checkpoints {', '.join(left)}")
        finish(run(out, "resume"))
        resumed = np.load(str(out) + ".npy")
        assert np.array_equal(resumed, expected), f"kill {k} at {at:.2f} s"
        assert np.array_equal(stored(out), expected)
        summary = json.loads((out / "summary.json").read_text())
        # The chains went on from their checkpoints (starting over would also give the draws).
        assert [n > 0 for n in summary["resumed_draws"]] == checkpointed, summary


def test_resume_needs_the_same_run(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((500, 2))
    y = (rng.random(500) < 0.5).astype(float)
    model = sgmcmc.models.Logistic(x, y)

    def sample(m: sgmcmc.models.Logistic, step: float, out: Path, resume: bool) -> None:
        sgmcmc.sample(
            m,
            sgmcmc.SGLD(step_size=step),
            chains=2,
            iterations=300,
            bias_check=False,
            progress=False,
            quiet=True,
            out=out,
            resume=resume,
        )

    with pytest.raises(sgmcmc.SgmcmcError, match="holds no run to continue"):
        sample(model, 1e-3, tmp_path / "a", resume=True)
    sample(model, 1e-3, tmp_path / "b", resume=False)
    with pytest.raises(sgmcmc.SgmcmcError, match="started with other settings"):
        sample(model, 2e-3, tmp_path / "b", resume=True)
    with pytest.raises(sgmcmc.SgmcmcError, match="other data"):
        sample(sgmcmc.models.Logistic(x[:400], y[:400]), 1e-3, tmp_path / "b", resume=True)


TUNE = """
import json, sys
import numpy as np
import sgmcmc
rng = np.random.default_rng(7)
x = rng.standard_normal((20_000, 5))
y = (rng.random(20_000) < 1 / (1 + np.exp(-x @ np.ones(5)))).astype(float)
result = sgmcmc.tune(
    sgmcmc.models.Logistic(x, y), sgmcmc.SGLD(step_size=1e-3), sgmcmc.Minibatch(batch_size=0.01),
    grid={"log10_step_size": {"from": -3, "to": -7, "by": 0.5}, "batch_size": [0.01, 0.1, 1.0]},
    budget_gradient_evaluations=3e7, thin=5, score_subsample=500, threads=2, seed=3, quiet=True,
    out=sys.argv[1], resume=sys.argv[2] == "resume",
)
print(json.dumps({"label": result.label, "rounds": result.rounds,
                  "resumed": result.report["outcome"].get("resumed_rounds", 0)}))
"""


def tune(out: Path, mode: str) -> subprocess.Popen[str]:
    return spawn(TUNE, out, mode)


def tuned(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_a_killed_tuning_run_resumes_to_the_uninterrupted_outcome(tmp_path: Path) -> None:
    """``tune(..., out=DIR)`` killed (kill -9) after its first round continues with
    ``resume=True`` from the progress saved then: it runs only the later rounds and ends with
    the uninterrupted run's rounds and winner (gradient-evaluation budgets: reproducible)."""
    whole = tuned(tune(tmp_path / "whole", "new"))
    assert whole["resumed"] == 0
    assert (tmp_path / "whole" / "tune.json").is_file()

    proc = tune(tmp_path / "killed", "new")
    progress = tmp_path / "killed" / "checkpoints" / "tune.state"
    while not progress.exists():
        assert proc.poll() is None, "the run ended before its first round's progress was seen"
        time.sleep(0.002)
    proc.kill()
    proc.communicate()
    assert not (tmp_path / "killed" / "tune.json").exists(), "killed before the end"

    resumed = tuned(tune(tmp_path / "killed", "resume"))
    assert 1 <= resumed["resumed"] < len(whole["rounds"]), resumed
    assert (resumed["label"], resumed["rounds"]) == (whole["label"], whole["rounds"])
