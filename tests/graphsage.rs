//! The learned baseline of `examples/graphsage/` (GraphSAGE in PyTorch Geometric): it
//! trains for a few steps on a tiny generated collection and writes predictions that
//! `tpusim compare` reads beside the analytical model's. Skips, saying why, without
//! python3 with torch and torch_geometric.

mod common;

use std::process::Command;

#[test]
fn graphsage_baseline_trains_and_its_predictions_compare() {
    if !common::has(
        common::Need::Torch,
        "graphsage_baseline_trains_and_its_predictions_compare",
    ) {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_tpusim");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for coll in ["tile", "layout"] {
        common::run_ok(
            Command::new(bin)
                .args(["generate", coll])
                .arg(common::sample_path("mlp_train.hlo"))
                .arg("--out")
                .arg(&out)
                .args(["--configs", "6", "--noise", "0.1", "--quiet"]),
        );
    }
    let data = out.join("npz");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/graphsage/tpugraphs_sage.py");
    let learned = dir.path().join("learned.csv");
    let run = |csv: &std::path::Path| {
        common::run_ok(
            Command::new("python3")
                .arg(&script)
                .arg("--train")
                .arg(&data)
                .arg("--test")
                .arg(&data)
                .arg("--out")
                .arg(csv)
                .args([
                    "--epochs",
                    "2",
                    "--configs",
                    "4",
                    "--hidden",
                    "16",
                    "--layers",
                    "2",
                ]),
        );
    };
    run(&learned);
    let text = std::fs::read_to_string(&learned).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("ID,config_index,predicted_runtime_ns"));
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    let ids: std::collections::BTreeSet<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert!(ids.contains("layout:xla:random:mlp_train"), "{ids:?}");
    assert!(
        ids.iter()
            .filter(|i| i.starts_with("tile:xla:mlp_train_"))
            .count()
            >= 3
    );
    for r in &rows {
        let ns: f64 = r[2].parse().unwrap();
        assert!(ns.is_finite() && ns > 0.0, "{r:?}");
    }
    // Same seed, same predictions.
    let again = dir.path().join("again.csv");
    run(&again);
    assert_eq!(text, std::fs::read_to_string(&again).unwrap());

    let analytical = dir.path().join("analytical.csv");
    common::run_ok(
        Command::new(bin)
            .arg("predict")
            .arg(&data)
            .arg("--out")
            .arg(&analytical)
            .arg("--quiet"),
    );
    let table = common::run_ok(
        Command::new(bin)
            .arg("compare")
            .arg("--data")
            .arg(&data)
            .arg("--pred")
            .arg(format!("analytical={}", analytical.display()))
            .arg("--pred")
            .arg(format!("learned={}", learned.display())),
    );
    assert!(
        table.contains("analytical") && table.contains("learned"),
        "{table}"
    );
    assert!(
        table.contains(&format!("tile:xla ({} graphs)", ids.len() - 1)),
        "{table}"
    );
}
