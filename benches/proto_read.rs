//! Reading binary inputs: HloModuleProto bytes -> prost messages, -> the
//! zero-copy view, -> IR; and TpuGraphs tuning files.
//!
//! The biggest corpus proto is 451 KB, so a ~1 MB module is made by copying
//! the computations of `resnet50_train_b8.hlo.pb` under fresh names and ids
//! (unused callees; the entry stays the original one).

use std::path::{Path, PathBuf};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use prost::Message;
use tpusim::proto::xla::HloModuleProto;
use tpusim::proto::{read_hlo_module_proto, read_module_tuning, write_module_tuning};
use tpusim::proto::{LayoutConfig, ModuleTuning, NodeLayout, Profile, Run, RunConfig};

fn shared() -> PathBuf {
    match std::env::var_os("TPUSIM_SHARED") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"),
    }
}

/// `module` grown to at least `target` bytes by appending renamed copies of
/// its non-entry computations (ids moved to a fresh range).
fn scaled(module: &HloModuleProto, target: usize) -> HloModuleProto {
    let mut out = module.clone();
    let entry = module.entry_computation_id;
    let mut copy = 1i64;
    while out.encoded_len() < target {
        let shift = copy << 40;
        for c in module.computations.iter().filter(|c| c.id != entry) {
            let mut c = c.clone();
            c.name = format!("{}.copy{copy}", c.name);
            c.id += shift;
            c.root_id += shift;
            for i in &mut c.instructions {
                i.name = format!("{}.copy{copy}", i.name);
                i.id += shift;
                i.operand_ids.iter_mut().for_each(|o| *o += shift);
                i.control_predecessor_ids
                    .iter_mut()
                    .for_each(|o| *o += shift);
                i.called_computation_ids
                    .iter_mut()
                    .for_each(|o| *o += shift);
            }
            // callees first: insert before the entry
            let at = out.computations.len() - 1;
            out.computations.insert(at, c);
        }
        copy += 1;
    }
    out
}

fn bench(c: &mut Criterion) {
    let path = shared().join("hlo_corpus/jax/resnet50_train_b8.hlo.pb");
    let Ok(bytes) = std::fs::read(&path) else {
        eprintln!("skipping proto_read bench: {} not found", path.display());
        return;
    };
    let module = read_hlo_module_proto(&bytes).expect("corpus module decodes");
    let big = scaled(&module, 1 << 20).encode_to_vec();

    let mut g = c.benchmark_group("hlo_module_proto");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("decode_resnet50_train_451KB", |b| {
        b.iter(|| read_hlo_module_proto(std::hint::black_box(&bytes)).unwrap())
    });
    g.throughput(Throughput::Bytes(big.len() as u64));
    g.bench_function(format!("decode_scaled_{}KB", big.len() / 1024), |b| {
        b.iter(|| read_hlo_module_proto(std::hint::black_box(&big)).unwrap())
    });
    g.bench_function(format!("view_scaled_{}KB", big.len() / 1024), |b| {
        b.iter(|| tpusim::proto::ModuleView::decode(std::hint::black_box(&big)).unwrap())
    });
    // The target: bytes -> IR for a ~1 MB module (< 10 ms).
    // (the IR is dropped outside the timed region)
    g.bench_function(format!("to_ir_scaled_{}KB", big.len() / 1024), |b| {
        b.iter_with_large_drop(|| {
            tpusim::proto::module_from_proto_bytes(std::hint::black_box(&big)).unwrap()
        })
    });
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("to_ir_resnet50_train_451KB", |b| {
        b.iter_with_large_drop(|| {
            tpusim::proto::module_from_proto_bytes(std::hint::black_box(&bytes)).unwrap()
        })
    });
    g.finish();

    // A layout tuning file: the module plus 1000 runs over 64 nodes.
    let runs = (0..1000)
        .map(|r| Run {
            config: RunConfig::Layout(LayoutConfig {
                nodes: (0..64)
                    .map(|k| NodeLayout::new(vec![3, 2, 1, 0], vec![(r + k) % 4], vec![]))
                    .collect(),
            }),
            error: r % 10 == 0,
            is_default: r == 0,
            profile: Some(Profile::from_time_ns(1000 + r)),
        })
        .collect();
    let tuning = write_module_tuning(&ModuleTuning {
        module: Some(module),
        fingerprint: 1,
        runs,
        config_index_to_node: (0..64).collect(),
    })
    .unwrap();
    let mut g = c.benchmark_group("tuning");
    g.throughput(Throughput::Bytes(tuning.len() as u64));
    g.bench_function(
        format!("read_layout_{}KB_1000_runs", tuning.len() / 1024),
        |b| b.iter(|| read_module_tuning(std::hint::black_box(&tuning)).unwrap()),
    );
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

/// The allocator of the `tpusim` binary, so that benches measure what it does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
