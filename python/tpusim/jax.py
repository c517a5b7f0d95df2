"""Lower a JAX function to HLO and estimate it, in one call::

    import jax.numpy as jnp, tpusim.jax
    def step(w, x):
        return jnp.tanh(x @ w).sum()
    est = tpusim.jax.estimate(step, jnp.zeros((512, 1024)), jnp.zeros((64, 512)), tpu="v3")

The function is traced and lowered with ``jax.jit(fn).lower(*args)``, not compiled: the
HLO is the unoptimised module tpusim wants (``docs/jax.md`` says why the CPU- or
GPU-compiled form is not). Only the arguments' shapes and dtypes matter
(``jax.ShapeDtypeStruct`` works in place of arrays). JAX is imported on first use.
"""

from __future__ import annotations

from typing import Any, Dict

import tpusim


def hlo(fn, *args, static_argnums=(), **kwargs) -> str:
    """The HLO text of ``jax.jit(fn, static_argnums=...).lower(*args, **kwargs)``."""
    import jax

    lowered = jax.jit(fn, static_argnums=static_argnums).lower(*args, **kwargs)
    return lowered.as_text(dialect="hlo")


def estimate(fn, *args, tpu: str = "v3", config=None, host_dispatch: bool = False,
             static_argnums=(), **kwargs) -> Dict[str, Any]:
    """:func:`tpusim.estimate` of :func:`hlo` ``(fn, *args, **kwargs)``: what
    ``tpusim estimate --json`` prints for the dumped module."""
    return tpusim.estimate(hlo(fn, *args, static_argnums=static_argnums, **kwargs), tpu=tpu,
                           config=config, host_dispatch=host_dispatch)
