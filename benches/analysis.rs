//! Cost analysis and verification speed on the ResNet-50 training step
//! (`resnet50_train_b8.hlo`, ~5k instructions, and its XLA-optimised form, ~15k).
//! Target: analysis under 2 ms.

use std::path::{Path, PathBuf};

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use tpusim::analysis::{analyze_module, module_cost, verify_module};
use tpusim::hlo::parse_module;

fn shared_dir() -> Option<PathBuf> {
    let p = match std::env::var_os("TPUSIM_SHARED") {
        Some(v) => PathBuf::from(v),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"),
    };
    p.join("hlo_corpus/jax").is_dir().then_some(p)
}

fn bench(c: &mut Criterion) {
    let Some(shared) = shared_dir() else {
        eprintln!("skipping the analysis bench: shared data not found (set TPUSIM_SHARED)");
        return;
    };
    for file in ["resnet50_train_b8.hlo", "resnet50_train_b8.optimized.hlo"] {
        let path = shared.join("hlo_corpus/jax").join(file);
        let Ok(text) = std::fs::read_to_string(&path) else {
            eprintln!("skipping {file}: not readable");
            continue;
        };
        let m = match parse_module(file, &text) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("skipping {file}: {e}");
                continue;
            }
        };
        eprintln!("{file}: {} instructions", m.instruction_count());
        c.bench_function(&format!("analyze_module/{file}"), |b| {
            b.iter(|| analyze_module(black_box(&m)))
        });
        c.bench_function(&format!("module_cost/{file}"), |b| {
            b.iter(|| module_cost(black_box(&m)))
        });
        c.bench_function(&format!("verify_module/{file}"), |b| {
            b.iter(|| verify_module(black_box(&m)))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

/// The allocator of the `tpusim` binary, so that benches measure what it does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
