"""Type stubs of the compiled extension `tpusim._tpusim` (the functions `tpusim`
re-exports with docstrings)."""

import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np

Source = Union[str, bytes, os.PathLike[str]]  # text: several lines or "HloModule ..."; else a path
Config = Union[None, str, os.PathLike[str], Dict[str, Any]]
ProgressFn = Optional[Callable[[int, int], Any]]
Sample = Dict[str, np.ndarray]

__version__: str

class TpusimError(Exception): ...

def parse(source: Source, *, split_modules: bool = ..., verify: bool = ...) -> Dict[str, Any]: ...
def print_module(source: Source) -> str: ...
def analyze(source: Source) -> Dict[str, Any]: ...
def compile(source: Source, config: Config = ..., *, emit: str = ...) -> Union[Dict[str, Any], str]: ...
def estimate(source: Source, tpu: str = ..., config: Config = ..., *,
             host_dispatch: bool = ...) -> Dict[str, Any]: ...
def explain(source: Source, kernel: str, tpu: str = ..., config: Config = ...) -> Dict[str, Any]: ...
def tile_samples(source: Source, *, name: Optional[str] = ..., configs: int = ..., seed: int = ...,
                 tpu: str = ..., noise: float = ..., pad_minus_one: bool = ...,
                 threads: Optional[int] = ..., progress: ProgressFn = ...) -> Dict[str, Sample]: ...
def layout_samples(source: Source, *, name: Optional[str] = ..., configs: int = ...,
                   seed: int = ..., tpu: str = ..., noise: float = ...,
                   pad_minus_one: bool = ..., search: str = ..., threads: Optional[int] = ...,
                   progress: ProgressFn = ...) -> Dict[str, Sample]: ...
def generate(collection: str, inputs: Sequence[str], out: str, *, configs: int = ...,
             seed: int = ..., tpu: str = ..., split: str = ..., noise: float = ...,
             shard: str = ..., pad_minus_one: bool = ..., pb: bool = ..., search: str = ...,
             source: str = ..., threads: Optional[int] = ...,
             progress: ProgressFn = ...) -> Dict[str, Any]: ...
def module_names(path: str, count: int) -> List[str]: ...
