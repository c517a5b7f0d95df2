"""Generation on a local Ray cluster of two worker nodes: the tree byte-identical to one
`tpusim generate` process, also when a worker dies mid-run and Ray retries its task."""

import os
import time

import pytest

import tpusim
import tpusim.distributed
from conftest import SAMPLES, tree

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'tpusim[ray]')")

INPUTS = [SAMPLES / n for n in ("mlp_train.hlo", "resnet18_infer_b8.hlo",
                                "bert_base_infer_b8s128.hlo")]


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(2):
        c.add_node(num_cpus=1, object_store_memory=80 * 2**20)
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    c.wait_for_nodes()
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.mark.parametrize("collection", ["tile", "layout"])
def test_ray_tree_is_byte_identical(cli, cluster, tmp_path, collection):
    opts = ["--configs", "16", "--seed", "5"]
    t = time.monotonic()
    cli("generate", collection, *INPUTS, "--out", tmp_path / "one", "--threads", "1",
        "--quiet", *opts)
    one_s = time.monotonic() - t
    t = time.monotonic()
    lines = []
    rep = tpusim.distributed.generate(collection, INPUTS, tmp_path / "ray", tasks=4,
                                      configs=16, seed=5, interval=0.0,
                                      progress=lambda d, n, c: lines.append((d, n, c)))
    ray_s = time.monotonic() - t
    a, b = tree(tmp_path / "one"), tree(tmp_path / "ray")
    assert sorted(a) == sorted(b) and len(a) > 5
    assert [k for k in a if a[k] != b[k]] == []
    assert rep["modules"] == len(INPUTS)
    assert rep["files_written"] == sum(k.endswith(".npz") for k in b)
    assert lines[-1][:2] == (len(INPUTS), len(INPUTS)) and lines[-1][2] == rep["configs"]
    print(f"\n{collection}: {len(a)} files byte-identical; one process (1 thread) {one_s:.2f} s, "
          f"Ray (2 worker nodes x 1 CPU, 4 tasks) {ray_s:.2f} s")


def test_ray_resumes_after_a_lost_worker(cli, cluster, tmp_path):
    cli("generate", "tile", *INPUTS, "--out", tmp_path / "one", "--configs", "12", "--quiet")
    # The workers get the variable through the tasks' runtime environment.
    rep = tpusim.distributed.generate("tile", INPUTS, tmp_path / "ray", tasks=2, configs=12,
                                      quiet=True, max_retries=2,
                                      runtime_env={"env_vars": {"TPUSIM_RAY_CRASH_ONCE": str(tmp_path)}})
    assert (tmp_path / "crashed").is_file(), "no worker was killed"
    a, b = tree(tmp_path / "one"), tree(tmp_path / "ray")
    assert sorted(a) == sorted(b)
    assert [k for k in a if a[k] != b[k]] == []
    # the retried task skipped the file its dead attempt had finished, and the temporary
    # file of the one it died in was cleared
    assert rep["files_skipped"] > 0
    assert "removed 1 temporary file(s) left by interrupted runs" in rep["notes"]
    assert rep["files_written"] + rep["files_skipped"] == sum(k.endswith(".npz") for k in b)


def test_cli_entry(cluster, tmp_path, capsys):
    from tpusim.distributed import main

    assert main(["tile", str(SAMPLES / "mlp_train.hlo"), "--out", str(tmp_path), "--configs", "8",
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 modules, ") and " files written, 0 skipped" in out
    assert main(["tile", str(SAMPLES / "mlp_train.hlo"), "--out", str(tmp_path), "--configs", "1",
                 "--quiet"]) == 1
    assert "--configs must be at least 2" in capsys.readouterr().err
