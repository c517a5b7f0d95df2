//! `tpusim compare`: predictors side by side on a generated collection (the analytical
//! model from the npz alone, and a deliberately wrong predictor), the figures checked
//! against the metrics computed here, and the HTML report rendered in headless Chromium.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use tpusim::eval::metrics::{kendall_tau_b, top_k_slowdown};
use tpusim::eval::score::{npz_of, npz_runtimes};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tpusim"))
}

fn rows(p: &Path) -> Vec<(String, usize, f64)> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn compare_puts_predictors_side_by_side_and_the_report_renders() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for coll in ["tile", "layout"] {
        common::run_ok(
            bin()
                .args(["generate", coll])
                .arg(common::sample_path("resnet18_infer_b8.hlo"))
                .arg(common::sample_path("mlp_train.hlo"))
                .arg("--out")
                .arg(&out)
                .args(["--configs", "12", "--noise", "0.05", "--quiet"]),
        );
    }
    let data = out.join("npz");
    let analytical = dir.path().join("analytical.csv");
    common::run_ok(
        bin()
            .arg("predict")
            .arg(&data)
            .arg("--out")
            .arg(&analytical)
            .arg("--quiet"),
    );
    // A predictor that ranks every graph backwards.
    let a = rows(&analytical);
    let mut text = String::from("ID,config_index,predicted_runtime_ns\n");
    for (id, j, ns) in &a {
        text.push_str(&format!("{id},{j},{}\n", 1e12 - ns));
    }
    let backwards = dir.path().join("backwards.csv");
    std::fs::write(&backwards, text).unwrap();

    let page = dir.path().join("report.html");
    let json = common::run_ok(
        bin()
            .arg("compare")
            .arg("--data")
            .arg(&data)
            .arg("--pred")
            .arg(format!("analytical={}", analytical.display()))
            .arg("--pred")
            .arg(format!("backwards={}", backwards.display()))
            .arg("--out")
            .arg(&page)
            .arg("--json"),
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        v["predictors"],
        serde_json::json!(["analytical", "backwards"])
    );

    // Per graph: τ and top-5 recomputed here from the npz runtimes.
    let mut by: HashMap<String, Vec<f64>> = HashMap::new();
    for (id, j, ns) in &a {
        let e = by.entry(id.clone()).or_default();
        assert_eq!(*j, e.len());
        e.push(*ns);
    }
    let graphs = v["graphs"].as_array().unwrap();
    assert_eq!(graphs.len(), by.len());
    let mut tile_tau = Vec::new();
    for g in graphs {
        let id = g["id"].as_str().unwrap();
        let (_, npz, tile) = ["train", "valid", "test"]
            .iter()
            .filter_map(|s| npz_of(&data, s, id))
            .find(|x| x.1.is_file())
            .unwrap();
        let y = npz_runtimes(&npz, tile).unwrap();
        let s = &by[id];
        let m = &g["metrics"][0];
        if y.iter().any(|&t| t != y[0]) {
            let tau = kendall_tau_b(s, &y).unwrap();
            assert!((m["tau"].as_f64().unwrap() - tau).abs() < 1e-12, "{id}");
            if tile {
                tile_tau.push(tau);
            }
            let back: Vec<f64> = s.iter().map(|x| 1e12 - x).collect();
            let tb = kendall_tau_b(&back, &y).unwrap();
            assert!((g["metrics"][1]["tau"].as_f64().unwrap() - tb).abs() < 1e-12);
        }
        let t5 = top_k_slowdown(s, &y, 5).unwrap();
        assert!((m["top5"].as_f64().unwrap() - t5).abs() < 1e-12, "{id}");
    }
    // Per collection: the mean of the per-graph τ; with 5 % noise on the labels the
    // analytical model still ranks well, the backwards one badly.
    let tile = v["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["collection"] == "tile:xla")
        .unwrap();
    let mean = tile_tau.iter().sum::<f64>() / tile_tau.len() as f64;
    assert!((tile["metrics"][0]["tau"].as_f64().unwrap() - mean).abs() < 1e-12);
    assert!(mean > 0.5, "analytical τ {mean}");
    assert!(tile["metrics"][1]["tau"].as_f64().unwrap() < -0.5);
    assert!(
        tile["metrics"][0]["top5"].as_f64().unwrap() < tile["metrics"][1]["top5"].as_f64().unwrap()
    );

    // The page: self-contained, the three plots, the same bytes twice.
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    for needle in [
        "Predicted against measured",
        "Kendall τ per graph",
        "Top-K slowdown",
        "<svg",
        "tile:xla",
    ] {
        assert!(html.contains(needle), "{needle}");
    }
    assert!(html.matches("<circle").count() > 200);
    let page2 = dir.path().join("report2.html");
    common::run_ok(
        bin()
            .arg("compare")
            .arg("--data")
            .arg(&data)
            .arg("--pred")
            .arg(format!("analytical={}", analytical.display()))
            .arg("--pred")
            .arg(format!("backwards={}", backwards.display()))
            .arg("--out")
            .arg(&page2),
    );
    assert_eq!(
        std::fs::read(&page).unwrap(),
        std::fs::read(&page2).unwrap()
    );

    if !common::has(
        common::Need::Chromium,
        "compare_puts_predictors_side_by_side_and_the_report_renders (the screenshot)",
    ) {
        return;
    }
    let chromium = common::chromium().unwrap();
    let shot = dir.path().join("report.png");
    let o = Command::new(chromium)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1400,2400",
        ])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(o.status.success());
    let log = String::from_utf8_lossy(&o.stderr);
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "{}", console.join("\n"));
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 50_000,
        "{} bytes",
        png.len()
    );
    if let Ok(keep) = std::env::var("TPUSIM_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}
