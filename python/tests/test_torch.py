"""tpusim.torch: PyG datasets over generated samples, on disk and in memory."""

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install 'tpusim[torch]')")
pytest.importorskip("torch_geometric", reason="torch_geometric is not installed")

import tpusim  # noqa: E402
from tpusim.torch import NpzDataset, SampleStream  # noqa: E402
from conftest import SAMPLES  # noqa: E402

MLP = SAMPLES / "mlp_train.hlo"


def test_npz_dataset_and_stream_agree(tmp_path):
    tpusim.generate_tile([MLP], tmp_path, configs=10)
    ds = NpzDataset(tmp_path / "npz")
    mem = tpusim.tile_samples(MLP, configs=10)
    assert len(ds) == len(mem) > 0
    stream = list(SampleStream([MLP], configs=10))
    by_n = sorted((d.num_nodes, d.config_runtime.tolist()) for d in ds)
    assert by_n == sorted((d.num_nodes, d.config_runtime.tolist()) for d in stream)
    d = ds[0]
    assert d.x.shape[1] == 140 and d.edge_index.shape[0] == 2
    assert d.config_feat.shape == (10, 24)
    # the file's arrays, with edges turned to run operand -> user
    arrays = mem[ds.files[0].stem]
    assert np.array_equal(d.x.numpy(), arrays["node_feat"])
    assert np.array_equal(d.edge_index.numpy(), arrays["edge_index"][:, ::-1].T)
    assert np.array_equal(d.op.numpy(), arrays["node_opcode"].astype(np.int64))


def test_stream_draws_new_samples_each_epoch():
    s = SampleStream([MLP], collection="layout", configs=6)
    a = [d.config_runtime.tolist() for d in s]
    s.set_epoch(1)
    b = [d.config_runtime.tolist() for d in s]
    assert len(a) == len(b) == 1 and a != b
