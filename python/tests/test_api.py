"""The package answers what the CLI's --json prints, for the same input; errors carry the
CLI's message."""

import json
import os
from pathlib import Path

import pytest

import tpusim
from conftest import SAMPLES

MLP = SAMPLES / "mlp_train.hlo"
RESNET = SAMPLES / "resnet18_infer_b8.hlo"


def test_parse_equals_cli(cli):
    for f in (MLP, RESNET, SAMPLES / "mlp_train.hlo.pb"):
        want = json.loads(cli("parse", f, "--json").stdout)
        assert tpusim.parse(str(f)) == want
        assert tpusim.parse(Path(f)) == want
    got = tpusim.parse(MLP.read_text())
    assert got["file"] == "<string>" and got["ok"] is True
    assert got["instructions"] == tpusim.parse(MLP)["instructions"] > 0


def test_print_module_equals_cli(cli):
    assert tpusim.print_module(MLP) == cli("print", MLP).stdout
    # bytes of a binary HloModuleProto read by content
    pb = (SAMPLES / "mlp_train.hlo.pb").read_bytes()
    assert tpusim.print_module(pb) == cli("print", SAMPLES / "mlp_train.hlo.pb").stdout


def test_analyze_equals_cli(cli_json):
    want = cli_json("analyze", RESNET, "--json")
    assert tpusim.analyze(RESNET) == want
    assert tpusim.analyze(RESNET.read_text()) == want
    assert want["flops"] > 0


def test_compile_equals_cli(cli, cli_json, tmp_path):
    want = cli_json("compile", RESNET, "--emit", "json")
    assert tpusim.compile(RESNET) == want
    assert tpusim.compile(RESNET, emit="hlo") == cli("compile", RESNET).stdout
    # a configuration, as a file and as its JSON form
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[[layout]]\nnode = "dot_general.5"\nkernel = [0, 1]\n')
    want = cli_json("compile", MLP, "--config", cfg, "--emit", "json")
    assert want["stats"]["copies_inserted"] == 1
    assert tpusim.compile(MLP, cfg) == want
    assert tpusim.compile(MLP, {"layout": [{"node": "dot_general.5", "kernel": [0, 1]}]}) == want
    assert tpusim.estimate(MLP, config=cfg) == cli_json("estimate", MLP, "--config", cfg, "--json")


def test_estimate_equals_cli(cli_json):
    for tpu in ("v3", "v5e"):
        want = cli_json("estimate", RESNET, "--tpu", tpu, "--json")
        got = tpusim.estimate(RESNET, tpu=tpu)
        assert got == want
        assert got["total_ns"] > 0 and len(got["kernels"]) == len(want["kernels"])
    # the same module as bytes and as text
    assert tpusim.estimate(MLP.read_bytes()) == tpusim.estimate(MLP.read_text())
    assert tpusim.estimate(SAMPLES / "mlp_train.hlo.pb") == cli_json(
        "estimate", SAMPLES / "mlp_train.hlo.pb", "--json")


def test_explain_equals_cli(cli_json):
    est = tpusim.estimate(RESNET)
    k = max(est["kernels"], key=lambda r: r["total_ns"])
    want = cli_json("explain", RESNET, "--kernel", k["name"], "--json")
    got = tpusim.explain(RESNET, k["name"])
    assert got == want
    assert got["total_ns"] == pytest.approx(k["total_ns"])


def test_errors_carry_the_cli_message(cli, tmp_path):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\n\nENTRY e {\n  ROOT x = f32[2] bogus()\n}\n")
    r = cli("estimate", bad, check=False)
    assert r.returncode == 1
    with pytest.raises(tpusim.TpusimError) as e:
        tpusim.estimate(bad)
    assert str(e.value) == r.stderr.strip()
    assert str(e.value).startswith(f"{bad}:4:")
    r = cli("explain", RESNET, "--kernel", "no_such_kernel", check=False)
    with pytest.raises(tpusim.TpusimError) as e:
        tpusim.explain(RESNET, "no_such_kernel")
    assert str(e.value) == r.stderr.strip()
    r = cli("estimate", RESNET, "--tpu", "v99", check=False)
    with pytest.raises(tpusim.TpusimError) as e:
        tpusim.estimate(RESNET, tpu="v99")
    assert "error: " + str(e.value) == r.stderr.strip()
    with pytest.raises(tpusim.TpusimError, match="--configs must be at least 2"):
        tpusim.tile_samples(MLP, configs=1)
    with pytest.raises(TypeError):
        tpusim.estimate(42)


def test_a_missing_file_is_named(cli, tmp_path):
    missing = tmp_path / "nope.hlo"
    r = cli("estimate", missing, check=False)
    with pytest.raises(tpusim.TpusimError) as e:
        tpusim.estimate(str(missing))
    assert str(e.value) == r.stderr.strip()
    assert str(missing) in str(e.value)
