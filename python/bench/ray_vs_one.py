"""Wall time of `tpusim generate` in one process against tpusim.distributed.generate on
a local Ray cluster of W worker nodes of one CPU each, on the same inputs; checks that
the two trees are byte-identical.

    python python/bench/ray_vs_one.py layout --configs 60 --workers 2 hlo_samples/*.hlo
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

import tpusim.distributed

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import BIN, tree  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("collection", choices=["tile", "layout"])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--configs", type=int, default=60)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=None)
    a = ap.parse_args()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(a.workers):
        c.add_node(num_cpus=1, object_store_memory=80 * 2**20)
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    c.wait_for_nodes()
    with tempfile.TemporaryDirectory() as d:
        t = time.monotonic()
        subprocess.run([str(BIN), "generate", a.collection, *a.inputs, "--out", f"{d}/one",
                        "--configs", str(a.configs), "--threads", str(a.workers), "--quiet"],
                       check=True, capture_output=True)
        one = time.monotonic() - t
        t = time.monotonic()
        r = tpusim.distributed.generate(a.collection, a.inputs, f"{d}/ray", configs=a.configs,
                                        tasks=a.tasks, quiet=True)
        dist = time.monotonic() - t
        x, y = tree(f"{d}/one"), tree(f"{d}/ray")
        same = sorted(x) == sorted(y) and all(x[k] == y[k] for k in x)
    ray.shutdown()
    c.shutdown()
    print(f"{a.collection}, {len(a.inputs)} inputs, --configs {a.configs}: {r['configs']} configs, "
          f"{len(x)} files {'byte-identical' if same else 'DIFFERENT'}; one process "
          f"(--threads {a.workers}) {one:.1f} s, Ray ({a.workers} worker nodes x 1 CPU) {dist:.1f} s")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
