#!/usr/bin/env python3
"""A learned baseline for TpuGraphs runtimes: GraphSAGE (PyTorch Geometric).

In the spirit of the official baselines (google-research-datasets/tpu_graphs):

* tile (`tile:xla`): the *early-join* model -- the 24 tile-configuration features are
  joined to every node before message passing, the graph is pooled, an MLP gives one
  score per (graph, configuration);
* layout (`layout:*`): the 18 layout features of each configurable node are joined to
  that node (zeros and a 0 flag elsewhere); big graphs are cut into segments of
  `--segment` nodes (node order is topological, so a segment is a contiguous node range)
  and training back-propagates through a random few of them per step (Graph Segment
  Training, without the historical embedding table); prediction runs every segment.

The score is a predicted log-runtime: the loss is a pairwise hinge loss on the ranking
of a graph's configurations plus a small MSE on log(runtime ns), so `exp(score)` is
written as `predicted_runtime_ns`, one row per configuration, with the IDs TpuGraphs uses
(`tile:xla:STEM`, `layout:SOURCE:SEARCH:STEM`): the CSV `tpusim compare` reads.

    python3 tpugraphs_sage.py --train TRAIN_ROOT/npz --test TEST_ROOT/npz \
        --out learned.csv [--epochs 20] [--seed 0]

Runs on CPU; deterministic for a seed (torch.use_deterministic_algorithms).
"""

import argparse
import glob
import math
import os
import random
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.nn import SAGEConv, global_mean_pool

OPCODES = 256


def graph_id(path):
    parts = os.path.normpath(path).split(os.sep)
    stem = os.path.splitext(parts[-1])[0]
    if len(parts) >= 4 and parts[-4] == "tile" and parts[-3] == "xla":
        return f"tile:xla:{stem}"
    if len(parts) >= 5 and parts[-5] == "layout":
        return f"layout:{parts[-4]}:{parts[-3]}:{stem}"
    return stem


def files(root, collection):
    pat = {
        "tile": os.path.join(root, "tile", "xla", "*", "*.npz"),
        "layout": os.path.join(root, "layout", "*", "*", "*", "*.npz"),
    }[collection]
    return sorted(glob.glob(pat))


def squash(x):
    """sign(x)·log1p(|x|): features span 0..1e9, this keeps them comparable."""
    return np.sign(x) * np.log1p(np.abs(x))


class Graph:
    def __init__(self, path):
        d = np.load(path)
        self.id = graph_id(path)
        self.tile = "config_feat" in d
        self.x = torch.tensor(squash(d["node_feat"].astype(np.float64)), dtype=torch.float32)
        self.op = torch.tensor(d["node_opcode"].astype(np.int64).clip(0, OPCODES - 1))
        e = d["edge_index"].astype(np.int64).reshape(-1, 2)
        # [user, operand] rows: messages flow operand -> user, and back.
        self.edges = torch.tensor(np.concatenate([e[:, ::-1], e]).T.copy())
        self.runtime = d["config_runtime"].astype(np.float64)
        if self.tile:
            self.cfg = torch.tensor(squash(d["config_feat"].astype(np.float64)), dtype=torch.float32)
            self.target = self.runtime / d["config_runtime_normalizers"].astype(np.float64)
        else:
            self.ids = torch.tensor(d["node_config_ids"].astype(np.int64))
            self.cfg = torch.tensor(d["node_config_feat"].astype(np.float32))  # (c, nc, 18)
            self.target = self.runtime
        self.n = self.x.shape[0]
        self.c = len(self.runtime)


class Sage(torch.nn.Module):
    def __init__(self, cfg_dim, hidden=64, layers=3):
        super().__init__()
        self.emb = torch.nn.Embedding(OPCODES, 16)
        self.inp = torch.nn.Linear(140 + 16 + cfg_dim, hidden)
        self.convs = torch.nn.ModuleList([SAGEConv(hidden, hidden) for _ in range(layers)])
        self.head = torch.nn.Sequential(
            torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1)
        )

    def forward(self, x, op, cfg, edges, batch):
        h = F.relu(self.inp(torch.cat([x, self.emb(op), cfg], 1)))
        for conv in self.convs:
            h = h + F.relu(conv(h, edges))
        return self.head(global_mean_pool(h, batch)).squeeze(-1)


def tile_scores(model, g, cfg_rows):
    """Scores of configurations `cfg_rows` of a tile graph: one graph copy per row."""
    k = len(cfg_rows)
    n = g.n
    x = g.x.repeat(k, 1)
    op = g.op.repeat(k)
    cfg = g.cfg[cfg_rows].repeat_interleave(n, 0)
    offs = (torch.arange(k) * n).repeat_interleave(g.edges.shape[1])
    edges = g.edges.repeat(1, k) + offs
    batch = torch.arange(k).repeat_interleave(n)
    return model(x, op, cfg, edges, batch)


def segments(g, size):
    return [(s, min(s + size, g.n)) for s in range(0, g.n, size)]


def layout_scores(model, g, cfg_rows, segs):
    """Scores of layout configurations: the mean over segments `segs` of the segment's
    pooled score (each segment a contiguous node range, edges inside it)."""
    out = 0
    for a, b in segs:
        m = b - a
        x = g.x[a:b]
        op = g.op[a:b]
        keep = (g.edges[0] >= a) & (g.edges[0] < b) & (g.edges[1] >= a) & (g.edges[1] < b)
        e = g.edges[:, keep] - a
        k = len(cfg_rows)
        feats = torch.zeros(k, m, 19)
        sel = (g.ids >= a) & (g.ids < b)
        if sel.any():
            local = g.ids[sel] - a
            feats[:, local, :18] = g.cfg[cfg_rows][:, sel, :]
            feats[:, local, 18] = 1.0
        offs = (torch.arange(k) * m).repeat_interleave(e.shape[1])
        out = out + model(
            x.repeat(k, 1),
            op.repeat(k),
            feats.reshape(k * m, 19),
            e.repeat(1, k) + offs,
            torch.arange(k).repeat_interleave(m),
        )
    return out / len(segs)


def loss_of(scores, target, runtime, margin=0.1):
    t = torch.tensor(target, dtype=torch.float32)
    diff = scores[:, None] - scores[None, :]
    slower = (t[:, None] > t[None, :]).float()
    hinge = (F.relu(margin - diff) * slower).sum() / slower.sum().clamp(min=1)
    mse = F.mse_loss(scores, torch.tensor(np.log(runtime), dtype=torch.float32))
    return hinge + 0.05 * mse


def train(graphs, collection, args, rng):
    model = Sage(24 if collection == "tile" else 19, args.hidden, args.layers)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        order = list(range(len(graphs)))
        rng.shuffle(order)
        total = 0.0
        for gi in order:
            g = graphs[gi]
            rows = rng.sample(range(g.c), min(args.configs, g.c))
            if collection == "tile":
                s = tile_scores(model, g, rows)
            else:
                segs = segments(g, args.segment)
                segs = rng.sample(segs, min(args.segments_per_step, len(segs)))
                s = layout_scores(model, g, rows, segs)
            loss = loss_of(s, g.target[rows], g.runtime[rows])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"{collection} epoch {epoch + 1}: mean loss {total / max(len(graphs), 1):.4f}", file=sys.stderr)
    return model


@torch.no_grad()
def predict(model, g, collection, args):
    out = []
    for a in range(0, g.c, args.batch):
        rows = list(range(a, min(a + args.batch, g.c)))
        if collection == "tile":
            out.append(tile_scores(model, g, rows))
        else:
            out.append(layout_scores(model, g, rows, segments(g, args.segment)))
    return torch.cat(out).numpy()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", required=True, help="npz root to train on (holds tile/ and layout/)")
    p.add_argument("--test", required=True, help="npz root to predict")
    p.add_argument("--out", required=True, help="CSV: ID,config_index,predicted_runtime_ns")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--configs", type=int, default=16, help="configurations per graph per step")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--segment", type=int, default=1000, help="layout: nodes per segment")
    p.add_argument("--segments-per-step", type=int, default=2)
    p.add_argument("--batch", type=int, default=64, help="configurations per prediction batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()

    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    lines = ["ID,config_index,predicted_runtime_ns"]
    for collection in ["tile", "layout"]:
        tr = [Graph(f) for f in files(args.train, collection)]
        te = [Graph(f) for f in files(args.test, collection)]
        tr = [g for g in tr if g.c >= 2]
        if not te:
            continue
        if not tr:
            sys.exit(f"{args.train}: no {collection} files to train on, but {args.test} has {len(te)}")
        model = train(tr, collection, args, rng)
        model.eval()
        for g in te:
            s = predict(model, g, collection, args)
            for j, v in enumerate(s):
                # Full precision: configurations a few ns apart must not tie.
                ns = math.exp(min(float(v), 60.0))
                lines.append(f"{g.id},{j},{ns:.6e}")
        print(f"{collection}: trained on {len(tr)} graphs, predicted {len(te)}", file=sys.stderr)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
