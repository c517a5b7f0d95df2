//! Every module of the shared JAX corpus lowers and estimates to a positive,
//! finite total on the default target (v3) and on v5e.

mod common;

use std::path::PathBuf;

use tpusim::hlo::parse_module;
use tpusim::kernels::{LoweredProgram, TileOverrides};
use tpusim::tpu::TpuTarget;

#[test]
fn jax_corpus_estimates_positive_finite() {
    let Some(shared) = common::shared("jax_corpus_estimates_positive_finite") else {
        return;
    };
    let dir = shared.join("hlo_corpus/jax");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        eprintln!("skipped: {} not readable", dir.display());
        return;
    };
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "hlo"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .hlo files in {}", dir.display());
    let targets = [TpuTarget::v3(), TpuTarget::v5e()];
    let none = TileOverrides::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable corpus file");
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let m = parse_module(&name, &text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let lp = LoweredProgram::new(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
        for t in &targets {
            let est = lp
                .estimate(t, &none)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                est.total_ns.is_finite() && est.total_ns > 0.0,
                "{name} on {}: total {}",
                t.name,
                est.total_ns
            );
            let untiled = est.kernels.iter().filter(|k| k.untiled).count();
            let mut by_kind = std::collections::BTreeMap::<String, (usize, f64)>::new();
            for k in &est.kernels {
                let e = by_kind.entry(k.kind.to_string()).or_default();
                e.0 += 1;
                e.1 += k.total_ns * k.multiplier;
            }
            println!(
                "{name:45} {:4} total {:>12.1} us, {:5} kernels ({} distinct), {} untiled, {:?}",
                t.name,
                est.total_ns / 1e3,
                est.kernels.len(),
                lp.distinct_kernels(),
                untiled,
                by_kind
                    .iter()
                    .map(|(k, (n, ns))| format!("{k}:{n}/{:.0}us", ns / 1e3))
                    .collect::<Vec<_>>()
            );
            for w in est.warnings.iter().take(3) {
                println!("    warning: {w}");
            }
            // the fast path agrees with the full estimate
            let fast = lp.total_ns(t, &none).unwrap();
            assert!((fast - est.total_ns).abs() <= 1e-9 * est.total_ns.max(1.0));
        }
    }
}

/// Diagnostic: `TPUSIM_HLO=FILE cargo test --test kernels_corpus -- --ignored --nocapture`
/// prints the 15 most expensive kernels of FILE with their lowering.
#[test]
#[ignore]
fn top_kernels_of_file() {
    let Some(path) = std::env::var_os("TPUSIM_HLO") else {
        eprintln!("skipped: set TPUSIM_HLO=FILE");
        return;
    };
    let text = std::fs::read_to_string(&path).expect("readable file");
    let m = parse_module("f", &text).expect("parses");
    let t = TpuTarget::v3();
    let lp = LoweredProgram::new(&m).expect("lowers");
    let est = lp.estimate(&t, &TileOverrides::new()).expect("estimates");
    let mut rows: Vec<_> = est.kernels.iter().enumerate().collect();
    rows.sort_by(|a, b| {
        (b.1.total_ns * b.1.multiplier).total_cmp(&(a.1.total_ns * a.1.multiplier))
    });
    println!("total {:.1} us", est.total_ns / 1e3);
    for (i, r) in rows.iter().take(15) {
        println!(
            "{:10.1} us x{} {} {} {} bytes {:.3e} flops {:.3e} tile {:?} bn {:?}",
            r.total_ns / 1e3,
            r.multiplier,
            r.name,
            r.kind,
            r.hero,
            r.bytes,
            r.flops,
            r.tile,
            r.bottleneck
        );
        for line in tpusim::kernels::describe(&lp.kernels[*i].lowered) {
            println!("{line}");
        }
    }
}

/// Diagnostic: `TPUSIM_HLO=FILE TPUSIM_KERNEL=NAME cargo test --test kernels_corpus explain -- --ignored --nocapture`.
#[test]
#[ignore]
fn explain_kernel_of_file() {
    let (Some(path), Some(k)) = (
        std::env::var_os("TPUSIM_HLO"),
        std::env::var("TPUSIM_KERNEL").ok(),
    ) else {
        eprintln!("skipped: set TPUSIM_HLO=FILE and TPUSIM_KERNEL=NAME");
        return;
    };
    let text = std::fs::read_to_string(&path).expect("readable file");
    let m = parse_module("f", &text).expect("parses");
    let s = tpusim::kernels::explain_kernel(&m, &TpuTarget::v3(), &k, None).expect("explains");
    println!("{s}");
}

/// The XLA test corpus (odd element types, variadic ops, custom calls …):
/// lowering and estimation never panic; every module that parses estimates
/// to a finite, non-negative total or returns an error that names the problem.
#[test]
fn xla_corpus_never_panics() {
    let Some(shared) = common::shared("xla_corpus_never_panics") else {
        return;
    };
    let dir = shared.join("hlo_corpus/xla");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        eprintln!("skipped: {} not readable", dir.display());
        return;
    };
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "hlo"))
        .collect();
    files.sort();
    let t = TpuTarget::v3();
    let (mut ok, mut failed) = (0usize, 0usize);
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable corpus file");
        for (_, part) in tpusim::hlo::split_modules(&text) {
            let Ok(m) = parse_module("x.hlo", part) else {
                continue;
            };
            match LoweredProgram::new(&m).and_then(|lp| lp.estimate(&t, &TileOverrides::new())) {
                Ok(e) => {
                    assert!(
                        e.total_ns.is_finite() && e.total_ns >= 0.0,
                        "{}",
                        f.display()
                    );
                    ok += 1;
                }
                Err(e) => {
                    println!("{}: {e}", f.display());
                    assert!(!e.to_string().is_empty());
                    failed += 1;
                }
            }
        }
    }
    println!("xla corpus: {ok} modules estimated, {failed} rejected with an error");
    assert!(ok > 0);
}
