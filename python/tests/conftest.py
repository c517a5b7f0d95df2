"""Shared helpers of the Python tests: the repository root, the `tpusim` binary the
package's answers are compared with, and a runner for it."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "hlo_samples"


def _binary():
    """The CLI built from this checkout: $TPUSIM_BIN, else target/release/tpusim under
    $CARGO_TARGET_DIR or the checkout."""
    env = os.environ.get("TPUSIM_BIN")
    if env:
        return Path(env)
    for base in (os.environ.get("CARGO_TARGET_DIR"), ROOT / "target"):
        if base:
            p = Path(base) / "release" / "tpusim"
            if p.is_file():
                return p
    found = shutil.which("tpusim")
    return Path(found) if found else None


BIN = _binary()


@pytest.fixture
def cli():
    """Run the tpusim binary: cli(*args) -> CompletedProcess (text)."""
    if BIN is None:
        pytest.skip("no tpusim binary (build it with `cargo build --release`, or set TPUSIM_BIN)")

    def run(*args, check=True, cwd=None):
        r = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, cwd=cwd)
        if check and r.returncode != 0:
            raise AssertionError(f"tpusim {' '.join(map(str, args))} failed:\n{r.stderr}")
        return r

    return run


@pytest.fixture
def cli_json(cli):
    """cli_json(*args) -> the JSON the command prints."""

    def run(*args):
        return json.loads(cli(*args).stdout)

    return run


def tree(root):
    """Every file below `root` with its bytes, by relative path."""
    root = Path(root)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
