"""`sgmcmc ksd` on Zarr stores that ArviZ, xarray and zarr-python write with their defaults (Zarr
v3 and v2, compressed, float64 and float32): the KSD equals that of the same draws in the store
`sgmcmc run` wrote."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import arviz as az
import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
ZARR3 = int(zarr.__version__.split(".")[0]) >= 3
# zarr-python 3 warns that consolidated metadata (xarray's default) is not yet in the v3 spec.
pytestmark = pytest.mark.filterwarnings("ignore:Consolidated metadata:UserWarning")

RUN_FILE = """
[data]
synthetic = { rows = 2000, dim = 3, seed = 1 }

[model]
kind = "logistic"

[sampler]
kind = "sgld"
step_size = 1e-4

[gradient]
estimator = "full"

[run]
seed = 3
chains = 2
iterations = 300
burn_in = 50
init = "map"
"""

# (Zarr format, compression): None is xarray's default (v3: zstd; v2: blosc).
STORES = [(3, None), (2, None), (3, "gzip"), (2, "gzip")]


def ksd(cli: Path, store: Path, config: Path, *variable: str) -> float:
    """The KSD that `sgmcmc ksd` reports for `store` (every other draw of each chain)."""
    out = store.with_suffix(".json")
    args = [str(cli), "ksd", str(store), "--config", str(config), "--thin", "2"]
    args += ["--json", str(out)] + (["--variable", ",".join(variable)] if variable else [])
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return float(json.loads(out.read_text())["report"]["ksd"]["ksd"])


def ksd_error(cli: Path, store: Path, config: Path, *variable: str) -> str:
    """The one-line error of `sgmcmc ksd` on `store`."""
    args = [str(cli), "ksd", str(store), "--config", str(config)]
    args += ["--variable", ",".join(variable)] if variable else []
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode != 0, done.stdout
    return done.stderr


def to_zarr(
    posterior: dict[str, np.ndarray], path: Path, fmt: int, compression: str | None
) -> Path:
    """Writes `posterior` as ArviZ does: `idata.to_zarr(path)` (zarr-python 2, Zarr v2), or
    with zarr-python 3 (where ArviZ's `to_zarr` refuses) its advice, the DataTree's `to_zarr`,
    in Zarr v3 by default or v2; `compression` overrides the default compressor."""
    idata = az.from_dict(posterior=posterior)
    if not ZARR3:
        if fmt != 2 or compression is not None:
            pytest.skip("zarr-python 2 writes Zarr v2 with its default compressor only")
        idata.to_zarr(str(path))
        return path
    kwargs: dict[str, Any] = {} if fmt == 3 else {"zarr_format": 2}
    if compression == "gzip":
        import numcodecs

        codec = zarr.codecs.GzipCodec() if fmt == 3 else numcodecs.GZip()
        kwargs["encoding"] = {"/posterior": {name: {"compressors": [codec]} for name in posterior}}
    idata.to_datatree().to_zarr(path, **kwargs)
    return path


@pytest.fixture(scope="module")
def ours(cli: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, float]:
    """A run of `sgmcmc run` on a small logistic regression: its run file, its draws (chains,
    draws, 3) and the KSD of its own store."""
    import sgmcmc

    root = tmp_path_factory.mktemp("interop")
    config = root / "run.toml"
    config.write_text(RUN_FILE)
    subprocess.run(
        [str(cli), "run", str(config), "--out", str(root / "out")],
        check=True,
        capture_output=True,
    )
    draws = np.asarray(sgmcmc.load(root / "out").posterior["theta"].values)
    assert draws.shape == (2, 300, 3) and draws.dtype == np.float64
    return config, draws, ksd(cli, root / "out" / "draws.zarr", config)


@pytest.mark.parametrize(("fmt", "compression"), STORES)
def test_float64_draws_written_by_arviz_give_our_ksd(
    cli: Path, ours: tuple[Path, np.ndarray, float], tmp_path: Path, fmt: int, compression: str
) -> None:
    config, draws, expected = ours
    store = to_zarr({"theta": draws}, tmp_path / "idata.zarr", fmt, compression)
    assert ksd(cli, store, config) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("fmt", "compression"), STORES)
def test_float32_draws_read_as_their_rounding(
    cli: Path, ours: tuple[Path, np.ndarray, float], tmp_path: Path, fmt: int, compression: str
) -> None:
    """float32 draws give the KSD of their float64 conversion (a float64 store of the rounded
    values, read the same way)."""
    config, draws, _ = ours
    single = draws.astype(np.float32)
    store = to_zarr({"theta": single}, tmp_path / "f32.zarr", fmt, compression)
    rounded = to_zarr({"theta": single.astype(np.float64)}, tmp_path / "f64.zarr", 3, None)
    assert ksd(cli, store, config) == pytest.approx(ksd(cli, rounded, config), rel=1e-12)


@pytest.mark.parametrize("fmt", [3, 2])
def test_variables_by_default_and_by_name(
    cli: Path, ours: tuple[Path, np.ndarray, float], tmp_path: Path, fmt: int
) -> None:
    """The posterior's only variable is read without --variable; several are put side by side
    in the order --variable names them (a (chain, draw) variable is one parameter); otherwise
    the error lists the variables, and a wrong total is the model's dimension error."""
    config, draws, expected = ours
    only = to_zarr({"beta": draws}, tmp_path / "only.zarr", fmt, None)
    assert ksd(cli, only, config) == pytest.approx(expected, rel=1e-9)

    split = {"b": draws[..., 1:], "a": draws[..., 0]}
    store = to_zarr(split, tmp_path / "split.zarr", fmt, None)
    assert ksd(cli, store, config, "a", "b") == pytest.approx(expected, rel=1e-9)
    error = ksd_error(cli, store, config)
    assert "no variable theta but 2 others (a, b); choose with --variable" in error, error
    error = ksd_error(cli, store, config, "b")
    assert "the draws have 2 parameters but the model" in error, error
    error = ksd_error(cli, store, config, "chain")
    assert "posterior/chain has shape [2], expected (chain, draw, ...)" in error, error
