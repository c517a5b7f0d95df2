//! Compile ResNet-50 training (5K instructions) under random layout configurations.
//! Target (issue 5): < 5 ms per compilation, for generators that recompile every
//! configuration: `prepared/bodies` (4.46 ms at load ≈ 1, `docs/passes.md` *Speed*).
//!
//! * `compile`: one-shot `passes::compile` (inlining + layout + fusion + building the
//!   ~18.5K-instruction output module);
//! * `prepared/module`: `PreparedModule::compile` (inlining done once);
//! * `prepared/bodies`: `PreparedModule::compile_bodies` (the kernels and their
//!   instructions, no output module: the compilation every cost is taken from, see
//!   `kernels::compile_program`).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::path::{Path, PathBuf};
use tpusim::passes::{compile, CompilationConfig, PreparedModule};

fn shared() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if p.join("hlo_corpus").is_dir() {
        return Some(p);
    }
    std::env::var_os("TPUSIM_SHARED")
        .map(PathBuf::from)
        .filter(|p| p.join("hlo_corpus").is_dir())
}

fn bench(c: &mut Criterion) {
    let Some(dir) = shared() else {
        eprintln!("skipping compile bench: ../shared (or $TPUSIM_SHARED) not found");
        return;
    };
    let mut g = c.benchmark_group("compile");
    g.sample_size(30);
    for name in [
        "resnet50_train_b8",
        "bert_small_train_b8s128",
        "resnet50_infer_b4",
    ] {
        let path = dir.join("hlo_corpus/jax").join(format!("{name}.hlo"));
        let Ok(text) = std::fs::read_to_string(&path) else {
            eprintln!("skipping {name}: cannot read {}", path.display());
            continue;
        };
        let module = match tpusim::hlo::parse_module(&path.display().to_string(), &text) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("skipping {name}: {e}");
                continue;
            }
        };
        let configs: Vec<CompilationConfig> = (0..16)
            .map(|s| CompilationConfig::random_layouts(&module, s))
            .collect();
        let Ok(prepared) = PreparedModule::new(&module) else {
            eprintln!("skipping {name}: cannot prepare");
            continue;
        };
        let mut i = 0usize;
        g.bench_function(format!("{name}/random_layout/compile"), |b| {
            b.iter(|| {
                i = (i + 1) % configs.len();
                black_box(
                    compile(&module, &configs[i])
                        .map(|c| c.kernels.len())
                        .unwrap_or(0),
                )
            })
        });
        g.bench_function(format!("{name}/random_layout/prepared/module"), |b| {
            b.iter(|| {
                i = (i + 1) % configs.len();
                black_box(
                    prepared
                        .compile(&configs[i])
                        .map(|c| c.kernels.len())
                        .unwrap_or(0),
                )
            })
        });
        g.bench_function(format!("{name}/random_layout/prepared/bodies"), |b| {
            b.iter(|| {
                i = (i + 1) % configs.len();
                black_box(
                    prepared
                        .compile_bodies(&configs[i])
                        .map(|c| c.bodies.len())
                        .unwrap_or(0),
                )
            })
        });
        if name == "resnet50_train_b8" {
            let default = CompilationConfig::default();
            g.bench_function(format!("{name}/default/prepared/bodies"), |b| {
                b.iter(|| {
                    black_box(
                        prepared
                            .compile_bodies(&default)
                            .map(|c| c.bodies.len())
                            .unwrap_or(0),
                    )
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

/// The allocator of the `tpusim` binary, so that benches measure what it does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
