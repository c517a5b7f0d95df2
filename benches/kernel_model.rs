//! Speed of the kernel cost model: one kernel × one tile config (target
//! < 1 µs), the compiler-default tile search, and seeded sampling.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use tpusim::tpu::{
    default_tile, estimate, sample_tiles, Conv2dShape, KernelDesc, MxuPrecision, OpCounts,
    TileConfig, TpuTarget,
};

fn bench(c: &mut Criterion) {
    let t = TpuTarget::v3();
    let mm = KernelDesc::matmul("mm", 1, 4096, 4096, 4096, 16, 16, MxuPrecision::Bf16)
        .expect("valid matmul");
    let mm_cfg = TileConfig {
        output_bounds: vec![512, 512],
        kernel_bounds: vec![1024, 512],
        input_bounds: vec![],
    };
    let conv = KernelDesc::conv2d(
        "conv",
        Conv2dShape {
            n: 8,
            h: 56,
            w: 56,
            c_in: 64,
            c_out: 64,
            kh: 3,
            kw: 3,
            stride: 1,
            pad: 1,
        },
        16,
        16,
        MxuPrecision::Bf16,
    )
    .expect("valid conv");
    let conv_cfg = default_tile(&conv, &t);
    let ew = KernelDesc::elementwise(
        "ew",
        &[64, 56, 56, 256],
        16,
        2,
        OpCounts {
            cheap: 3.0,
            medium: 1.0,
            expensive: 0.0,
        },
    )
    .expect("valid elementwise");
    let ew_cfg = default_tile(&ew, &t);
    let red = KernelDesc::reduction("r", &[1000, 3000], &[1], 32, OpCounts::cheap(1.0))
        .expect("valid reduction");
    let red_cfg = default_tile(&red, &t);

    c.bench_function("estimate/matmul_4096_tile512", |b| {
        b.iter(|| estimate(black_box(&mm), black_box(&mm_cfg), black_box(&t)))
    });
    c.bench_function("estimate/conv3x3_default", |b| {
        b.iter(|| estimate(black_box(&conv), black_box(&conv_cfg), black_box(&t)))
    });
    c.bench_function("estimate/elementwise_default", |b| {
        b.iter(|| estimate(black_box(&ew), black_box(&ew_cfg), black_box(&t)))
    });
    c.bench_function("estimate/reduction_edge_tiles", |b| {
        b.iter(|| estimate(black_box(&red), black_box(&red_cfg), black_box(&t)))
    });
    c.bench_function("default_tile/matmul_4096", |b| {
        b.iter(|| default_tile(black_box(&mm), black_box(&t)))
    });
    c.bench_function("default_tile/conv3x3", |b| {
        b.iter(|| default_tile(black_box(&conv), black_box(&t)))
    });
    c.bench_function("sample_tiles/conv3x3_100", |b| {
        b.iter(|| sample_tiles(black_box(&conv), black_box(&t), 100, 42))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

/// The allocator of the `tpusim` binary, so that benches measure what it does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
