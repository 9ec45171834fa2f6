"""How much the draws of a store would shrink with the codecs Zarr readers share (issue 25).

    python scripts/store_compression.py DIR/draws.zarr [variable]

Prints, per codec, the compression ratio of the posterior variable's bytes (as one buffer, C
order: chain, draw, parameter) and the encoding speed on this machine. Needs numpy, zarr and
numcodecs.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import zarr
from numcodecs import Blosc, GZip, Zstd


def main() -> None:
    path = sys.argv[1]
    variable = sys.argv[2] if len(sys.argv) > 2 else "theta"
    values = np.asarray(zarr.open_group(path, mode="r")[f"posterior/{variable}"][:])
    raw = np.ascontiguousarray(values).tobytes()
    print(f"{path}: posterior/{variable} {values.shape} {values.dtype}, {len(raw)} bytes")
    codecs = {
        "zstd level 1": Zstd(level=1),
        "zstd level 3": Zstd(level=3),
        "gzip level 5": GZip(level=5),
        "blosc zstd, byte shuffle": Blosc(cname="zstd", clevel=3, shuffle=Blosc.SHUFFLE),
        "blosc zstd, bit shuffle": Blosc(cname="zstd", clevel=3, shuffle=Blosc.BITSHUFFLE),
        "blosc lz4, byte shuffle": Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE),
    }
    for name, codec in codecs.items():
        start = time.perf_counter()
        encoded = codec.encode(raw)
        seconds = time.perf_counter() - start
        print(
            f"{name:26s} ratio {len(raw) / len(encoded):6.3f}   "
            f"{len(raw) / seconds / 1e6:7.0f} MB/s"
        )


if __name__ == "__main__":
    main()
