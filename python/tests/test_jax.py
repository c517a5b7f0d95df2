"""tpusim.jax: a JAX function lowered and estimated in one call equals the estimate of
its dumped HLO."""

import pytest

jax = pytest.importorskip("jax", reason="jax is not installed (pip install 'tpusim[jax]')")
import jax.numpy as jnp  # noqa: E402

import tpusim  # noqa: E402
import tpusim.jax  # noqa: E402


def step(w, x):
    return jnp.tanh(x @ w).sum()


def test_estimate_of_a_jax_function(tmp_path):
    w = jax.ShapeDtypeStruct((512, 1024), jnp.float32)
    x = jax.ShapeDtypeStruct((64, 512), jnp.float32)
    text = tpusim.jax.hlo(step, w, x)
    assert text.startswith("HloModule ")
    est = tpusim.jax.estimate(step, w, x, tpu="v3")
    (tmp_path / "step.hlo").write_text(text)
    assert est == tpusim.estimate(tmp_path / "step.hlo", tpu="v3")
    assert est["total_ns"] > 0
    # 64x512x1024 multiply-adds: the dot's flops are counted
    assert sum(k["flops"] for k in est["kernels"]) >= 2 * 64 * 512 * 1024
    assert tpusim.jax.estimate(step, w, x, tpu="v5e")["total_ns"] != est["total_ns"]
