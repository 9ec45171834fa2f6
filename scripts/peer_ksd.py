"""Time SGMCMCJax's IMQ KSD on the workload of `sgmcmc bench --ksd`, so that both sides are
measured in one run on one machine (issue 28: peer ratios side by side).

    PY scripts/peer_ksd.py [--draws 1000,5000] [--dim 10] [--repeats 5]

PY is a Python with the peers at the versions of ../shared/reference/peers.md (made by
../shared/bench/peers/setup.sh). The workload is that of `sgmcmc bench --ksd`: P draws
x ~ N(0, I_D), scores -x / 1.21, the IMQ kernel with c = 1, beta = -1/2, the V-statistic.
Prints, per (P, precision), the KSD and the median wall time of `repeats` calls after one
call that compiles.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types


def allow_sgmcmcjax_import() -> None:
    """SGMCMCJax 0.2.13 imports jax.experimental.host_callback (gone from current JAX) for its
    progress bar only; a stand-in module lets it import."""
    try:
        from jax.experimental import host_callback  # noqa: F401

        return
    except ImportError:
        pass
    import jax.experimental

    stand_in = types.ModuleType("jax.experimental.host_callback")
    stand_in.id_tap = lambda f, arg, *, result=None, **kw: arg if result is None else result  # type: ignore[attr-defined]
    sys.modules["jax.experimental.host_callback"] = stand_in
    jax.experimental.host_callback = stand_in  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--draws", default="1000,5000")
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import jax

    jax.config.update("jax_enable_x64", True)
    allow_sgmcmcjax_import()
    import jax.numpy as jnp
    import numpy as np
    from sgmcmcjax.ksd import imq_KSD

    print(f"jax {jax.__version__}, devices {jax.devices()}")
    rng = np.random.default_rng(0)
    for draws in (int(p) for p in args.draws.split(",")):
        x64 = rng.standard_normal((draws, args.dim))
        for precision, dtype in (("f64", jnp.float64), ("f32", jnp.float32)):
            x = jnp.asarray(x64, dtype=dtype)
            scores = -x / 1.21
            value = float(imq_KSD(x, scores))  # compiles
            seconds = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                jax.block_until_ready(imq_KSD(x, scores))
                seconds.append(time.perf_counter() - start)
            print(
                f"sgmcmcjax imq_KSD {draws} x {args.dim} {precision}: KSD {value:.9f}, "
                f"{1e3 * statistics.median(seconds):.2f} ms (median of {args.repeats}; "
                f"range {1e3 * min(seconds):.2f}-{1e3 * max(seconds):.2f})"
            )


if __name__ == "__main__":
    main()
