//! Speed of the program model on a whole ResNet-50 training step
//! (`hlo_samples/resnet50_train_b8.optimized.hlo`, ~15k instructions, already
//! fused). Target: one estimate under one configuration < 1 ms after
//! compilation (lowering is done once, outside the timed loop).

use std::path::Path;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use tpusim::hlo::parse_module;
use tpusim::kernels::{LoweredProgram, TileOverrides};
use tpusim::tpu::TpuTarget;

fn bench(c: &mut Criterion) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("hlo_samples/resnet50_train_b8.optimized.hlo");
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("skipped: {} not found", path.display());
        return;
    };
    let module = parse_module("resnet50_train_b8.optimized.hlo", &text).expect("sample parses");
    let target = TpuTarget::v3();
    let none = TileOverrides::new();
    let lp = LoweredProgram::new(&module).expect("sample lowers");
    eprintln!(
        "resnet50_train_b8: {} instructions, {} kernels, {} distinct",
        module.instruction_count(),
        lp.kernels.len(),
        lp.distinct_kernels()
    );
    let mut g = c.benchmark_group("program");
    g.bench_function("resnet50_train_total_ns", |b| {
        b.iter(|| black_box(lp.total_ns(black_box(&target), &none).expect("estimates")))
    });
    g.bench_function("resnet50_train_estimate_rows", |b| {
        b.iter(|| black_box(lp.estimate(black_box(&target), &none).expect("estimates")))
    });
    // prepared once per target: only overridden kernels are re-evaluated
    let prep = lp.prepare(&target).expect("prepares");
    g.bench_function("resnet50_train_prepared_total_ns", |b| {
        b.iter(|| black_box(prep.total_ns(black_box(&none)).expect("estimates")))
    });
    // one override: the class cache still serves every other kernel
    let mut one = TileOverrides::new();
    let first_mxu = lp
        .kernels
        .iter()
        .find(|k| matches!(k.lowered.desc().kind, tpusim::tpu::KernelKind::Mxu(_)))
        .map(|k| k.lowered.desc().name.clone());
    if let Some(name) = first_mxu {
        one.insert(name, Default::default());
    }
    g.bench_function("resnet50_train_total_ns_one_override", |b| {
        b.iter(|| black_box(lp.total_ns(black_box(&target), &one).expect("estimates")))
    });
    g.bench_function("resnet50_train_prepared_one_override", |b| {
        b.iter(|| black_box(prep.total_ns(black_box(&one)).expect("estimates")))
    });
    g.sample_size(10);
    g.bench_function("resnet50_train_lower", |b| {
        b.iter(|| black_box(LoweredProgram::new(black_box(&module)).expect("lowers")))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

/// The allocator of the `tpusim` binary, so that benches measure what it does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
