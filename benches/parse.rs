//! Parse throughput (MB/s) over the modules in `hlo_samples/`.
//! Target: at least 70 MB/s on resnet50_train_b8.optimized.hlo (1.9 MB) on one core.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::path::Path;

fn bench_parse(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("hlo_samples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("hlo_samples/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "hlo"))
        .collect();
    files.sort();
    let mut g = c.benchmark_group("parse");
    for f in files {
        let text = std::fs::read_to_string(&f).expect("sample is UTF-8");
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        // MB/s in decimal units (10^6 bytes), as the target is stated.
        g.throughput(Throughput::BytesDecimal(text.len() as u64));
        if text.len() > 1_000_000 {
            g.sample_size(20);
        } else {
            g.sample_size(50);
        }
        g.bench_function(&name, |b| {
            b.iter(|| tpusim::hlo::parse_module(&name, &text).expect("sample parses"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench_parse);
criterion_main!(benches);

/// The allocator of the `tpusim` binary, so that benches measure what it does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
