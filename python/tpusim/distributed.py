"""Generation on a Ray cluster: ``tpusim.distributed.generate(...)`` and the ``tpusim-ray``
command.

The input files are split into shards, file ``k`` of the sorted list going to shard
``k mod n`` (as ``tpusim generate --shard i/n`` splits modules); each shard is one Ray
task that runs :func:`tpusim.generate` on its files, one file at a time, into the one
output tree (a filesystem every node sees). Every file of a run is written by exactly
the code a one-process run uses, with the same options, so the tree is byte-identical
to ``tpusim generate`` over the same inputs, whatever the number of tasks or nodes and
in whatever order they finish.

*Resuming.* A module's files are recorded in its manifest once they are complete, and a
run skips a module whose manifest is current (``docs/generation.md``). When a worker
dies, Ray runs its task again (``max_retries``); the new attempt skips the modules the
dead one finished and makes the rest. The temporary file of a file the dead process was
writing is removed by the first run that finds the collection free: at the latest the
driver's own last step, which claims the tree alone once every task has ended. Running
the same call again after a lost driver resumes the whole job the same way.

*Progress.* The tasks report each file they finish to a small actor; the driver prints
``progress: tile 7/12 files, 21000 configs, 3500 configs/s, ETA 9s`` every
``interval`` seconds (or calls ``progress(done_files, total_files, configs)``).

Ray is imported only here; ``pip install 'tpusim[ray]'`` brings it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import tpusim

# Test hook: with this set to a folder, the first task to finish a file kills its own
# worker process (once per folder), so that the tests can check that Ray's retry resumes.
_CRASH_ONCE = "TPUSIM_RAY_CRASH_ONCE"

MODULE_SUFFIXES = (".hlo", ".pb")


def input_files(inputs: Sequence[os.PathLike]) -> List[str]:
    """The module files of `inputs` (files as given; a folder stands for its ``*.hlo`` and
    ``*.pb`` files), sorted and without duplicates: the order shards are cut from."""
    files = set()
    for p in inputs:
        p = Path(p)
        if p.is_dir():
            files.update(str(q) for q in p.iterdir() if q.is_file() and q.suffix in MODULE_SUFFIXES)
        else:
            files.add(str(p))
    return sorted(files)


def shards(files: Sequence[str], n: int) -> List[List[str]]:
    """File ``k`` goes to shard ``k mod n`` (empty shards dropped)."""
    out = [[f for k, f in enumerate(files) if k % n == i] for i in range(n)]
    return [s for s in out if s]


def merge_reports(reports: Sequence[Dict[str, Any]], seconds: float) -> Dict[str, Any]:
    """One run report of many (the keys of ``tpusim generate --json``): counts summed,
    notes and files in a fixed order, the wall time of the whole run."""
    configs = sum(r["configs"] for r in reports)
    return {
        "modules": sum(r["modules"] for r in reports),
        "files_written": sum(r["files_written"] for r in reports),
        "files_skipped": sum(r["files_skipped"] for r in reports),
        "configs": configs,
        "seconds": seconds,
        "configs_per_second": configs / seconds if seconds > 0 else 0.0,
        "notes": sorted(n for r in reports for n in r["notes"]),
        "files": sorted((f for r in reports for f in r["files"]), key=lambda f: f["file"]),
    }


def _collection_dir(collection: str, options: Dict[str, Any]) -> str:
    if collection == "tile":
        return "tile/xla"
    return f"layout/{options.get('source', 'xla')}/{options.get('search', 'random')}"


def _run_shard(collection: str, files: List[str], out: str, options: Dict[str, Any],
               tracker) -> Dict[str, Any]:
    """One shard, file by file (what a Ray task runs)."""
    reports = []
    start = time.monotonic()
    for f in files:
        r = tpusim.generate(collection, [f], out, **options)
        reports.append(r)
        if tracker is not None:
            import ray

            ray.get(tracker.done.remote(f, r["configs"]))
        crash = os.environ.get(_CRASH_ONCE)
        if crash:
            marker = Path(crash) / "crashed"
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, f"{os.getpid()} after {f}\n".encode())
                os.close(fd)
                # and die as if in the middle of the next file: its temporary file stays
                left = Path(out) / "npz" / _collection_dir(collection, options)
                left.mkdir(parents=True, exist_ok=True)
                (left / f".crash.npz.{os.getpid()}.a1b2c3.tmp").write_bytes(b"PK\x03\x04")
                os._exit(1)
    return merge_reports(reports, time.monotonic() - start)


def _tracker_class():
    import ray

    @ray.remote(num_cpus=0)
    class Tracker:
        """Files finished (by path, so a retried task counts a file once) and configs."""

        def __init__(self):
            self.files = {}

        def done(self, f, configs):
            self.files.setdefault(f, configs)

        def state(self):
            return len(self.files), sum(self.files.values())

    return Tracker


def _cluster_cpus(ray) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def generate(collection: str, inputs: Sequence[os.PathLike], out: os.PathLike, *,
             tasks: Optional[int] = None, cpus_per_task: int = 1, max_retries: int = 3,
             address: Optional[str] = None, interval: float = 10.0,
             progress: Optional[Callable[[int, int, int], Any]] = None, quiet: bool = False,
             runtime_env: Optional[Dict[str, Any]] = None, **options) -> Dict[str, Any]:
    """``tpusim generate COLLECTION INPUTS --out OUT`` as Ray tasks; returns the merged
    run report.

    ``inputs`` are module files or folders of them; ``out`` must be a path every node
    sees (a shared filesystem). ``tasks`` shards (default: four per CPU slot of the
    cluster, at most one per file), each task using ``cpus_per_task`` threads and run
    again up to ``max_retries`` times if its worker dies. ``address`` is passed to
    ``ray.init`` when Ray is not initialised yet (``"auto"``: the running cluster; None:
    a local one). Further keyword ``options`` are :func:`tpusim.generate`'s (``configs``,
    ``seed``, ``tpu``, ``split``, ``noise``, ``pad_minus_one``, ``pb``, ``search``,
    ``source``); ``shard`` and ``threads`` are set here. ``runtime_env`` is the tasks'
    Ray runtime environment (e.g. ``{"env_vars": {...}}``).
    """
    import ray

    for k in ("shard", "threads", "progress"):
        if k in options:
            raise TypeError(f"distributed.generate sets '{k}' itself")
    if collection not in ("tile", "layout"):
        raise tpusim.TpusimError(f"collection must be 'tile' or 'layout', not '{collection}'")
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    files = input_files(inputs)
    if not files:
        raise tpusim.TpusimError("no module files among the inputs")
    out = os.path.abspath(os.fspath(out))
    n = tasks or min(len(files), 4 * max(1, _cluster_cpus(ray) // cpus_per_task))
    parts = shards(files, max(1, n))
    opts = dict(options, threads=cpus_per_task)
    tracker = _tracker_class().remote()
    task = ray.remote(_run_shard).options(num_cpus=cpus_per_task, max_retries=max_retries,
                                          retry_exceptions=False,
                                          **({"runtime_env": runtime_env} if runtime_env else {}))
    start = time.monotonic()
    pending = [task.remote(collection, p, out, opts, tracker) for p in parts]
    refs = list(pending)
    last = start

    def report(final=False):
        done, configs = ray.get(tracker.state.remote())
        if progress is not None:
            progress(done, len(files), configs)
        elif not quiet:
            secs = time.monotonic() - start
            rate = configs / secs if secs > 0 else 0.0
            line = f"progress: {collection} {done}/{len(files)} files, {configs} configs, {rate:.0f} configs/s"
            if final:
                line += f", done in {secs:.1f} s"
            elif 0 < done < len(files):
                line += f", ETA {secs / done * (len(files) - done):.0f}s"
            print(line, file=sys.stderr, flush=True)

    while pending:
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=min(interval, 1.0))
        if time.monotonic() - last >= interval:
            last = time.monotonic()
            report()
    try:
        reports = ray.get(refs)
    except ray.exceptions.RayTaskError as e:
        # A tpusim error in a task (bad input, bad options): its own message.
        cause = getattr(e, "cause", None)
        ray.kill(tracker)
        if isinstance(cause, tpusim.TpusimError):
            raise tpusim.TpusimError(str(cause)) from None
        raise
    # Alone in the tree now: clear what workers that died mid-file left (a run with no
    # inputs makes nothing else).
    tidy = tpusim.generate(collection, [], out, **options)
    report(final=True)
    ray.kill(tracker)
    return merge_reports(reports + [tidy], time.monotonic() - start)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``tpusim-ray {tile,layout} INPUT... --out DIR [options]``."""
    ap = argparse.ArgumentParser(
        prog="tpusim-ray",
        description="tpusim generate on a Ray cluster: the same tree as one process, "
                    "sharded by input file into Ray tasks (see docs/python.md).")
    ap.add_argument("collection", choices=["tile", "layout"])
    ap.add_argument("inputs", nargs="+", help="module files, or folders of *.hlo / *.pb")
    ap.add_argument("--out", required=True, help="output root, on a filesystem every node sees")
    ap.add_argument("--address", default=None,
                    help="Ray cluster address ('auto': the running cluster; default: a local one)")
    ap.add_argument("--tasks", type=int, default=None, help="number of shards (default: 4 per CPU)")
    ap.add_argument("--cpus-per-task", type=int, default=1)
    ap.add_argument("--max-retries", type=int, default=3)
    ap.add_argument("--configs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tpu", default="v3")
    ap.add_argument("--split", default="80/10/10")
    ap.add_argument("--noise", type=float, default=0.0)
    ap.add_argument("--pad-minus-one", action="store_true")
    ap.add_argument("--pb", action="store_true")
    ap.add_argument("--search", default="random", choices=["random", "default"])
    ap.add_argument("--source", default="xla", choices=["xla", "nlp"])
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between progress lines")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the run report as JSON")
    a = ap.parse_args(argv)
    options = dict(configs=a.configs, seed=a.seed, tpu=a.tpu, split=a.split, noise=a.noise,
                   pad_minus_one=a.pad_minus_one, pb=a.pb)
    if a.collection == "layout":
        options.update(search=a.search, source=a.source)
    try:
        r = generate(a.collection, a.inputs, a.out, tasks=a.tasks, cpus_per_task=a.cpus_per_task,
                     max_retries=a.max_retries, address=a.address, interval=a.interval,
                     quiet=a.quiet, **options)
    except tpusim.TpusimError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps(r, indent=2))
    else:
        print(f"{r['modules']} modules, {r['files_written']} files written, {r['files_skipped']} "
              f"skipped (already complete), {r['configs']} configs in {r['seconds']:.2f} s "
              f"({r['configs_per_second']:.0f} configs/s)")
        for n in r["notes"]:
            print(f"note: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
