//! TpuGraphs graph encoding throughput on the ResNet-50 training step
//! (`resnet50_train_b8.optimized.hlo`, ~15k instructions).

use std::path::{Path, PathBuf};

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use tpusim::dataset::config_feat::{tile_config_features, TileSizeConfig};
use tpusim::dataset::graph::{encode_graph, encode_graph_with, EncodeOptions, NodeOrder};

fn shared_dir() -> Option<PathBuf> {
    [
        std::env::var_os("TPUSIM_SHARED").map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared")),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.join("hlo_corpus/jax").is_dir())
}

fn bench(c: &mut Criterion) {
    let Some(shared) = shared_dir() else {
        eprintln!("skipped: no shared dir (set TPUSIM_SHARED or provide ../shared)");
        return;
    };
    let path = shared.join("hlo_corpus/jax/resnet50_train_b8.optimized.hlo");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("skipped: {}: {e}", path.display());
            return;
        }
    };
    let m = match tpusim::hlo::parse_module("resnet50_train_b8.optimized.hlo", &text) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("skipped: parse error: {e}");
            return;
        }
    };
    let n = m.instruction_count() as u64;
    let mut g = c.benchmark_group("encode_graph");
    g.throughput(Throughput::Elements(n));
    g.bench_function("resnet50_train_b8/xla_post_order", |b| {
        b.iter(|| encode_graph(black_box(&m)))
    });
    g.bench_function("resnet50_train_b8/program_order", |b| {
        let opts = EncodeOptions {
            order: NodeOrder::Program,
            ..Default::default()
        };
        b.iter(|| encode_graph_with(black_box(&m), &opts))
    });
    g.finish();

    let cfg = TileSizeConfig {
        kernel_bounds: vec![3, 1, 24, 3],
        output_bounds: vec![12, 4, 4, 3],
        input_bounds: vec![],
    };
    let mut g = c.benchmark_group("config_feat");
    g.throughput(Throughput::Elements(1));
    g.bench_function("tile_config_features", |b| {
        b.iter(|| tile_config_features(black_box(&cfg)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

/// The allocator of the `tpusim` binary, so that benches measure what it does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
