"""PyTorch Geometric datasets of tpusim samples (needs ``torch`` and ``torch_geometric``:
``pip install 'tpusim[torch]'``; this module imports them, ``import tpusim`` does not).

* :class:`NpzDataset` — the npz files of a generated tree (``tpusim generate`` or
  :func:`tpusim.generate_tile`), one :class:`torch_geometric.data.Data` per file.
* :class:`SampleStream` — an ``IterableDataset`` that draws fresh samples in memory
  (:func:`tpusim.tile_samples` / :func:`tpusim.layout_samples`) with a new seed each
  epoch, so a training loop never touches disk.

A graph becomes ``Data(x=node_feat, op=node_opcode, edge_index=(2, m), ...)`` with every
other array of the sample as a tensor attribute of the same name (``config_feat``,
``config_runtime``, ``node_config_ids``, ``node_config_feat``, ...). ``edge_index`` is
transposed to PyG's (2, m) layout and its rows swapped, so edges run operand → user.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterator, Optional, Sequence

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.data import Dataset as _PygDataset

import tpusim


def to_data(arrays: Dict[str, np.ndarray]) -> Data:
    """One sample's arrays (npz keys) as a PyG ``Data``."""
    e = np.asarray(arrays["edge_index"])
    d = Data(x=torch.from_numpy(np.array(arrays["node_feat"])),
             edge_index=torch.from_numpy(np.ascontiguousarray(e[:, ::-1].T)))
    d.op = torch.from_numpy(np.array(arrays["node_opcode"])).long()
    for k, v in arrays.items():
        if k not in ("node_feat", "edge_index", "node_opcode"):
            d[k] = torch.from_numpy(np.array(v))
    return d


class NpzDataset(_PygDataset):
    """The npz files below ``root`` (e.g. ``OUT/npz/tile/xla/train``), sorted by path."""

    def __init__(self, root, transform=None):
        self.files = sorted(Path(root).rglob("*.npz"))
        super().__init__(None, transform)

    def len(self) -> int:
        return len(self.files)

    def get(self, i: int) -> Data:
        with np.load(self.files[i]) as z:
            return to_data({k: z[k] for k in z.files})


class SampleStream(torch.utils.data.IterableDataset):
    """Fresh samples of ``sources`` (module files or text), made in memory: epoch ``e``
    uses seed ``seed + e``. ``collection`` is ``tile`` or ``layout``; ``options`` go to
    :func:`tpusim.tile_samples` / :func:`tpusim.layout_samples`. With several
    DataLoader workers each takes every ``num_workers``-th source."""

    def __init__(self, sources: Sequence, collection: str = "tile", seed: int = 0,
                 **options):
        super().__init__()
        if collection not in ("tile", "layout"):
            raise ValueError("collection must be 'tile' or 'layout'")
        self.sources = list(sources)
        self.collection = collection
        self.seed = seed
        self.epoch = 0
        self.options = options

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[Data]:
        info = torch.utils.data.get_worker_info()
        mine = self.sources if info is None else self.sources[info.id::info.num_workers]
        make = tpusim.tile_samples if self.collection == "tile" else tpusim.layout_samples
        for src in mine:
            for arrays in make(src, seed=self.seed + self.epoch, **self.options).values():
                yield to_data(arrays)
