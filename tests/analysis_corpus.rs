//! Cost analysis vs XLA's own `HloCostAnalysis` numbers (`xla_cost_analysis.json`)
//! for every JAX dump, before and after XLA's optimisation; and the verifier over
//! every corpus module.

use std::path::{Path, PathBuf};

use tpusim::analysis::{analyze_module, verify_module};
use tpusim::hlo::{parse_module, split_modules};

/// The shared data folder: `$TPUSIM_SHARED`, else `../shared` next to the repo.
fn shared_dir() -> Option<PathBuf> {
    let p = match std::env::var_os("TPUSIM_SHARED") {
        Some(v) => PathBuf::from(v),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"),
    };
    if p.join("hlo_corpus").is_dir() {
        Some(p)
    } else {
        eprintln!(
            "skipping: shared data not found at {} (set TPUSIM_SHARED)",
            p.display()
        );
        None
    }
}

fn hlo_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "hlo"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Files that cannot match XLA's figures, with the reason (see docs/analysis.md).
const KNOWN_MISMATCHES: &[(&str, &str)] = &[];

fn rel(ours: f64, xla: f64) -> f64 {
    if xla == 0.0 {
        if ours == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        ((ours - xla) / xla).abs()
    }
}

#[test]
fn cost_analysis_matches_xla_on_the_jax_corpus() {
    let Some(shared) = shared_dir() else { return };
    let dir = shared.join("hlo_corpus/jax");
    let json_text = std::fs::read_to_string(dir.join("xla_cost_analysis.json"))
        .expect("xla_cost_analysis.json is readable");
    let xla: serde_json::Value = serde_json::from_str(&json_text).expect("valid JSON");
    let files = hlo_files(&dir);
    assert!(files.len() >= 24, "expected the 24 JAX dumps, found {}", files.len());
    let mut failures = Vec::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(path).unwrap();
        let m = parse_module(&name, &text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let r = analyze_module(&m);
        let x = &xla[&name];
        let get = |k: &str| x.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
        let (xf, xt, xb) = (get("flops"), get("transcendentals"), get("bytes accessed"));
        let (ef, et, eb) = (
            rel(r.flops, xf),
            rel(r.transcendentals, xt),
            rel(r.bytes_accessed, xb),
        );
        let ok = ef <= 1e-3 && et <= 1e-3 && eb <= 1e-2;
        println!(
            "{:<40} flops {:>16.0} / {:>16.0} ({:+.2e})  transc {:>10.0} / {:>10.0}  bytes {:>14.0} / {:>14.0} ({:+.2e}) {}",
            name, r.flops, xf, ef, r.transcendentals, xt, r.bytes_accessed, xb, eb,
            if ok { "ok" } else { "MISMATCH" }
        );
        let known = KNOWN_MISMATCHES.iter().any(|(n, _)| *n == name);
        if !ok && !known {
            failures.push(name.clone());
        }
        if ok && known {
            failures.push(format!("{name} is listed as a known mismatch but matches"));
        }
    }
    assert!(failures.is_empty(), "cost mismatches: {failures:?}");
}

/// Instructions of the XLA corpus that XLA's own verifier rejects (they come from
/// MLIR-importer tests that exercise lenient import paths). Each must be reported,
/// nothing else may be. `(file, instruction, XLA's rule)`; see docs/analysis.md.
const KNOWN_INVALID: &[(&str, &str, &str)] = &[
    (
        "hlo__translate__hlo_to_mhlo__tests__import.hlo",
        "convolution.4",
        "ShapeInference: Window dimensions do not match RHS shape (3x3 window, 2x2 kernel)",
    ),
    (
        "hlo__translate__hlo_to_mhlo__tests__import.hlo",
        "map",
        "ShapeInference: Mapped computation's result has to be a scalar (returns (f32[]))",
    ),
    (
        "hlo__translate__hlo_to_mhlo__tests__import.hlo",
        "reduce.2",
        "ShapeInference (VerifyReducerShape): init value f32[4] is not the accumulator f32[]",
    ),
    (
        "hlo__translate__hlo_to_mhlo__tests__import.hlo",
        "select-and-scatter",
        "ShapeInference: Select function must have rank-0 PRED result (returns (pred[]))",
    ),
    (
        "hlo__translate__hlo_to_mhlo__tests__import.hlo",
        "sorted",
        "HloVerifier: Sort compare computation shape does not lead to a scalar predicate",
    ),
];

#[test]
fn every_corpus_module_verifies_clean() {
    let Some(shared) = shared_dir() else { return };
    let mut n = 0;
    let mut unexpected = Vec::new();
    let mut found_known = Vec::new();
    for sub in ["hlo_corpus/jax", "hlo_corpus/xla"] {
        for path in hlo_files(&shared.join(sub)) {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            let text = std::fs::read_to_string(&path).unwrap();
            for (k, (_, part)) in split_modules(&text).into_iter().enumerate() {
                let m = parse_module(&name, part).unwrap_or_else(|e| panic!("{name}#{k}: {e}"));
                n += 1;
                let Err(errs) = verify_module(&m) else { continue };
                for e in errs {
                    let known = KNOWN_INVALID
                        .iter()
                        .any(|(f, i, _)| *f == name && *i == e.instruction);
                    println!("{name}#{k}: {e}{}", if known { "  [known invalid]" } else { "" });
                    if known {
                        found_known.push(e.instruction.clone());
                    } else {
                        unexpected.push(format!("{name}#{k}: {e}"));
                    }
                }
            }
        }
    }
    println!("{n} modules verified");
    assert_eq!(n, 67, "expected the 24 JAX and 43 XLA corpus modules");
    assert!(unexpected.is_empty(), "unexpected verifier errors: {unexpected:#?}");
    for (_, i, why) in KNOWN_INVALID {
        assert!(found_known.iter().any(|f| f == i), "'{i}' ({why}) was not reported");
    }
}
