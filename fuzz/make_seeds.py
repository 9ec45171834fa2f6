"""Writes the seed corpus of the fuzz targets (fuzz/corpus/<target>/seed-*): small valid inputs
of each format, so that the fuzzer starts from files the loaders accept.

Run from the repository root with numpy and zarr installed:
    python fuzz/make_seeds.py
The corpus the fuzzer grows from these (fuzz/corpus/<target>/<sha1>) is committed beside them.
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np
import zarr

ROOT = Path(__file__).resolve().parent
CORPUS = ROOT / "corpus"


def put(target: str, name: str, data: bytes) -> None:
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"seed-{name}").write_bytes(data)


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def run_files() -> None:
    for path in sorted((ROOT.parent / "examples").glob("*.toml")):
        put("run_file", path.stem, path.read_bytes())


def npy() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 3))
    put("npy", "f64", npy_bytes(x))
    put("npy", "f32", npy_bytes(x.astype(np.float32)))
    put("npy", "fortran", npy_bytes(np.asfortranarray(x)))
    put("npy", "vector", npy_bytes(np.array([0.0, 1.0, 1.0, 0.0])))
    put("npy", "u8", npy_bytes(np.arange(6, dtype=np.uint8).reshape(2, 3)))
    put("npy", "i64", npy_bytes(np.arange(4, dtype=np.int64)))


def csv() -> None:
    text = b"x1,x2,y\n0.5,1.5,1\n-1,2e-3,0\n 3 , 4 ,1\n"
    put("csv", "plain", b"\x00" + text)
    put("csv", "gzip", b"\x01" + text)
    put("csv", "no-target", b"\x00a,b\n1,2\n")


def libsvm() -> None:
    text = b"+1 1:0.5 3:1\n-1 2:1.5\n# comment\n\n1 1:1 2:2 3:3\n"
    put("libsvm", "plain", b"\x00" + text)
    put("libsvm", "gzip", b"\x01" + text)
    put("libsvm", "columns", bytes([2 | (4 << 2)]) + text)


def idx() -> None:
    images = struct.pack(">IIII", 0x00000803, 2, 2, 3) + bytes(range(12))
    labels = struct.pack(">II", 0x00000801, 3) + bytes([7, 9, 7])
    put("idx", "images", images)
    put("idx", "labels", labels)


def movielens() -> None:
    put("movielens", "dat", b"1::10::5::978300760\n1::20::3::978302109\n2::10::4::978301968\n")
    put("movielens", "udata", b"196\t242\t3\t881250949\n186\t302\t3\t891717742\n")


def reference_json() -> None:
    reference = {
        "method": "NUTS",
        "parameter_names": ["a", "b"],
        "mean": [0.1, -0.2],
        "sd": [1.0, 0.5],
        "covariance": [1.0, 0.1, 0.1, 0.25],
        "ess_bulk": [800.0, None],
        "rhat": [1.0, 1.01],
        "chains": 2,
        "draws_per_chain": 500,
    }
    put("reference_json", "two", json.dumps(reference).encode())


def zarr_seed(name: str, store: Path, version: int) -> None:
    """The seed of a store: version byte, the array's metadata, NUL, its first chunk."""
    folder = store / "posterior" / "theta"
    metadata = (folder / ("zarr.json" if version == 3 else ".zarray")).read_bytes()
    keys = ["c/0/0/0", "c/0/0"] if version == 3 else ["0.0.0", "0.0"]
    chunk = next((folder / k).read_bytes() for k in keys if (folder / k).is_file())
    put("zarr", name, bytes([0 if version == 3 else 1]) + metadata + b"\0" + chunk)


def zarr_stores() -> None:
    values = np.random.default_rng(2).normal(size=(2, 5, 3))
    with tempfile.TemporaryDirectory() as tmp:
        for version in (2, 3):
            for dtype in ("f8", "f4"):
                store = Path(tmp) / f"v{version}-{dtype}.zarr"
                root = zarr.open_group(store, mode="w", zarr_format=version)
                group = root.create_group("posterior")
                group.create_array("theta", data=values.astype(dtype))
                zarr_seed(f"v{version}-{dtype}", store, version)
                shutil.rmtree(store)
            store = Path(tmp) / f"v{version}-raw.zarr"
            root = zarr.open_group(store, mode="w", zarr_format=version)
            group = root.create_group("posterior")
            group.create_array("theta", data=values, compressors=None)
            zarr_seed(f"v{version}-raw", store, version)


if __name__ == "__main__":
    run_files()
    npy()
    csv()
    libsvm()
    idx()
    movielens()
    reference_json()
    zarr_stores()
