//! `tpusim generate`: HLO modules → TpuGraphs samples.
//!
//! * **tile**: every kernel of the default compilation becomes one file
//!   `npz/tile/xla/{split}/<module>_<fingerprint>.npz` holding the kernel's graph, sampled
//!   tile configurations (24 features each), their modelled runtimes and the default
//!   tile's runtime as normaliser.
//! * **layout**: every module becomes one file
//!   `npz/layout/{source}/{search}/{split}/<module>.npz` holding the whole program graph,
//!   its configurable nodes, sampled layout configurations (nc × 18 features each, −1 =
//!   compiler's choice) and the program runtime of each: the program compiled, lowered
//!   and estimated under that configuration ([`LayoutEvaluator::runtime_ns`]), which is
//!   what `tpusim estimate --config` prints for it. Tile labels are the kernel's estimate
//!   under each tile, which is what `estimate --config` prints for the kernel's module.
//!
//! Work is split across machines with `--shard i/n` (module `k` of the sorted input list
//! goes to shard `k mod n`) and across threads with rayon; every item draws its random
//! numbers from a seed derived from the run seed and the item's name, so the output is
//! byte-identical whatever the thread count. A module whose files are complete and were
//! made with the same options (its manifest, [`super::manifest`]) is skipped; one made
//! otherwise is made again; an interrupted run resumes module by module. Every npz file
//! passes the TpuGraphs schema check before it is renamed into place.

use rayon::prelude::*;
use serde::Serialize;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::config_feat::{
    layout_config_features, tile_config_features, LayoutConfig, TileSizeConfig,
};
use super::graph::{encode_graph_with, EncodeOptions};
use super::kernel_module::{fingerprint, kernel_module};
use super::layout_eval::{LayoutEvaluator, NodeChoice};
use super::manifest::{ModuleManifest, Recipe, RunRecipe, Status};
use super::outdir::{claim, create_dir};
use super::plan::{item_seed, Noise, Shard, SplitRatios};
use super::write::{write_layout_npz, write_tile_npz, TILE_CONFIG_FEATURES};
use crate::ir::{Dims, Module};
use crate::kernels::lower_kernel_full;
use crate::passes::{compile, CompilationConfig, PreparedModule};
use crate::progress::{Progress, ProgressMode};
use crate::rng::SplitMix64;
use crate::tpu::{default_tile, estimate, sample_tiles, TileConfig, TpuTarget};

/// Layout search mode, as in TpuGraphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
pub enum Search {
    /// Random layouts for every configurable node.
    Random,
    /// Perturbations of a few nodes around the compiler's default.
    Default,
}

impl Search {
    pub fn dir(self) -> &'static str {
        match self {
            Search::Random => "random",
            Search::Default => "default",
        }
    }
}

/// Options shared by both collections.
#[derive(Debug, Clone)]
pub struct GenOptions {
    pub out: PathBuf,
    pub configs: usize,
    pub seed: u64,
    pub target: TpuTarget,
    pub split: SplitRatios,
    pub noise: f64,
    pub shard: Shard,
    pub pad_minus_one: bool,
    /// How progress is shown on stderr.
    pub progress: ProgressMode,
    /// Layout collection: `xla` or `nlp`.
    pub source: String,
    pub search: Search,
    /// Also write the raw TpuGraphs `ModuleTuningData` file of every npz file, under
    /// `pb/` mirroring `npz/`.
    pub write_pb: bool,
}

fn profile(ns: i64) -> Option<crate::proto::Profile> {
    Some(crate::proto::Profile {
        compute_time_ns: ns,
        ..Default::default()
    })
}

/// `OUT/npz/...` → `OUT/pb/...` with the `.pb` extension.
fn pb_path(out: &Path, npz: &Path) -> PathBuf {
    let rel = npz.strip_prefix(out.join("npz")).unwrap_or(npz);
    out.join("pb").join(rel).with_extension("pb")
}

fn write_pb(path: &Path, mt: crate::proto::ModuleTuning) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        create_dir(dir)?;
    }
    crate::proto::write_tuning_file(path, &crate::proto::Tuning::Module(mt))?;
    Ok(())
}

/// Per-file statistics.
#[derive(Debug, Clone, Serialize)]
pub struct FileStats {
    pub file: String,
    /// Tile collection: the kernel of the default compilation the file holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    pub configs: usize,
    pub nodes: usize,
    /// Slowest / fastest runtime.
    pub max_min_ratio: f64,
    /// Whether the default configuration (row 0) is the fastest.
    pub default_is_best: bool,
}

/// What a run did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GenReport {
    pub modules: usize,
    pub files_written: usize,
    pub files_skipped: usize,
    pub configs: u64,
    pub seconds: f64,
    pub configs_per_second: f64,
    pub notes: Vec<String>,
    pub files: Vec<FileStats>,
}

/// A module to process.
pub struct Input {
    pub name: String,
    pub module: Module,
}

fn tile_size_config(t: &TileConfig) -> TileSizeConfig {
    TileSizeConfig {
        kernel_bounds: t.kernel_bounds.clone(),
        output_bounds: t.output_bounds.clone(),
        input_bounds: t.input_bounds.clone(),
    }
}

fn stats(file: &Path, runtimes: &[i64], nodes: usize) -> FileStats {
    let min = runtimes.iter().copied().min().unwrap_or(1).max(1);
    let max = runtimes.iter().copied().max().unwrap_or(1);
    FileStats {
        file: file.display().to_string(),
        kernel: None,
        configs: runtimes.len(),
        nodes,
        max_min_ratio: max as f64 / min as f64,
        default_is_best: runtimes.first().is_some_and(|&d| d == min),
    }
}

/// A tile file made: its statistics and the paths written (npz, and `.pb` with `--pb`).
type TileFile = (FileStats, Vec<PathBuf>);

/// Whether a module must be made: `false` (counted as skipped) when its manifest says
/// its files are complete and current; otherwise the files of an outdated run are
/// removed first and a note says what changed.
fn begin_module(
    manifest: &mut ModuleManifest,
    name: &str,
    report: &mut GenReport,
) -> anyhow::Result<bool> {
    match manifest.status() {
        Status::Complete(files) => {
            report.files_skipped += files;
            Ok(false)
        }
        Status::New => Ok(true),
        Status::Changed(why) => {
            report.notes.push(format!(
                "{name}: made again, the existing files were made otherwise ({})",
                why.join(", ")
            ));
            manifest.remove_old()?;
            Ok(true)
        }
    }
}

/// Takes `collection` of the output tree for this run (refused while a run with other
/// options writes it; see [`super::outdir`]); temporary files of dead runs in its folders
/// (`npz/NPZ_DIR`, `pb/NPZ_DIR`, `manifest/COLLECTION`) go, with a note.
fn claim_collection(
    o: &GenOptions,
    collection: &str,
    npz_dir: &str,
    report: &mut GenReport,
) -> anyhow::Result<super::outdir::Claim> {
    let dirs = [
        o.out.join("npz").join(npz_dir),
        o.out.join("pb").join(npz_dir),
        o.out.join("manifest").join(collection),
    ];
    let c = claim(
        &o.out,
        collection,
        &RunRecipe::new(collection, o).to_value(),
        &dirs,
    )?;
    if !c.removed.is_empty() {
        report.notes.push(format!(
            "removed {} temporary file(s) left by interrupted runs",
            c.removed.len()
        ));
    }
    Ok(c)
}

/// The tile collection.
pub fn generate_tile(inputs: &[Input], o: &GenOptions) -> anyhow::Result<GenReport> {
    let start = Instant::now();
    let mut report = GenReport::default();
    let configs_done = AtomicU64::new(0);
    let _claim = claim_collection(o, "tile", "tile/xla", &mut report)?;
    let pb = Progress::new(o.progress, 0, "tile kernels");
    let noise = Noise { sigma: o.noise };
    let enc = EncodeOptions {
        pad_minus_one: o.pad_minus_one,
        ..Default::default()
    };
    for (mi, input) in inputs.iter().enumerate() {
        if !o.shard.takes(mi) {
            continue;
        }
        report.modules += 1;
        let mut manifest =
            ModuleManifest::new(&o.out, Recipe::new("tile", &input.name, &input.module, o));
        if !begin_module(&mut manifest, &input.name, &mut report)? {
            continue;
        }
        let split = o.split.assign(&input.name);
        let dir = o.out.join("npz/tile/xla").join(split.dir());
        create_dir(&dir)?;
        let compiled = compile(&input.module, &CompilationConfig::default())
            .map_err(|e| anyhow::anyhow!("{}: {e}", input.name))?;
        let cm = &compiled.module;
        // Distinct kernels by fingerprint, in execution order.
        let mut seen = HashSet::new();
        let mut work = Vec::new();
        for k in &compiled.kernels {
            let id = petgraph::stable_graph::NodeIndex::new(k.instruction as usize);
            let km = kernel_module(cm, k.computation, id);
            let fp = fingerprint(&km);
            if seen.insert(fp) {
                work.push((k, id, km, fp));
            }
        }
        pb.inc_length(work.len() as u64);
        let results: Vec<anyhow::Result<Option<TileFile>>> = work
            .par_iter()
            .map(|(k, id, km, fp)| {
                let stem = format!("{}_{fp:016x}", input.name);
                let path = dir.join(format!("{stem}.npz"));
                pb.inc(1);
                let Some(lk) = lower_kernel_full(cm, k.computation, *id)
                    .map_err(|e| anyhow::anyhow!("{}: kernel {}: {e}", input.name, k.name))?
                else {
                    return Ok(None);
                };
                let desc = &lk.desc;
                let seed = item_seed(o.seed, &stem);
                let def = default_tile(desc, &o.target);
                let Ok(def_est) = estimate(desc, &def, &o.target) else {
                    return Ok(None);
                };
                let mut cfgs = vec![def.clone()];
                // A standalone reshape is a relayout copy that the real tile search does
                // not tune (its runs in real data all carry the empty configuration): it
                // has the one default configuration, which the loaders drop below.
                let tunable =
                    !(lk.hero == crate::ir::Opcode::Reshape && k.fused_computation.is_none());
                let samples = if tunable {
                    o.configs.saturating_sub(1) + 1
                } else {
                    0
                };
                for t in sample_tiles(desc, &o.target, samples, seed) {
                    if cfgs.len() >= o.configs {
                        break;
                    }
                    if t != def {
                        cfgs.push(t);
                    }
                }
                let mut feat = Vec::with_capacity(cfgs.len() * TILE_CONFIG_FEATURES);
                let mut runtime = Vec::with_capacity(cfgs.len());
                let mut norm = Vec::with_capacity(cfgs.len());
                for (j, t) in cfgs.iter().enumerate() {
                    let Ok(e) = estimate(desc, t, &o.target) else {
                        continue;
                    };
                    feat.extend_from_slice(&tile_config_features(&tile_size_config(t)));
                    let rt = |ns: f64, draw: u64| {
                        noise
                            .apply(ns, seed, draw)
                            .map_err(|e| anyhow::anyhow!("{}: kernel {}: {e}", input.name, k.name))
                    };
                    runtime.push(rt(e.total_ns, 2 * j as u64)?);
                    norm.push(rt(def_est.total_ns, 2 * j as u64 + 1)?);
                }
                // The official loaders drop kernels with fewer than two configurations.
                if runtime.len() < 2 {
                    return Ok(None);
                }
                let g = encode_graph_with(km, &enc)?;
                write_tile_npz(&path, &g, &feat, &runtime, &norm)?;
                let mut made = vec![path.clone()];
                if o.write_pb {
                    let runs = cfgs
                        .iter()
                        .zip(&runtime)
                        .enumerate()
                        .map(|(j, (t, &ns))| crate::proto::Run {
                            config: crate::proto::RunConfig::Tile(Some(crate::proto::TileConfig {
                                kernel_bounds: t.kernel_bounds.clone(),
                                output_bounds: t.output_bounds.clone(),
                                input_bounds: t.input_bounds.clone(),
                                iteration_bounds: Vec::new(),
                            })),
                            error: false,
                            is_default: j == 0,
                            profile: profile(ns),
                        })
                        .collect();
                    let pb_file = pb_path(&o.out, &path);
                    write_pb(
                        &pb_file,
                        crate::proto::ModuleTuning {
                            module: Some(crate::proto::module_to_proto(km)),
                            fingerprint: *fp,
                            runs,
                            config_index_to_node: Vec::new(),
                        },
                    )?;
                    made.push(pb_file);
                }
                configs_done.fetch_add(runtime.len() as u64, Ordering::Relaxed);
                let mut st = stats(&path, &runtime, g.num_nodes());
                st.kernel = Some(k.name.to_string());
                Ok(Some((st, made)))
            })
            .collect();
        let mut made = Vec::new();
        for r in results {
            if let Some((st, files)) = r? {
                report.files_written += 1;
                made.extend(files.into_iter().map(|f| (f, st.kernel.clone())));
                report.files.push(st);
            }
        }
        manifest.write(&made)?;
    }
    pb.finish_and_clear();
    finish(&mut report, start, configs_done.load(Ordering::Relaxed));
    Ok(report)
}

fn finish(report: &mut GenReport, start: Instant, configs: u64) {
    report.configs = configs;
    report.seconds = start.elapsed().as_secs_f64();
    report.configs_per_second = if report.seconds > 0.0 {
        configs as f64 / report.seconds
    } else {
        0.0
    };
}

fn random_perm(rng: &mut SplitMix64, rank: usize) -> Dims {
    let mut v: Dims = (0..rank as i64).collect();
    for i in (1..rank).rev() {
        let j = rng.below(i + 1);
        v.swap(i, j);
    }
    v
}

/// A random `minor_to_major` prefix of two distinct dims, most-minor first (the whole
/// permutation of a rank ≤ 2 tensor).
fn random_minor_prefix(rng: &mut SplitMix64, rank: usize) -> Dims {
    let mut v = random_perm(rng, rank);
    v.truncate(2);
    v
}

/// A deterministic stream of distinct layout configurations: the first is the
/// compiler's default (all `None`); duplicates are recognised by a 64-bit hash, so the
/// stream holds no configuration in memory and can be replayed from its seed.
///
/// Layouts are drawn in the style of real TpuGraphs data (a tensor's list is a
/// `minor_to_major` prefix, completed by the compiler, [`crate::passes::complete_layout`]):
/// a convolution's tensors (output, input, kernel) get a 2-dim minor prefix — two distinct
/// dims, most-minor first — and so do a dot's (the real data has no dots; they are MXU ops
/// like convolutions); a reshape's get full permutations. In the random search, as in
/// the real sample's runs, every tensor of rank ≥ 2 of every node is set and a rank-1
/// tensor (one possible layout) is `[0]` or empty with equal odds; the default search
/// sets one to three tensors (rank ≥ 2) of random nodes and leaves the rest to the
/// compiler.
pub struct LayoutSampler {
    ranks: Vec<[usize; 3]>,
    has_kernel: Vec<bool>,
    search: Search,
    rng: SplitMix64,
    seen: HashSet<u64>,
    started: bool,
}

impl LayoutSampler {
    pub fn new(ev: &LayoutEvaluator, search: Search, seed: u64) -> Self {
        LayoutSampler {
            ranks: ev.nodes.iter().map(|n| n.ranks).collect(),
            has_kernel: ev
                .nodes
                .iter()
                .map(|n| {
                    matches!(
                        n.opcode,
                        crate::ir::Opcode::Convolution | crate::ir::Opcode::Dot
                    )
                })
                .collect(),
            search,
            rng: SplitMix64::new(seed),
            seen: HashSet::new(),
            started: false,
        }
    }

    fn hash(cfg: &[NodeChoice]) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        cfg.hash(&mut h);
        h.finish()
    }

    /// One tensor's layout in the style of its node (see [`LayoutSampler`]).
    fn draw(rng: &mut SplitMix64, rank: usize, mxu: bool) -> Dims {
        if mxu {
            random_minor_prefix(rng, rank)
        } else {
            random_perm(rng, rank)
        }
    }

    /// The next distinct configuration; `None` when 50 draws in a row repeat earlier ones.
    pub fn next_config(&mut self) -> Option<Vec<NodeChoice>> {
        let n = self.ranks.len();
        if !self.started {
            self.started = true;
            let d = vec![NodeChoice::default(); n];
            self.seen.insert(Self::hash(&d));
            return Some(d);
        }
        for _ in 0..50 {
            let mut cfg = vec![NodeChoice::default(); n];
            let rng = &mut self.rng;
            match self.search {
                Search::Random => {
                    for (i, c) in cfg.iter_mut().enumerate() {
                        let [ro, ri, rk] = self.ranks[i];
                        let mxu = self.has_kernel[i];
                        // As in the real data: every tensor of rank ≥ 2 set; a rank-1
                        // tensor, which has one layout, `[0]` or left empty.
                        let mut pick = |rank: usize| match rank {
                            0 => None,
                            1 => (rng.below(2) == 0).then(|| Self::draw(rng, rank, mxu)),
                            _ => Some(Self::draw(rng, rank, mxu)),
                        };
                        c.output = pick(ro);
                        c.input = pick(ri);
                        c.kernel = if mxu { pick(rk) } else { None };
                    }
                }
                Search::Default => {
                    let k = 1 + rng.below(3.min(n.max(1)));
                    for _ in 0..k {
                        let i = rng.below(n);
                        let which = rng.below(3);
                        let rank = self.ranks[i][which];
                        if rank < 2 || (which == 2 && !self.has_kernel[i]) {
                            continue;
                        }
                        let p = Self::draw(rng, rank, self.has_kernel[i]);
                        match which {
                            0 => cfg[i].output = Some(p),
                            1 => cfg[i].input = Some(p),
                            _ => cfg[i].kernel = Some(p),
                        }
                    }
                }
            }
            if self.seen.insert(Self::hash(&cfg)) {
                return Some(cfg);
            }
        }
        None
    }
}

/// Sample up to `count` distinct layout configurations (row 0 = the compiler's default).
pub fn sample_layouts(
    ev: &LayoutEvaluator,
    search: Search,
    count: usize,
    seed: u64,
) -> Vec<Vec<NodeChoice>> {
    let mut s = LayoutSampler::new(ev, search, seed);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        match s.next_config() {
            Some(c) => out.push(c),
            None => break,
        }
    }
    out
}

/// The layout collection.
pub fn generate_layout(inputs: &[Input], o: &GenOptions) -> anyhow::Result<GenReport> {
    let start = Instant::now();
    let mut report = GenReport::default();
    let mut configs_done = 0u64;
    let noise = Noise { sigma: o.noise };
    let enc = EncodeOptions {
        pad_minus_one: o.pad_minus_one,
        ..Default::default()
    };
    let pb = Progress::new(o.progress, 0, "layout configs");
    // Every module of this shard announces its configurations up front; a module that is
    // skipped, or whose sampler runs dry, takes its share back.
    let per_module = o.configs.max(1) as u64;
    let mine = (0..inputs.len()).filter(|&mi| o.shard.takes(mi)).count() as u64;
    pb.set_length(mine * per_module);
    let collection = format!("layout/{}/{}", o.source, o.search.dir());
    let _claim = claim_collection(o, &collection, &collection, &mut report)?;
    for (mi, input) in inputs.iter().enumerate() {
        if !o.shard.takes(mi) {
            continue;
        }
        report.modules += 1;
        let mut manifest = ModuleManifest::new(
            &o.out,
            Recipe::new(&collection, &input.name, &input.module, o),
        );
        if !begin_module(&mut manifest, &input.name, &mut report)? {
            pb.dec_length(per_module);
            continue;
        }
        let split = o.split.assign(&input.name);
        let dir = o
            .out
            .join("npz/layout")
            .join(&o.source)
            .join(o.search.dir())
            .join(split.dir());
        create_dir(&dir)?;
        let path = dir.join(format!("{}.npz", input.name));
        let mut ev = LayoutEvaluator::new(&input.module, &o.target);
        if ev.nodes.is_empty() {
            report.notes.push(format!(
                "{}: no configurable nodes; no layout file",
                input.name
            ));
            pb.dec_length(per_module);
            manifest.write(&[])?;
            continue;
        }
        let g = encode_graph_with(&input.module, &enc)?;
        let ids = ev
            .order_as_graph(&g)
            .map_err(|e| anyhow::anyhow!("{}: {e}", input.name))?;
        let seed = item_seed(o.seed, &input.name);
        // Pass 1: label the configurations chunk by chunk (memory: one chunk), the
        // threads sharing the module prepared once. Pass 2 replays the same stream from
        // its seed to write the feature rows.
        let prepared = PreparedModule::new(&input.module)
            .map_err(|e| anyhow::anyhow!("{}: {e}", input.name))?;
        let mut sampler = LayoutSampler::new(&ev, o.search, seed);
        let mut runtimes: Vec<i64> = Vec::new();
        const CHUNK: usize = 512;
        while runtimes.len() < o.configs.max(1) {
            let want = CHUNK.min(o.configs.max(1) - runtimes.len());
            let chunk: Vec<Vec<NodeChoice>> =
                (0..want).map_while(|_| sampler.next_config()).collect();
            if chunk.is_empty() {
                break;
            }
            let base = runtimes.len();
            let ns: Vec<f64> = chunk
                .par_iter()
                .enumerate()
                .map(|(j, c)| {
                    let r = ev.runtime_ns(&prepared, c);
                    pb.inc(1);
                    r.map_err(|e| {
                        anyhow::anyhow!("{}: configuration {}: {e}", input.name, base + j)
                    })
                })
                .collect::<anyhow::Result<_>>()?;
            let base = runtimes.len() as u64;
            runtimes.extend(
                ns.into_iter()
                    .enumerate()
                    .map(|(j, t)| {
                        noise.apply(t, seed, base + j as u64).map_err(|e| {
                            anyhow::anyhow!(
                                "{}: configuration {}: {e}",
                                input.name,
                                base + j as u64
                            )
                        })
                    })
                    .collect::<anyhow::Result<Vec<i64>>>()?,
            );
        }
        pb.dec_length(per_module.saturating_sub(runtimes.len() as u64));
        let mut replay = LayoutSampler::new(&ev, o.search, seed);
        write_layout_npz(&path, &g, &ids, &runtimes, |_, row| {
            if let Some(cfg) = replay.next_config() {
                for c in &cfg {
                    let lc = LayoutConfig {
                        output: c.output.as_ref().map(|d| d.to_vec()),
                        input: c.input.as_ref().map(|d| d.to_vec()),
                        kernel: c.kernel.as_ref().map(|d| d.to_vec()),
                    };
                    row.extend_from_slice(&layout_config_features(&lc));
                }
            }
        })?;
        let mut made = vec![(path.clone(), None)];
        if o.write_pb {
            let mut replay = LayoutSampler::new(&ev, o.search, seed);
            let mut runs = Vec::with_capacity(runtimes.len());
            for (j, &ns) in runtimes.iter().enumerate() {
                let Some(cfg) = replay.next_config() else {
                    break;
                };
                let list = |d: &Option<crate::ir::Dims>| {
                    d.as_ref().map(|d| d.to_vec()).unwrap_or_default()
                };
                let nodes = cfg
                    .iter()
                    .map(|c| {
                        crate::proto::NodeLayout::new(
                            list(&c.output),
                            list(&c.input),
                            list(&c.kernel),
                        )
                    })
                    .collect();
                runs.push(crate::proto::Run {
                    config: crate::proto::RunConfig::Layout(crate::proto::LayoutConfig { nodes }),
                    error: false,
                    is_default: j == 0,
                    profile: profile(ns),
                });
            }
            let pb_file = pb_path(&o.out, &path);
            write_pb(
                &pb_file,
                crate::proto::ModuleTuning {
                    module: Some(crate::proto::module_to_proto(&input.module)),
                    fingerprint: super::kernel_module::fnv1a(input.name.as_bytes()),
                    runs,
                    // Node numbering of the written proto: computations in module order,
                    // instructions in program order.
                    config_index_to_node: {
                        let mut base = vec![0u64; input.module.computations.len()];
                        let mut acc = 0u64;
                        for (ci, c) in input.module.computations.values().enumerate() {
                            base[ci] = acc;
                            acc += c.len() as u64;
                        }
                        ev.nodes
                            .iter()
                            .map(|n| {
                                let c = input.module.comp(n.comp);
                                base[n.comp]
                                    + c.order.iter().position(|&x| x == n.instr).unwrap_or(0) as u64
                            })
                            .collect()
                    },
                },
            )?;
            made.push((pb_file, None));
        }
        manifest.write(&made)?;
        configs_done += runtimes.len() as u64;
        report.files_written += 1;
        report.files.push(stats(&path, &runtimes, g.num_nodes()));
    }
    pb.finish_and_clear();
    finish(&mut report, start, configs_done);
    Ok(report)
}
