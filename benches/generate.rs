//! Dataset-generation throughput on the ResNet-50 training step (hlo_samples/).
//!
//! * `tile_configs`: the per-configuration work of the tile collection (cost-model
//!   estimate, 24 config features, seeded noise) over every distinct kernel of the
//!   default compilation; throughput is configurations per second on one core.
//! * `layout_recompile_{Random,Default}`: the label of one layout configuration of
//!   that search: compiled, lowered and estimated (`recompiled_ns` on a prepared
//!   module), on one core.
//! * `layout_remembered_{Random,Default}`: the same label through a kernel memo
//!   (`remembered_ns`, what `generate layout --search default` runs): the kernels
//!   earlier configurations share with it are not lowered or evaluated again.
//! * `layout_timed_{Random,Default}`: the same label with the times of the small
//!   kernel bodies earlier configurations share with it kept (`timed_ns` through a
//!   `KernelTimes`, what `generate layout --search random` runs).
//! * `layout_stage_{compile,lower,estimate}_Random`: the three stages of
//!   `layout_recompile_Random` on their own, over 50 random configurations:
//!   `PreparedModule::compile_bodies`, `LoweredProgram::lower` of a compilation, and the
//!   cold `LoweredProgram::total_ns` of a lowered program (every kernel class evaluated).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::path::Path;

use tpusim::dataset::config_feat::{tile_config_features, TileSizeConfig};
use tpusim::dataset::generate::{sample_layouts, Search};
use tpusim::dataset::layout_eval::{recompiled_ns, remembered_ns, timed_ns, LayoutEvaluator};
use tpusim::dataset::plan::Noise;
use tpusim::kernels::{lower_kernel_full, KernelMemo, KernelTimes, LoweredProgram, TileOverrides};
use tpusim::passes::{compile, CompilationConfig, PreparedModule};
use tpusim::tpu::{default_tile, estimate, sample_tiles, TpuTarget};

fn module() -> tpusim::ir::Module {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("hlo_samples/resnet50_train_b8.hlo");
    let text = std::fs::read_to_string(p).expect("sample");
    tpusim::hlo::parse_module("resnet50_train_b8", &text).expect("parses")
}

fn bench(c: &mut Criterion) {
    let m = module();
    let target = TpuTarget::v3();
    let compiled = compile(&m, &CompilationConfig::default()).expect("compiles");
    let mut work = Vec::new();
    for k in &compiled.kernels {
        let id = petgraph::stable_graph::NodeIndex::new(k.instruction as usize);
        if let Ok(Some(lk)) = lower_kernel_full(&compiled.module, k.computation, id) {
            let mut cfgs = vec![default_tile(lk.desc(), &target)];
            cfgs.extend(sample_tiles(lk.desc(), &target, 20, 1));
            work.push((lk.into_desc(), cfgs));
        }
    }
    let n: usize = work.iter().map(|(_, c)| c.len()).sum();
    let noise = Noise { sigma: 0.02 };
    let mut g = c.benchmark_group("generate");
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(20);
    g.bench_function("tile_configs", |b| {
        b.iter(|| {
            let mut acc = 0i64;
            for (desc, cfgs) in &work {
                for (j, t) in cfgs.iter().enumerate() {
                    if let Ok(e) = estimate(desc, t, &target) {
                        let f = tile_config_features(&TileSizeConfig {
                            kernel_bounds: t.kernel_bounds.clone(),
                            output_bounds: t.output_bounds.clone(),
                            input_bounds: t.input_bounds.clone(),
                        });
                        acc += noise.apply(e.total_ns, 9, j as u64).unwrap_or(0) + f[8] as i64;
                    }
                }
            }
            acc
        })
    });
    let prepared = PreparedModule::new(&m).expect("prepares");
    for search in [Search::Random, Search::Default] {
        let ev = LayoutEvaluator::new(&m, &target);
        // as many configurations as a run of a few seconds labels, each used once per
        // pass, so the memo sees what a `generate` run's first configurations show it
        let configs: Vec<CompilationConfig> = sample_layouts(&ev, search, 2000, 5)
            .iter()
            .map(|c| ev.compilation_config(c))
            .collect();
        g.throughput(Throughput::Elements(1));
        let mut i = 0;
        g.bench_function(format!("layout_recompile_{search:?}"), |b| {
            b.iter(|| {
                i = (i + 1) % configs.len();
                recompiled_ns(&prepared, &configs[i], &target).expect("estimates")
            })
        });
        let memo = KernelMemo::new(&m, &target);
        let mut i = 0;
        g.bench_function(format!("layout_remembered_{search:?}"), |b| {
            b.iter(|| {
                i = (i + 1) % configs.len();
                remembered_ns(&prepared, &configs[i], &memo).expect("estimates")
            })
        });
        let times = KernelTimes::new(&m, &target);
        let mut i = 0;
        g.bench_function(format!("layout_timed_{search:?}"), |b| {
            b.iter(|| {
                i = (i + 1) % configs.len();
                timed_ns(&prepared, &configs[i], &times).expect("estimates")
            })
        });
        if search == Search::Random {
            stages(&mut g, &m, &prepared, &configs[..50], &target);
        }
    }
    g.finish();
}

/// The stages of one layout label, each on its own.
fn stages(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    m: &tpusim::ir::Module,
    prepared: &PreparedModule,
    configs: &[CompilationConfig],
    target: &TpuTarget,
) {
    let mut i = 0;
    g.bench_function("layout_stage_compile_Random", |b| {
        b.iter(|| {
            i = (i + 1) % configs.len();
            prepared
                .compile_bodies(&configs[i])
                .expect("compiles")
                .bodies
                .len()
        })
    });
    let compiled: Vec<_> = configs
        .iter()
        .map(|c| prepared.compile_bodies(c).expect("compiles"))
        .collect();
    let mut i = 0;
    g.bench_function("layout_stage_lower_Random", |b| {
        b.iter(|| {
            i = (i + 1) % compiled.len();
            LoweredProgram::lower(m, &compiled[i], None)
                .expect("lowers")
                .kernels
                .len()
        })
    });
    let programs: Vec<LoweredProgram> = compiled
        .iter()
        .map(|c| LoweredProgram::lower(m, c, None).expect("lowers"))
        .collect();
    drop(compiled);
    let none = TileOverrides::new();
    let mut i = 0;
    g.bench_function("layout_stage_estimate_Random", |b| {
        b.iter(|| {
            i = (i + 1) % programs.len();
            programs[i].total_ns(target, &none).expect("estimates")
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

/// The allocator of the `tpusim` binary, so that benches measure what it does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
