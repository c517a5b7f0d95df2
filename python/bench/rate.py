"""In-memory generation from Python against the CLI, on the same input: configs/s of
`tpusim generate COLLECTION FILE --json` (which writes the npz files) and of
`tpusim.tile_samples` / `tpusim.layout_samples` (which return them as numpy arrays),
best of N alternating runs each (the machine may be shared).

    python python/bench/rate.py tile hlo_samples/resnet50_train_b8.hlo --configs 100
    python python/bench/rate.py layout hlo_samples/resnet18_infer_b8.hlo --configs 200

Set TPUSIM_BIN to the binary (default: target/release/tpusim under $CARGO_TARGET_DIR or
the checkout).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tpusim

ROOT = Path(__file__).resolve().parents[2]


def binary():
    if os.environ.get("TPUSIM_BIN"):
        return os.environ["TPUSIM_BIN"]
    base = os.environ.get("CARGO_TARGET_DIR") or ROOT / "target"
    return str(Path(base) / "release" / "tpusim")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("collection", choices=["tile", "layout"])
    ap.add_argument("file")
    ap.add_argument("--configs", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    threads = ["--threads", str(a.threads)] if a.threads else []
    cli, py = [], []
    make = tpusim.tile_samples if a.collection == "tile" else tpusim.layout_samples
    for _ in range(a.runs):
        with tempfile.TemporaryDirectory() as out:
            r = subprocess.run([binary(), "generate", a.collection, a.file, "--out", out,
                                "--configs", str(a.configs), "--quiet", "--json", *threads],
                               capture_output=True, text=True, check=True)
            rep = json.loads(r.stdout)
            cli.append(rep["configs"] / rep["seconds"])
        t = time.perf_counter()
        s = make(a.file, configs=a.configs, threads=a.threads)
        secs = time.perf_counter() - t
        n = sum(len(v["config_runtime"]) for v in s.values())
        assert n == rep["configs"], (n, rep["configs"])
        py.append(n / secs)
    c, p = max(cli), max(py)
    print(f"{a.collection} {Path(a.file).name} --configs {a.configs}: {rep['configs']} configs; "
          f"CLI {c:.0f} configs/s, Python in memory {p:.0f} configs/s ({100 * p / c:.0f} %), "
          f"best of {a.runs}")


if __name__ == "__main__":
    sys.exit(main())
