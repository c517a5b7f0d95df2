//! Speed of `tpusim sweep` on the shipped ResNet-18 inference sample: a tile sweep of
//! one 3×3 convolution (every candidate size of every dim, ~25 estimates) and a layout
//! sweep of one convolution input (24 layouts + the compiler's choice, each a whole
//! recompilation, lowering and estimate, spread over the threads).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::path::Path;
use tpusim::kernels::find_kernel;
use tpusim::passes::{compile, CompilationConfig};
use tpusim::sweep::{layout_sweep, tile_sweep, Tensor};
use tpusim::tpu::TpuTarget;

fn bench(c: &mut Criterion) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("hlo_samples/resnet18_infer_b8.hlo");
    let text = std::fs::read_to_string(&path).expect("the shipped sample");
    let m = tpusim::hlo::parse_module(&path.display().to_string(), &text).unwrap();
    let t = TpuTarget::v3();
    let compiled = compile(&m, &CompilationConfig::default()).unwrap();
    let (_, _, k) = find_kernel(&compiled.module, "fusion.667").unwrap();
    let mut g = c.benchmark_group("sweep");
    g.sample_size(20);
    g.bench_function("tile/resnet18_conv3x3", |b| {
        b.iter(|| black_box(tile_sweep(k.desc(), &t, &[]).unwrap().rows.len()))
    });
    let base = CompilationConfig::default();
    g.bench_function("layout/resnet18_conv_input_25", |b| {
        b.iter(|| {
            black_box(
                layout_sweep(
                    &m,
                    &base,
                    "conv_general_dilated.22",
                    Tensor::Input,
                    &t,
                    &|_| {},
                )
                .unwrap()
                .rows
                .len(),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

/// The allocator of the `tpusim` binary, so that benches measure what it does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
