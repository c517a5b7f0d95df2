//! Calibration of the kernel model against published TPU matmul timings
//! (`shared/reference/tpu_measurements.json`, spec §6).
//!
//! The JSON is read from the shared folder (`tests/common::shared_dir`); the tests
//! skip with a printed reason when it is absent.

mod common;

use serde_json::Value;
use tpusim::tpu::{estimate, KernelDesc, MxuPrecision, TileConfig, TpuTarget};

/// The published measurements, or `None` after printing why `test` skips.
fn measurements(test: &str) -> Option<Value> {
    let p = common::shared(test)?.join("reference/tpu_measurements.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// One matmul row with its prediction.
struct Row {
    id: String,
    impl_: String,
    m: i64,
    k: i64,
    n: i64,
    block: Option<[i64; 3]>,
    measured_s: f64,
    predicted_s: f64,
}

fn predict_rows(v: &Value) -> Vec<Row> {
    let v5e = TpuTarget::v5e().with_host_dispatch(true);
    let v2 = TpuTarget::v2();
    let mut out = Vec::new();
    let Some(rows) = v.get("rows").and_then(Value::as_array) else {
        return out;
    };
    for r in rows {
        if r.get("op").and_then(Value::as_str) != Some("matmul") {
            continue;
        }
        let get = |k: &str| r.get(k).and_then(Value::as_i64);
        let (Some(m), Some(k), Some(n)) = (get("m"), get("k"), get("n")) else {
            continue;
        };
        let Some(measured_s) = r.get("seconds").and_then(Value::as_f64) else {
            continue;
        };
        let id = r
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        let tpu = r.get("tpu").and_then(Value::as_str).unwrap_or("");
        let impl_ = r
            .get("impl")
            .and_then(Value::as_str)
            .unwrap_or("sharded")
            .to_string();
        let block = r.get("block").and_then(Value::as_array).and_then(|b| {
            let x: Vec<i64> = b.iter().filter_map(Value::as_i64).collect();
            (x.len() == 3).then(|| [x[0], x[1], x[2]])
        });
        let (target, mm, kk, nn) = if tpu == "v5e" {
            (&v5e, m, k, n)
        } else if tpu.starts_with("v2") {
            // 4-way data × 2-way model parallel on 8 cores: one core's shard,
            // timed by the profiler (no host dispatch).
            (&v2, m / 4, k, n / 2)
        } else {
            continue;
        };
        let desc = KernelDesc::matmul(&id, 1, mm, kk, nn, 16, 16, MxuPrecision::Bf16).unwrap();
        let cfg = match block {
            // The Pallas block in elements, as tile counts.
            Some([bm, bk, bn]) => TileConfig::from_sizes(&desc, &[bm, bn, bk]),
            None => TileConfig::default(),
        };
        let est = estimate(&desc, &cfg, target).unwrap();
        out.push(Row {
            id,
            impl_,
            m,
            k,
            n,
            block,
            measured_s,
            predicted_s: est.total_ns * 1e-9,
        });
    }
    out
}

fn err(r: &Row) -> f64 {
    (r.predicted_s - r.measured_s) / r.measured_s
}

#[test]
fn prints_prediction_table() {
    let Some(v) = measurements("prints_prediction_table") else {
        return;
    };
    let rows = predict_rows(&v);
    assert!(
        rows.len() >= 10,
        "expected the 9 v5e rows + the v2 row, got {}",
        rows.len()
    );
    println!("| row | impl | shape (m×k×n) | block | measured | predicted | error |");
    println!("|---|---|---|---|---|---|---|");
    let mut sum = 0.0;
    for r in &rows {
        println!(
            "| {} | {} | {}×{}×{} | {} | {:.4} ms | {:.4} ms | {:+.1}% |",
            r.id,
            r.impl_,
            r.m,
            r.k,
            r.n,
            r.block
                .map(|b| format!("{}×{}×{}", b[0], b[1], b[2]))
                .unwrap_or("default".into()),
            r.measured_s * 1e3,
            r.predicted_s * 1e3,
            100.0 * err(r)
        );
        sum += err(r).abs();
    }
    let mape = sum / rows.len() as f64;
    println!("MAPE over {} matmul rows: {:.1}%", rows.len(), 100.0 * mape);
    assert!(mape < 0.15, "MAPE {mape}");
}

#[test]
fn xla_large_matmuls_within_10_percent() {
    let Some(v) = measurements("xla_large_matmuls_within_10_percent") else {
        return;
    };
    let rows = predict_rows(&v);
    for id in ["v5e-xla-matmul-4096", "v5e-xla-matmul-8192"] {
        let r = rows
            .iter()
            .find(|r| r.id == id)
            .unwrap_or_else(|| panic!("row {id} missing"));
        assert!(
            err(r).abs() < 0.10,
            "{id}: predicted {} s vs measured {} s",
            r.predicted_s,
            r.measured_s
        );
    }
}

#[test]
fn pallas_blocks_ranked_as_measured() {
    let Some(v) = measurements("pallas_blocks_ranked_as_measured") else {
        return;
    };
    let rows = predict_rows(&v);
    let mut pallas: Vec<&Row> = rows.iter().filter(|r| r.impl_ == "pallas").collect();
    assert_eq!(pallas.len(), 6);
    pallas.sort_by(|a, b| a.measured_s.total_cmp(&b.measured_s));
    let measured_order: Vec<&str> = pallas.iter().map(|r| r.id.as_str()).collect();
    pallas.sort_by(|a, b| a.predicted_s.total_cmp(&b.predicted_s));
    let predicted_order: Vec<&str> = pallas.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(predicted_order, measured_order);
    // 128³ blocks are several times slower than 512×1024×1024 blocks.
    for size in [1024, 4096, 8192] {
        let small = rows
            .iter()
            .find(|r| r.m == size && r.block == Some([128, 128, 128]))
            .unwrap();
        let big = rows
            .iter()
            .find(|r| r.m == size && r.block == Some([512, 1024, 1024]))
            .unwrap();
        let ratio = small.predicted_s / big.predicted_s;
        let measured = small.measured_s / big.measured_s;
        let min = if size == 1024 { 2.0 } else { 5.0 };
        assert!(
            ratio > min,
            "{size}: predicted ratio {ratio:.2} (measured {measured:.2})"
        );
    }
}

#[test]
fn sharded_v2_upprojection_close_to_profile() {
    let Some(v) = measurements("sharded_v2_upprojection_close_to_profile") else {
        return;
    };
    let rows = predict_rows(&v);
    let r = rows.iter().find(|r| r.id == "v2-sharded-upproj").unwrap();
    assert!(
        err(r).abs() < 0.10,
        "predicted {} vs {}",
        r.predicted_s,
        r.measured_s
    );
}
