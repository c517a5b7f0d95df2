//! `tpusim list`: the kernels are the compiler's, in execution order; the configurable
//! nodes are the layout evaluator's, in the order and with the node indices `generate
//! layout` writes to `node_config_ids`; `--json` and the tables agree.

mod common;

use std::process::Command;

use serde_json::Value;
use tpusim::dataset::layout_eval::LayoutEvaluator;
use tpusim::dataset::listing::{list_kernels, list_nodes};
use tpusim::kernels::LoweredProgram;
use tpusim::passes::{compile, configurable_nodes, CompilationConfig};
use tpusim::tpu::{default_tile, TpuTarget};

use common::{load_sample as load, sample_path as sample};

fn tpusim(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(args)
        .output()
        .expect("run tpusim");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn kernels_are_the_compilers_in_execution_order() {
    let t = TpuTarget::v3();
    for name in ["mlp_train.hlo", "resnet18_infer_b8.hlo"] {
        let m = load(name);
        let cfg = CompilationConfig::default();
        let c = compile(&m, &cfg).unwrap();
        let p = LoweredProgram::new(&c.module).unwrap();
        let l = list_kernels(&m, &cfg, &t).unwrap();
        assert_eq!(l.len(), c.kernels.len());
        for (i, (e, k)) in l.iter().zip(&c.kernels).enumerate() {
            assert_eq!((e.index, e.name.as_str()), (i, k.name.as_str()));
            assert_eq!((e.kind, e.hero), (k.kind, k.hero.name()));
            let d = &p.kernels[p.kernel_index(&e.name).unwrap()].lowered.desc();
            assert_eq!(e.iteration_space.len(), d.n_iter());
            assert_eq!(e.tile.as_ref(), Some(&default_tile(d, &t)));
        }
    }
    // mlp_train: 7 kernels, the first a 64×1024 (×512 contraction) matmul
    let l = list_kernels(&load("mlp_train.hlo"), &CompilationConfig::default(), &t).unwrap();
    assert_eq!(l.len(), 7);
    assert_eq!(l[0].hero, "dot");
    assert_eq!(l[0].iteration_space, [64, 1024, 512]);
}

#[test]
fn nodes_are_the_layout_evaluators_with_node_config_ids() {
    let t = TpuTarget::v3();
    for name in ["mlp_train.hlo", "resnet18_infer_b8.hlo"] {
        let m = load(name);
        let ev = LayoutEvaluator::new(&m, &t);
        let l = list_nodes(&m, &t).unwrap();
        assert_eq!(l.len(), ev.nodes.len());
        let cn = configurable_nodes(&m);
        for (i, (e, n)) in l.iter().zip(&ev.nodes).enumerate() {
            assert_eq!(e.index, i);
            assert_eq!((e.name.as_str(), e.ranks), (n.name.as_str(), n.ranks));
            assert_eq!(e.node, cn[i].2);
        }
    }
    // generate layout writes one node_config_ids entry per listed node, the same ids
    let dir = tempfile::tempdir().unwrap();
    let mlp = sample("mlp_train.hlo");
    let (ok, _, err) = tpusim(&[
        "generate",
        "layout",
        mlp.to_str().unwrap(),
        "--out",
        dir.path().to_str().unwrap(),
        "--configs",
        "4",
        "--quiet",
    ]);
    assert!(ok, "{err}");
    let arrays = tpusim::dataset::npz::read_npz(
        dir.path().join("npz/layout/xla/random/train/mlp_train.npz"),
    )
    .unwrap();
    let ids = arrays["node_config_ids"]
        .as_slice::<i64>()
        .unwrap()
        .to_vec();
    let l = list_nodes(&load("mlp_train.hlo"), &t).unwrap();
    assert_eq!(ids.len(), 5);
    let listed: Vec<i64> = l.iter().map(|e| e.graph_node.unwrap() as i64).collect();
    assert_eq!(listed, ids);
}

#[test]
fn cli_json_and_tables_agree() {
    let mlp = sample("mlp_train.hlo");
    let f = mlp.to_str().unwrap();
    let (ok, json, err) = tpusim(&["list", f, "--json"]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&json).unwrap();
    let kernels = v["kernels"].as_array().unwrap();
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!((kernels.len(), nodes.len()), (7, 5));
    assert_eq!(nodes[0]["name"], "dot_general.5");
    assert_eq!(nodes[0]["opcode"], "dot");
    assert_eq!(nodes[0]["ranks"], serde_json::json!([2, 2, 2]));
    // --kernels alone: no nodes
    let (ok, json, _) = tpusim(&["list", f, "--kernels", "--json"]);
    assert!(ok);
    let k: Value = serde_json::from_str(&json).unwrap();
    assert!(k["nodes"].is_null() && k["kernels"] == v["kernels"]);
    // the tables: a header per part, one line per entry
    let (ok, text, _) = tpusim(&["list", f]);
    assert!(ok);
    assert!(text.contains("7 kernels (execution order"), "{text}");
    assert!(text.contains("5 configurable nodes"), "{text}");
    for e in kernels.iter().chain(nodes) {
        let name = e["name"].as_str().unwrap();
        assert_eq!(
            text.matches(&format!(" {name} ")).count(),
            1,
            "{name}\n{text}"
        );
    }
    // bad input: a clear error, exit 1, no panic
    let (ok, _, err) = tpusim(&["list", "/nonexistent.hlo"]);
    assert!(!ok && !err.contains("panicked"), "{err}");
}
