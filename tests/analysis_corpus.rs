//! Cost analysis vs XLA's own `HloCostAnalysis` numbers (`xla_cost_analysis.json`)
//! for every JAX dump, before and after XLA's optimisation; and the verifier over
//! every corpus module.

mod common;

use std::path::{Path, PathBuf};

use tpusim::analysis::{analyze_module, verify_module};
use tpusim::hlo::{parse_module, split_modules};

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
    let Some(shared) = common::shared("cost_analysis_matches_xla_on_the_jax_corpus") else {
        return;
    };
    let dir = shared.join("hlo_corpus/jax");
    let json_text = std::fs::read_to_string(dir.join("xla_cost_analysis.json"))
        .expect("xla_cost_analysis.json is readable");
    let xla: serde_json::Value = serde_json::from_str(&json_text).expect("valid JSON");
    let files = hlo_files(&dir);
    assert!(
        files.len() >= 24,
        "expected the 24 JAX dumps, found {}",
        files.len()
    );
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

/// XLA's own totals for the XLA corpus modules (jaxlib `hlo_module_cost_analysis`,
/// CPU client, 2026): flops, transcendentals, bytes accessed.
const XLA_CORPUS_COSTS: &[(&str, f64, f64, f64)] = &[
    (
        "backends__gpu__codegen__emitters__tests__convert__f4e2m1fn_intrinsics.hlo",
        600.0,
        0.0,
        3000.0,
    ),
    (
        "backends__gpu__codegen__emitters__tests__reduce_row__mof_scalar_variadic.hlo",
        253.0,
        0.0,
        1328.0,
    ),
    (
        "backends__gpu__codegen__emitters__tests__scatter__scatter_s4_unique_indices.hlo",
        256.0,
        0.0,
        3460.0,
    ),
    (
        "backends__gpu__codegen__emitters__tests__transpose__side_outputs_inplace.hlo",
        2097152.0,
        0.0,
        41943040.0,
    ),
    (
        "codegen__emitters__tests__loop__complex.hlo",
        6.0,
        0.0,
        128.0,
    ),
    (
        "codegen__emitters__tests__loop__dot_fp8.hlo",
        1932.0,
        0.0,
        1031.0,
    ),
    (
        "codegen__emitters__tests__loop__large_loop_slow_compile_time.hlo",
        24648089600.0,
        308019200.0,
        302451916800.0,
    ),
    (
        "codegen__emitters__tests__loop__mof_reshapes.hlo",
        1933312.0,
        0.0,
        2031616.0,
    ),
    (
        "hlo__builder__tests__math_igamma_grad_a.hlo",
        -1.0,
        0.0,
        -1.0,
    ),
    (
        "hlo__builder__tests__prng_scramble_philox_key.hlo",
        -1.0,
        0.0,
        -1.0,
    ),
    (
        "hlo__translate__hlo_to_mhlo__tests__case_conditional.hlo",
        1.0,
        0.0,
        8.0,
    ),
    (
        "hlo__translate__hlo_to_mhlo__tests__custom_call.hlo",
        0.0,
        0.0,
        0.0,
    ),
    (
        "hlo__translate__hlo_to_mhlo__tests__fully_connected_reference_model.hlo",
        16500.0,
        0.0,
        203504.0,
    ),
    (
        "hlo__translate__hlo_to_mhlo__tests__fusion.hlo",
        7.0,
        0.0,
        80.0,
    ),
    (
        "hlo__translate__hlo_to_mhlo__tests__if_conditional.hlo",
        1.0,
        1.0,
        41.0,
    ),
    (
        "hlo__translate__hlo_to_mhlo__tests__import.hlo",
        0.0,
        0.0,
        0.0,
    ),
    (
        "hlo__translate__hlo_to_mhlo__tests__import_locs.hlo",
        -1.0,
        0.0,
        -1.0,
    ),
    (
        "hlo__translate__hlo_to_mhlo__tests__module_config.hlo",
        0.0,
        0.0,
        0.0,
    ),
    (
        "hlo__translate__hlo_to_mhlo__tests__types.hlo",
        -1.0,
        0.0,
        -1.0,
    ),
    (
        "service__gpu__tests__calling_convention.hlo",
        -1.0,
        0.0,
        -1.0,
    ),
    (
        "service__gpu__tests__offload_scan_output.hlo",
        1.0,
        0.0,
        144.0,
    ),
    ("service__gpu__tests__slice_to_dynamic.hlo", -1.0, 0.0, -1.0),
    (
        "service__gpu__tests__triton_naming.hlo",
        10013.0,
        0.0,
        833.0,
    ),
    ("service__xla_aot_compile_test.hlo", 3.0, 0.0, 72.0),
    (
        "tests__isolated_convolution.hlo",
        3525312512.0,
        0.0,
        13434880.0,
    ),
    (
        "tools__benchmarks__hlo__hlo_llama31_405b_bf16_16x8.hlo",
        366871845011456.0,
        5102174720.0,
        1454730772480.0,
    ),
    (
        "tools__benchmarks__hlo__hlo_llama31_70b_fp8_16x8.hlo",
        276702160748544.0,
        4153057792.0,
        1152625278976.0,
    ),
    (
        "tools__benchmarks__hlo__hlo_llama31_8b_bf16_1x8.hlo",
        772580998905856.0,
        18278289408.0,
        4369785028608.0,
    ),
    (
        "tools__benchmarks__hlo__hlo_mixtral_8x7b_bf16_2x8.hlo",
        471839939756032.0,
        10584797184.0,
        2082923085824.0,
    ),
    (
        "tools__benchmarks__hlo__nv_maxtext_1n1g_jit_train_step_before_optimization.hlo",
        31693037633536.0,
        3345275648.0,
        612823662592.0,
    ),
    (
        "tools__benchmarks__hlo__u4_all_gather_1x8.hlo",
        0.0,
        0.0,
        2359296.0,
    ),
    ("tools__data__add.hlo", 4.0, 0.0, 48.0),
    (
        "tools__data__benchmarking__mobilenet_v2.hlo",
        176043802624.0,
        17056.0,
        73412272128.0,
    ),
    ("tools__data__large_constant.hlo", 24.0, 0.0, 288.0),
    ("tools__data__must_alias.hlo", 10.0, 0.0, 120.0),
    ("tools__data__must_alias_with_sharding.hlo", 9.0, 0.0, 119.0),
    (
        "tools__hlo_opt__tests__gpu_hlo_collective_cse.hlo",
        64.0,
        0.0,
        1200.0,
    ),
    (
        "tools__multihost_hlo_runner__data__auto_layout.hlo",
        2147483648.0,
        0.0,
        38273024.0,
    ),
    (
        "tools__multihost_hlo_runner__data__dynamic_shaped_arguments.hlo",
        0.0,
        0.0,
        33554440.0,
    ),
    (
        "tools__multihost_hlo_runner__data__multiple_gemm_fusions.hlo",
        102236160.0,
        0.0,
        9961472.0,
    ),
    (
        "tools__multihost_hlo_runner__data__sharded_computation.hlo",
        78504984576.0,
        100663296.0,
        17802461184.0,
    ),
    (
        "tools__multihost_hlo_runner__data__single_device.hlo",
        4.0,
        0.0,
        48.0,
    ),
    (
        "tools__multihost_hlo_runner__data__while_with_known_trip_count.hlo",
        2.0,
        0.0,
        37.0,
    ),
];

#[test]
fn cost_analysis_matches_xla_on_the_xla_corpus() {
    let Some(shared) = common::shared("cost_analysis_matches_xla_on_the_xla_corpus") else {
        return;
    };
    let dir = shared.join("hlo_corpus/xla");
    let mut failures = Vec::new();
    for &(file, xf, xt, xb) in XLA_CORPUS_COSTS {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let parts = split_modules(&text);
        assert_eq!(parts.len(), 1, "{file}");
        let m = parse_module(file, parts[0].1).unwrap_or_else(|e| panic!("{file}: {e}"));
        let r = analyze_module(&m);
        let (ef, et, eb) = (
            rel(r.flops, xf),
            rel(r.transcendentals, xt),
            rel(r.bytes_accessed, xb),
        );
        let ok = ef <= 1e-3 && et <= 1e-3 && eb <= 1e-2;
        println!(
            "{file:<80} flops {:+.1e} transc {:+.1e} bytes {:+.1e} {}",
            ef,
            et,
            eb,
            if ok { "ok" } else { "MISMATCH" }
        );
        if !ok {
            failures.push(format!(
                "{file}: ours ({}, {}, {}) vs XLA ({xf}, {xt}, {xb})",
                r.flops, r.transcendentals, r.bytes_accessed
            ));
        }
    }
    assert_eq!(
        hlo_files(&dir).len(),
        XLA_CORPUS_COSTS.len(),
        "every XLA corpus file has a figure"
    );
    assert!(failures.is_empty(), "{failures:#?}");
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
    let Some(shared) = common::shared("every_corpus_module_verifies_clean") else {
        return;
    };
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
                let Err(errs) = verify_module(&m) else {
                    continue;
                };
                for e in errs {
                    let known = KNOWN_INVALID
                        .iter()
                        .any(|(f, i, _)| *f == name && *i == e.instruction);
                    println!(
                        "{name}#{k}: {e}{}",
                        if known { "  [known invalid]" } else { "" }
                    );
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
    assert!(
        unexpected.is_empty(),
        "unexpected verifier errors: {unexpected:#?}"
    );
    for (_, i, why) in KNOWN_INVALID {
        assert!(
            found_known.iter().any(|f| f == i),
            "'{i}' ({why}) was not reported"
        );
    }
}
