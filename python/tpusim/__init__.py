"""tpusim from Python: XLA HLO -> compiled kernels -> TPU runtime estimates, and
TpuGraphs samples on disk or in memory.

Every function is a thin call into the tpusim Rust library (the same code the ``tpusim``
command runs), and returns what the command's ``--json`` prints, as plain Python objects::

    import tpusim
    est = tpusim.estimate("hlo_samples/mlp_train.hlo", tpu="v3")
    print(est["total_ns"], len(est["kernels"]))

A *module source* is HLO text (``str`` starting with ``HloModule`` or of several lines), a
path (``os.PathLike``, or any other ``str``) or the ``bytes`` of a module file (HLO text, ``HloModuleProto``,
``ModuleTuningData`` or ``TuningData``). Errors raise :class:`TpusimError` with the
message the command prints. Long calls release the GIL.

Samples in memory (:func:`tile_samples`, :func:`layout_samples`) are dicts of numpy
arrays with exactly the keys, dtypes and shapes of the npz files :func:`generate_tile` /
:func:`generate_layout` write: the library lists a sample's arrays once and both the
file writer and these functions read that list.

Optional parts, imported on use: :mod:`tpusim.jax` (lower a JAX function and estimate
it), :mod:`tpusim.distributed` (generation on a Ray cluster), :mod:`tpusim.torch`
(PyTorch Geometric datasets of generated samples).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterable, Optional, Sequence, Union

from . import _tpusim
from ._tpusim import TpusimError, __version__

Source = Union[str, bytes, "os.PathLike[str]"]
Progress = Optional[Callable[[int, int], Any]]

__all__ = [
    "TpusimError",
    "__version__",
    "parse",
    "print_module",
    "analyze",
    "compile",
    "estimate",
    "explain",
    "tile_samples",
    "layout_samples",
    "generate",
    "generate_tile",
    "generate_layout",
    "module_names",
]


def parse(source: Source, *, split_modules: bool = False, verify: bool = True) -> Dict[str, Any]:
    """Parse a module (``tpusim parse --json``): ``{"file", "ok", "modules",
    "computations", "instructions", "verifier_warnings"}``. With ``split_modules``, lines
    that are exactly ``// -----`` separate modules; ``verify=False`` skips the shape
    verifier (its findings are counted, as the command's warnings)."""
    return _tpusim.parse(source, split_modules=split_modules, verify=verify)


def print_module(source: Source) -> str:
    """The module as canonical HLO text (``tpusim print``)."""
    return _tpusim.print_module(source)


def analyze(source: Source) -> Dict[str, Any]:
    """XLA's cost analysis of the module (``tpusim analyze --json``): flops,
    transcendentals, bytes accessed, per instruction."""
    return _tpusim.analyze(source)


def compile(source: Source, config: Union[None, str, "os.PathLike[str]", Dict[str, Any]] = None,
            *, emit: str = "json") -> Union[Dict[str, Any], str]:
    """Compile under a configuration (``tpusim compile --emit json``): the kernels, the
    compile statistics and notes. ``config`` is a JSON/TOML file or the JSON form as a
    dict; ``emit="hlo"`` returns the compiled module as HLO text instead."""
    return _tpusim.compile(source, config, emit=emit)


def estimate(source: Source, tpu: str = "v3",
             config: Union[None, str, "os.PathLike[str]", Dict[str, Any]] = None,
             *, host_dispatch: bool = False) -> Dict[str, Any]:
    """Runtime per kernel and in total on a TPU (``tpusim estimate --json``). ``tpu`` is
    a preset (v2, v3, v4, v5e, v5p, v6e) or a JSON/TOML target file."""
    return _tpusim.estimate(source, tpu, config, host_dispatch=host_dispatch)


def explain(source: Source, kernel: str, tpu: str = "v3",
            config: Union[None, str, "os.PathLike[str]", Dict[str, Any]] = None) -> Dict[str, Any]:
    """The full derivation of one kernel's runtime (``tpusim explain --json``); its
    total is :func:`estimate`'s row for the kernel."""
    return _tpusim.explain(source, kernel, tpu, config)


def tile_samples(source: Source, *, name: Optional[str] = None, configs: int = 100,
                 seed: int = 0, tpu: str = "v3", noise: float = 0.0,
                 pad_minus_one: bool = False, threads: Optional[int] = None,
                 progress: Progress = None) -> Dict[str, Dict[str, Any]]:
    """The tile samples of a module, in memory: ``{stem: {npz key: ndarray}}``, one per
    distinct kernel with at least two configurations, keyed by the file stem the tile
    collection would write (``<module>_<fingerprint>``). The module's name (which seeds
    the sampling) is the file name for a path, else ``name`` or the module's own name;
    with the same name and options the arrays equal the npz files'. ``progress(done,
    total)`` is called now and then (kernels)."""
    return _tpusim.tile_samples(source, name=name, configs=configs, seed=seed, tpu=tpu,
                                noise=noise, pad_minus_one=pad_minus_one, threads=threads,
                                progress=progress)


def layout_samples(source: Source, *, name: Optional[str] = None, configs: int = 100,
                   seed: int = 0, tpu: str = "v3", noise: float = 0.0,
                   pad_minus_one: bool = False, search: str = "random",
                   threads: Optional[int] = None,
                   progress: Progress = None) -> Dict[str, Dict[str, Any]]:
    """The layout sample of each module of a source, in memory: ``{module name: {npz
    key: ndarray}}`` (a module without configurable nodes has none). ``search`` is
    ``random`` or ``default``; ``progress(done, total)`` counts configurations."""
    return _tpusim.layout_samples(source, name=name, configs=configs, seed=seed, tpu=tpu,
                                  noise=noise, pad_minus_one=pad_minus_one, search=search,
                                  threads=threads, progress=progress)


def generate(collection: str,
             inputs: Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]],
             out: Union[str, "os.PathLike[str]"], *, configs: int = 100, seed: int = 0,
             tpu: str = "v3", split: str = "80/10/10", noise: float = 0.0,
             shard: Union[str, Sequence[int]] = "0/1", pad_minus_one: bool = False,
             pb: bool = False, search: str = "random", source: str = "xla",
             threads: Optional[int] = None, progress: Progress = None) -> Dict[str, Any]:
    """``tpusim generate COLLECTION INPUTS --out OUT ...`` (the report its ``--json``
    prints): the same files, the same tree, byte for byte. ``inputs`` are module files
    (a sequence of paths, or one path; an empty sequence makes nothing, but still clears
    the temporary files dead runs left in the collection when no other run writes it);
    ``shard`` is ``"i/n"`` or ``(i, n)``."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if not isinstance(shard, str):
        i, n = shard
        shard = f"{i}/{n}"
    return _tpusim.generate(collection, [os.fspath(p) for p in inputs], os.fspath(out),
                            configs=configs, seed=seed, tpu=tpu, split=split, noise=noise,
                            shard=shard, pad_minus_one=pad_minus_one, pb=pb, search=search,
                            source=source, threads=threads, progress=progress)


def generate_tile(inputs, out, **options) -> Dict[str, Any]:
    """:func:`generate` of the tile collection."""
    return generate("tile", inputs, out, **options)


def generate_layout(inputs, out, **options) -> Dict[str, Any]:
    """:func:`generate` of the layout collection."""
    return generate("layout", inputs, out, **options)


def module_names(path: Union[str, "os.PathLike[str]"], count: int = 1) -> list:
    """The names ``generate`` gives the ``count`` modules of the file ``path``."""
    return _tpusim.module_names(os.fspath(path), count)
