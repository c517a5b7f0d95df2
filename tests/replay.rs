//! Measured-run replay: `tpusim estimate TUNING.pb --runs --out FILE.csv` predicts every
//! run of a TpuGraphs tuning file, errored runs included.

use std::path::Path;
use std::process::Command;
use tpusim::proto::{
    read_hlo_module_proto, write_tuning_file, LayoutConfig, ModuleTuning, NodeLayout, Run,
    RunConfig, Tuning,
};

#[test]
fn layout_runs_are_replayed_in_order() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(root.join("hlo_samples/mlp_train.hlo.pb")).unwrap();
    let proto = read_hlo_module_proto(&bytes).unwrap();
    let module = tpusim::proto::module_from_proto(&proto).unwrap();
    let nodes = tpusim::passes::configurable_nodes(&module);
    assert_eq!(nodes.len(), 5, "the MLP has five dots");
    let ids: Vec<u64> = nodes.iter().map(|n| n.2 as u64).collect();
    let unconstrained = || NodeLayout::new(vec![], vec![], vec![]);
    let mut transposed = vec![unconstrained(); ids.len()];
    transposed[0] = NodeLayout::new(vec![0, 1], vec![0, 1], vec![0, 1]);
    let run = |nodes: Vec<NodeLayout>, error: bool, is_default: bool| Run {
        config: RunConfig::Layout(LayoutConfig { nodes }),
        error,
        is_default,
        profile: None,
    };
    let mt = ModuleTuning {
        module: Some(proto),
        fingerprint: 42,
        runs: vec![
            run(vec![unconstrained(); ids.len()], false, true),
            run(transposed.clone(), false, false),
            run(transposed, true, false),
        ],
        config_index_to_node: ids,
    };
    let dir = tempfile::tempdir().unwrap();
    let pb = dir.path().join("mlp_layout.pb");
    write_tuning_file(&pb, &Tuning::Module(mt)).unwrap();
    let csv = dir.path().join("pred.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args([
            "estimate",
            pb.to_str().unwrap(),
            "--runs",
            "--out",
            csv.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "ID,config_index,predicted_runtime_ns");
    assert_eq!(lines.len(), 4, "{text}");
    let ns = |l: &str| -> i64 { l.rsplit(',').next().unwrap().parse().unwrap() };
    assert!(lines[1].starts_with("mlp_layout,0,"));
    assert!(lines[3].starts_with("mlp_layout,2,"));
    // The default run is the default compilation's estimate; the transposed layout of
    // the first dot changes the prediction, the same for the errored run.
    let default = ns(lines[1]);
    let est = Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(["estimate", pb.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&est.stdout).unwrap();
    assert_eq!(v["total_ns"].as_f64().unwrap().round() as i64, default);
    assert_ne!(ns(lines[2]), default);
    assert_eq!(ns(lines[2]), ns(lines[3]));
}
