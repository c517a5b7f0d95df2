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
//!
//! The samples themselves are made in memory ([`TileKernels::sample`], [`layout_sample`]):
//! a [`TileSample`] or [`LayoutSample`] lists its arrays ([`super::write::Member`]), which
//! the file writer streams into the npz and the Python package turns into numpy arrays.
//! A layout file is written while its configurations are labelled instead
//! ([`super::write::LayoutFileStream`]): the same members in the same order, each row
//! of `node_config_feat` from its configuration as drawn, where the sample replays the
//! rows from the sampler's seed (the same bytes; `tests/generate.rs`). Progress goes to a
//! [`GenProgress`] (the CLI draws it on stderr; the Python package calls back; or
//! [`NoProgress`]); errors are [`GenError`].

use rayon::prelude::*;
use serde::Serialize;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::config_feat::{
    tile_config_features, write_layout_tensor_features, TileSizeConfig, LAYOUT_CONFIG_FEATURE_COUNT,
};
use super::graph::{encode_graph_with, EncodeOptions};
use super::graph::{GraphEncoding, GraphError};
use super::kernel_module::{fingerprint, kernel_module};
use super::layout_eval::LayoutEvalError;
use super::layout_eval::{LayoutEvaluator, NodeChoice};
use super::manifest::{ModuleManifest, Recipe, RunRecipe, Status};
use super::npz::NpzError;
use super::outdir::{claim, create_dir, OutDirError};
use super::plan::{item_seed, Noise, RuntimeOutOfRange, Shard, SplitRatios};
use super::write::{
    layout_members, tile_members, write_members, LayoutFileStream, Member, TILE_CONFIG_FEATURES,
};
use crate::ir::{Dims, Module};
use crate::kernels::{lower_kernel_full, LowerError, ProgramError};
use crate::passes::{compile, CompilationConfig, CompileError, CompiledModule, PreparedModule};
use crate::proto::ProtoError;
use crate::rng::SplitMix64;
use crate::tpu::{default_tile, estimate, sample_tiles, TileConfig, TpuTarget};

/// Layout search mode, as in TpuGraphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

impl std::str::FromStr for Search {
    type Err = GenError;
    fn from_str(s: &str) -> Result<Self, GenError> {
        match s {
            "random" => Ok(Search::Random),
            "default" => Ok(Search::Default),
            _ => Err(GenError::Search(s.to_string())),
        }
    }
}

/// Why generation failed. The message says it all on one line (the module, the kernel
/// or configuration, and the cause); the cause is also the error's `source`.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error("--configs must be at least 2 (the loaders drop files with fewer)")]
    TooFewConfigs,
    #[error("--noise must be a finite number >= 0")]
    Noise,
    #[error("--source must be xla or nlp")]
    Source,
    #[error("--search must be random or default, not '{0}'")]
    Search(String),
    #[error("{module}: {source}")]
    Compile {
        module: String,
        source: Box<CompileError>,
    },
    #[error("{module}: kernel {kernel}: {source}")]
    Lower {
        module: String,
        kernel: String,
        source: Box<LowerError>,
    },
    #[error("{module}: kernel {kernel}: {source}")]
    KernelRuntime {
        module: String,
        kernel: String,
        source: RuntimeOutOfRange,
    },
    #[error("{module}: configuration {index}: {source}")]
    Program {
        module: String,
        index: u64,
        source: Box<ProgramError>,
    },
    #[error("{module}: configuration {index}: {source}")]
    ConfigRuntime {
        module: String,
        index: u64,
        source: RuntimeOutOfRange,
    },
    #[error("{module}: {source}")]
    NodeOrder {
        module: String,
        source: LayoutEvalError,
    },
    #[error("{0}")]
    Graph(#[from] GraphError),
    #[error("{0}")]
    Npz(#[from] NpzError),
    #[error("{0}")]
    Proto(#[from] ProtoError),
    #[error("{0}")]
    OutDir(#[from] OutDirError),
}

/// Where generation reports how far it is: items to do (`grow`, `shrink`) and done
/// (`advance`); tile kernels in the tile collection, configurations in the layout one.
/// Called from worker threads.
pub trait GenProgress: Sync {
    /// `n` more items to do.
    fn grow(&self, _n: u64) {}
    /// `n` fewer items to do than announced (a module skipped, a sampler run dry).
    fn shrink(&self, _n: u64) {}
    /// `n` more items done.
    fn advance(&self, _n: u64) {}
}

/// Progress reported nowhere.
pub struct NoProgress;

impl GenProgress for NoProgress {}

/// What decides a sample's values, wherever it goes (a file or memory).
#[derive(Debug, Clone)]
pub struct SampleOptions {
    /// Configurations per sample (the default configuration is one of them).
    pub configs: usize,
    pub seed: u64,
    pub target: TpuTarget,
    /// Multiplicative measurement noise σ.
    pub noise: f64,
    pub pad_minus_one: bool,
    /// Layout collection: the search.
    pub search: Search,
}

impl SampleOptions {
    /// The options of `tpusim generate` without flags (100 configurations, seed 0).
    pub fn new(target: TpuTarget) -> Self {
        SampleOptions {
            configs: 100,
            seed: 0,
            target,
            noise: 0.0,
            pad_minus_one: false,
            search: Search::Random,
        }
    }

    /// At least two configurations, a finite noise ≥ 0.
    pub fn check(&self) -> Result<(), GenError> {
        if self.configs < 2 {
            return Err(GenError::TooFewConfigs);
        }
        if !(self.noise >= 0.0 && self.noise.is_finite()) {
            return Err(GenError::Noise);
        }
        Ok(())
    }
}

/// Options of a run that writes an output tree.
#[derive(Debug, Clone)]
pub struct GenOptions {
    pub out: PathBuf,
    pub sample: SampleOptions,
    pub split: SplitRatios,
    pub shard: Shard,
    /// Layout collection: `xla` or `nlp`.
    pub source: String,
    /// Also write the raw TpuGraphs `ModuleTuningData` file of every npz file, under
    /// `pb/` mirroring `npz/`.
    pub write_pb: bool,
    /// Deflate the npz members (what `np.savez_compressed` writes) instead of storing
    /// them (`np.savez`).
    pub compress: bool,
}

impl GenOptions {
    /// How npz members are written (`compress`).
    pub fn compression(&self) -> crate::dataset::npz::Compression {
        if self.compress {
            crate::dataset::npz::Compression::Deflated
        } else {
            crate::dataset::npz::Compression::Stored
        }
    }

    /// [`SampleOptions::check`], and a source of `xla` or `nlp`.
    pub fn check(&self) -> Result<(), GenError> {
        self.sample.check()?;
        if self.source != "xla" && self.source != "nlp" {
            return Err(GenError::Source);
        }
        Ok(())
    }
}

/// The name a module file's module(s) get in the output tree: the file name without
/// `.hlo.pb`, `.hlo` or `.pb`, with `/`, blanks and `#` made `_`; a file of several
/// modules (a TuningData set) names them `<name>_<k>` by position.
pub fn module_names(path: &Path, count: usize) -> Vec<String> {
    let stem = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = [".hlo.pb", ".hlo", ".pb"]
        .iter()
        .find_map(|x| stem.strip_suffix(x))
        .unwrap_or(&stem)
        .replace(['/', ' ', '#'], "_");
    if count > 1 {
        (0..count).map(|k| format!("{stem}_{k}")).collect()
    } else {
        vec![stem; count]
    }
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

fn write_pb(path: &Path, mt: crate::proto::ModuleTuning) -> Result<(), GenError> {
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
) -> Result<bool, GenError> {
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
) -> Result<super::outdir::Claim, GenError> {
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

/// A kernel's tile sample, in memory: the arrays of its npz file
/// ([`TileSample::members`]) and the tile configuration of each row.
#[derive(Debug, Clone)]
pub struct TileSample {
    /// `<module>_<fingerprint>`: the file's stem.
    pub stem: String,
    /// The kernel of the default compilation.
    pub kernel: String,
    pub fingerprint: u64,
    pub graph: GraphEncoding,
    /// The tile of each row (row 0 = the default tile).
    pub tiles: Vec<TileConfig>,
    /// rows × 24.
    pub config_feat: Vec<f32>,
    pub config_runtime: Vec<i64>,
    pub config_runtime_normalizers: Vec<i64>,
}

impl TileSample {
    /// The arrays of the sample's npz file, in file order.
    pub fn members(&self) -> Vec<Member<'_>> {
        tile_members(
            &self.graph,
            &self.config_feat,
            &self.config_runtime,
            &self.config_runtime_normalizers,
        )
    }
}

/// The kernels of a module that become tile samples: the distinct kernels (by
/// fingerprint) of its default compilation, in execution order.
pub struct TileKernels {
    name: String,
    compiled: CompiledModule,
    /// (index in `compiled.kernels`, instruction, kernel module, fingerprint).
    work: Vec<(usize, petgraph::stable_graph::NodeIndex, Module, u64)>,
}

impl TileKernels {
    /// Compile `input` under the default configuration and find its distinct kernels.
    pub fn new(input: &Input) -> Result<Self, GenError> {
        let compiled = compile(&input.module, &CompilationConfig::default()).map_err(|e| {
            GenError::Compile {
                module: input.name.clone(),
                source: Box::new(e),
            }
        })?;
        let mut seen = HashSet::new();
        let mut work = Vec::new();
        for (i, k) in compiled.kernels.iter().enumerate() {
            let id = petgraph::stable_graph::NodeIndex::new(k.instruction as usize);
            let km = kernel_module(&compiled.module, k.computation, id);
            let fp = fingerprint(&km);
            if seen.insert(fp) {
                work.push((i, id, km, fp));
            }
        }
        Ok(TileKernels {
            name: input.name.clone(),
            compiled,
            work,
        })
    }

    /// Number of distinct kernels.
    pub fn len(&self) -> usize {
        self.work.len()
    }

    pub fn is_empty(&self) -> bool {
        self.work.is_empty()
    }

    /// The module of kernel `i` (what its sample's graph encodes).
    pub fn kernel_module(&self, i: usize) -> &Module {
        &self.work[i].2
    }

    /// The sample of kernel `i`: `None` when the kernel is not costed or has fewer than
    /// two configurations (the official loaders drop those).
    pub fn sample(&self, i: usize, o: &SampleOptions) -> Result<Option<TileSample>, GenError> {
        let (ki, id, km, fp) = &self.work[i];
        let k = &self.compiled.kernels[*ki];
        let cm = &self.compiled.module;
        let stem = format!("{}_{fp:016x}", self.name);
        let kernel_err = |kernel: &str| (self.name.clone(), kernel.to_string());
        let Some(lk) = lower_kernel_full(cm, k.computation, *id).map_err(|e| {
            let (module, kernel) = kernel_err(&k.name);
            GenError::Lower {
                module,
                kernel,
                source: Box::new(e),
            }
        })?
        else {
            return Ok(None);
        };
        let desc = lk.desc();
        let seed = item_seed(o.seed, &stem);
        let def = default_tile(desc, &o.target);
        let Ok(def_est) = estimate(desc, &def, &o.target) else {
            return Ok(None);
        };
        let mut cfgs = vec![def.clone()];
        // A standalone reshape is a relayout copy that the real tile search does not
        // tune (its runs in real data all carry the empty configuration): it has the
        // one default configuration, which the loaders drop below.
        let tunable = !(lk.hero == crate::ir::Opcode::Reshape && k.fused_computation.is_none());
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
        let noise = Noise { sigma: o.noise };
        let mut tiles = Vec::with_capacity(cfgs.len());
        let mut feat = Vec::with_capacity(cfgs.len() * TILE_CONFIG_FEATURES);
        let mut runtime = Vec::with_capacity(cfgs.len());
        let mut norm = Vec::with_capacity(cfgs.len());
        for (j, t) in cfgs.into_iter().enumerate() {
            let Ok(e) = estimate(desc, &t, &o.target) else {
                continue;
            };
            feat.extend_from_slice(&tile_config_features(&tile_size_config(&t)));
            let rt = |ns: f64, draw: u64| {
                noise.apply(ns, seed, draw).map_err(|e| {
                    let (module, kernel) = kernel_err(&k.name);
                    GenError::KernelRuntime {
                        module,
                        kernel,
                        source: e,
                    }
                })
            };
            runtime.push(rt(e.total_ns, 2 * j as u64)?);
            norm.push(rt(def_est.total_ns, 2 * j as u64 + 1)?);
            tiles.push(t);
        }
        // The official loaders drop kernels with fewer than two configurations.
        if runtime.len() < 2 {
            return Ok(None);
        }
        let enc = EncodeOptions {
            pad_minus_one: o.pad_minus_one,
            ..Default::default()
        };
        let graph = encode_graph_with(km, &enc)?;
        Ok(Some(TileSample {
            stem,
            kernel: k.name.to_string(),
            fingerprint: *fp,
            graph,
            tiles,
            config_feat: feat,
            config_runtime: runtime,
            config_runtime_normalizers: norm,
        }))
    }

    /// Every kernel's sample, in execution order (the kernels in parallel on the current
    /// rayon pool); `progress` advances by one per kernel.
    pub fn samples(
        &self,
        o: &SampleOptions,
        progress: &dyn GenProgress,
    ) -> Result<Vec<TileSample>, GenError> {
        progress.grow(self.len() as u64);
        // one kernel a task (as in `LayoutJob::label`): no core waits on a long share
        let r: Vec<Option<TileSample>> = (0..self.len())
            .into_par_iter()
            .with_max_len(1)
            .map(|i| {
                let s = self.sample(i, o);
                progress.advance(1);
                s
            })
            .collect::<Result<_, _>>()?;
        Ok(r.into_iter().flatten().collect())
    }
}

/// The tile samples of `input` under `o`, in memory, one per distinct kernel that has at
/// least two configurations: what [`generate_tile`] writes as the module's npz files.
pub fn tile_samples(
    input: &Input,
    o: &SampleOptions,
    progress: &dyn GenProgress,
) -> Result<Vec<TileSample>, GenError> {
    o.check()?;
    TileKernels::new(input)?.samples(o, progress)
}

/// The tile collection.
pub fn generate_tile(
    inputs: &[Input],
    o: &GenOptions,
    progress: &dyn GenProgress,
) -> Result<GenReport, GenError> {
    o.check()?;
    let start = Instant::now();
    let mut report = GenReport::default();
    let configs_done = AtomicU64::new(0);
    let _claim = claim_collection(o, "tile", "tile/xla", &mut report)?;
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
        let kernels = TileKernels::new(input)?;
        progress.grow(kernels.len() as u64);
        // one kernel a task (as in `LayoutJob::label`)
        let results: Vec<Result<Option<TileFile>, GenError>> = (0..kernels.len())
            .into_par_iter()
            .with_max_len(1)
            .map(|i| {
                progress.advance(1);
                let Some(s) = kernels.sample(i, &o.sample)? else {
                    return Ok(None);
                };
                let path = dir.join(format!("{}.npz", s.stem));
                write_members(&path, s.members(), o.compression())?;
                let mut made = vec![path.clone()];
                if o.write_pb {
                    let runs = s
                        .tiles
                        .iter()
                        .zip(&s.config_runtime)
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
                            module: Some(crate::proto::module_to_proto(kernels.kernel_module(i))),
                            fingerprint: s.fingerprint,
                            runs,
                            config_index_to_node: Vec::new(),
                        },
                    )?;
                    made.push(pb_file);
                }
                configs_done.fetch_add(s.config_runtime.len() as u64, Ordering::Relaxed);
                let mut st = stats(&path, &s.config_runtime, s.graph.num_nodes());
                st.kernel = Some(s.kernel.clone());
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

/// A uniform permutation of `0..rank` (Fisher–Yates, from the last place down).
fn random_perm(rng: &mut SplitMix64, rank: usize) -> Dims {
    fn shuffle(rng: &mut SplitMix64, v: &mut [i64]) {
        for i in (1..v.len()).rev() {
            let j = rng.below(i + 1);
            v.swap(i, j);
        }
    }
    // Shuffled on the stack and copied once: the sampler draws a few thousand a
    // configuration.
    const SMALL: usize = 8;
    if rank <= SMALL {
        let mut v: [i64; SMALL] = std::array::from_fn(|i| i as i64);
        shuffle(rng, &mut v[..rank]);
        Dims::from_slice(&v[..rank])
    } else {
        let mut v: Dims = (0..rank as i64).collect();
        shuffle(rng, &mut v);
        v
    }
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
#[derive(Clone)]
pub struct LayoutSampler {
    ranks: Vec<[usize; 3]>,
    has_kernel: Vec<bool>,
    search: Search,
    rng: SplitMix64,
    seen: HashSet<u64>,
    started: bool,
    /// Ran dry once: the stream ends there, so that a replay of it, which stops at its
    /// first end, gives the same configurations.
    dry: bool,
}

impl LayoutSampler {
    pub fn new(ev: &LayoutEvaluator, search: Search, seed: u64) -> Self {
        LayoutSampler {
            ranks: ev.nodes.iter().map(|n| n.ranks).collect(),
            has_kernel: ev.nodes.iter().map(|n| n.opcode.is_mxu()).collect(),
            search,
            rng: SplitMix64::new(seed),
            seen: HashSet::new(),
            started: false,
            dry: false,
        }
    }

    /// A fingerprint of a configuration that is the same on every machine and Rust
    /// release, so which draws count as repeats never changes: its layouts as one word
    /// a value (each tensor tagged by presence and length, so that two configurations
    /// give the same words only if they are equal), each word folded in by a multiply
    /// and a shift, both one-to-one. A word a value, not FNV-1a's byte a step: the
    /// sampler runs on one thread, beside the labelling and again when the file is
    /// written.
    fn hash(cfg: &[NodeChoice]) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut fold = |w: u64| {
            h = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            h ^= h >> 29;
        };
        for c in cfg {
            for t in [&c.output, &c.input, &c.kernel] {
                match t {
                    None => fold(u64::MAX),
                    Some(d) => {
                        fold(d.len() as u64);
                        for &x in d.iter() {
                            fold(x as u64);
                        }
                    }
                }
            }
        }
        h
    }

    /// One tensor's layout in the style of its node (see [`LayoutSampler`]).
    fn draw(rng: &mut SplitMix64, rank: usize, mxu: bool) -> Dims {
        if mxu {
            random_minor_prefix(rng, rank)
        } else {
            random_perm(rng, rank)
        }
    }

    /// The next distinct configuration; `None` when 50 draws in a row repeat earlier
    /// ones, and from then on.
    pub fn next_config(&mut self) -> Option<Vec<NodeChoice>> {
        if self.dry {
            return None;
        }
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
        self.dry = true;
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

/// A module's layout sample, in memory: the arrays of its npz file
/// ([`LayoutSample::members`]); the configurations are replayed from their seed
/// ([`LayoutSample::configs`]) rather than held.
pub struct LayoutSample {
    pub name: String,
    pub graph: GraphEncoding,
    /// The configurable nodes' graph indices.
    pub node_config_ids: Vec<i64>,
    pub config_runtime: Vec<i64>,
    /// A fresh sampler of the configurations (the stream the labels were made from).
    sampler: LayoutSampler,
}

impl LayoutSample {
    /// The configurations of the rows, in order (row 0 = the compiler's default).
    pub fn configs(&self) -> impl Iterator<Item = Vec<NodeChoice>> {
        let mut s = self.sampler.clone();
        (0..self.config_runtime.len()).map_while(move |_| s.next_config())
    }

    /// The arrays of the sample's npz file, in file order (`node_config_feat` produced
    /// row by row).
    pub fn members(&self) -> Vec<Member<'_>> {
        let mut replay = self.configs();
        layout_members(
            &self.graph,
            &self.node_config_ids,
            &self.config_runtime,
            move |_, row| {
                if let Some(cfg) = replay.next() {
                    layout_row(&cfg, row);
                }
            },
        )
    }
}

/// A configuration's row of `node_config_feat`, appended to `row`: the features of each
/// configurable node's three tensors.
fn layout_row(cfg: &[NodeChoice], row: &mut Vec<f32>) {
    let mut f = [0.0; LAYOUT_CONFIG_FEATURE_COUNT];
    for c in cfg {
        let lists = [c.output.as_deref(), c.input.as_deref(), c.kernel.as_deref()];
        write_layout_tensor_features(lists, &mut f);
        row.extend_from_slice(&f);
    }
}

/// Takes each chunk of a module's layout configurations as they are drawn, in order,
/// before they are labelled ([`LayoutJob::label`]).
type ConfigSink<'s> = dyn FnMut(&[Vec<NodeChoice>]) -> Result<(), GenError> + Send + 's;

/// What labelling a module's layout configurations starts from: its evaluator, graph,
/// configurable nodes in graph order, the module prepared for compilation and the
/// sampler's seed.
struct LayoutJob<'m> {
    name: &'m str,
    ev: LayoutEvaluator,
    graph: GraphEncoding,
    ids: Vec<i64>,
    prepared: PreparedModule<'m>,
    seed: u64,
}

impl<'m> LayoutJob<'m> {
    /// The job of `input` under `o`; `None` when the module has no configurable node
    /// (`progress` then shrinks by its share).
    fn new(
        input: &'m Input,
        o: &SampleOptions,
        progress: &dyn GenProgress,
    ) -> Result<Option<Self>, GenError> {
        let mut ev = LayoutEvaluator::new(&input.module, &o.target);
        ev.remember(o.search == Search::Default);
        if ev.nodes.is_empty() {
            progress.shrink(o.configs.max(1) as u64);
            return Ok(None);
        }
        let enc = EncodeOptions {
            pad_minus_one: o.pad_minus_one,
            ..Default::default()
        };
        let name = &input.name;
        let graph = encode_graph_with(&input.module, &enc)?;
        let ids = ev.order_as_graph(&graph).map_err(|e| GenError::NodeOrder {
            module: name.clone(),
            source: e,
        })?;
        let prepared = PreparedModule::new(&input.module).map_err(|e| GenError::Compile {
            module: name.clone(),
            source: Box::new(e),
        })?;
        Ok(Some(LayoutJob {
            name,
            ev,
            graph,
            ids,
            prepared,
            seed: item_seed(o.seed, name),
        }))
    }

    /// The layout sample, with the evaluator that found its nodes. Every configuration
    /// is compiled, lowered and estimated in parallel on the current rayon pool, chunk
    /// by chunk; each chunk goes to `drawn` as it is drawn, in order. `progress`
    /// advances by one per configuration and shrinks by what a sampler that runs dry
    /// leaves undone of `o.configs`.
    fn label(
        self,
        o: &SampleOptions,
        progress: &dyn GenProgress,
        drawn: &mut ConfigSink<'_>,
    ) -> Result<(LayoutSample, LayoutEvaluator), GenError> {
        let LayoutJob {
            name,
            ev,
            graph,
            ids,
            prepared,
            seed,
        } = self;
        let per_module = o.configs.max(1) as u64;
        let noise = Noise { sigma: o.noise };
        // Label the configurations chunk by chunk (memory: one chunk), the threads
        // sharing the module prepared once; the sample's feature rows replay the same
        // stream from its seed (`LayoutSample::members`).
        let fresh = LayoutSampler::new(&ev, o.search, seed);
        let mut sampler = fresh.clone();
        let mut runtimes: Vec<i64> = Vec::new();
        // Configurations are drawn in order on one thread while the threads label the
        // previous chunk (two chunks in memory).
        const CHUNK: usize = 256;
        let total = o.configs.max(1);
        let mut draw =
            |sampler: &mut LayoutSampler, want: usize| -> Result<Vec<Vec<NodeChoice>>, GenError> {
                let chunk: Vec<_> = (0..want).map_while(|_| sampler.next_config()).collect();
                drawn(&chunk)?;
                Ok(chunk)
            };
        let mut chunk = draw(&mut sampler, CHUNK.min(total))?;
        while !chunk.is_empty() {
            let base = runtimes.len() as u64;
            let want = CHUNK.min(total - runtimes.len() - chunk.len());
            let (ns, next) = rayon::join(
                || {
                    // One configuration a task: rayon would otherwise run a quarter of the
                    // chunk as one task, and a core that finished its share would wait
                    // for it.
                    chunk
                        .par_iter()
                        .with_max_len(1)
                        .enumerate()
                        .map(|(j, c)| {
                            let r = ev.runtime_ns(&prepared, c);
                            progress.advance(1);
                            r.map_err(|e| GenError::Program {
                                module: name.to_string(),
                                index: base + j as u64,
                                source: Box::new(e),
                            })
                        })
                        .collect::<Result<Vec<f64>, _>>()
                },
                || draw(&mut sampler, want),
            );
            for (j, t) in ns?.into_iter().enumerate() {
                let index = base + j as u64;
                runtimes.push(noise.apply(t, seed, index).map_err(|e| {
                    GenError::ConfigRuntime {
                        module: name.to_string(),
                        index,
                        source: e,
                    }
                })?);
            }
            chunk = next?;
        }
        progress.shrink(per_module.saturating_sub(runtimes.len() as u64));
        Ok((
            LayoutSample {
                name: name.to_string(),
                graph,
                node_config_ids: ids,
                config_runtime: runtimes,
                sampler: fresh,
            },
            ev,
        ))
    }
}

/// The layout sample of `input` under `o`, in memory (`None` when the module has no
/// configurable node): what [`generate_layout`] writes as the module's npz file.
/// `progress` grows by `o.configs` and advances by one per configuration labelled.
pub fn layout_sample(
    input: &Input,
    o: &SampleOptions,
    progress: &dyn GenProgress,
) -> Result<Option<LayoutSample>, GenError> {
    o.check()?;
    progress.grow(o.configs.max(1) as u64);
    match LayoutJob::new(input, o, progress)? {
        Some(job) => Ok(Some(job.label(o, progress, &mut |_| Ok(()))?.0)),
        None => Ok(None),
    }
}

/// The raw TpuGraphs twin of a layout sample (`--pb`): the module, one run per
/// configuration with its layouts and runtime (row 0 the default), and the node of
/// each configurable node in the written proto's numbering.
fn layout_tuning(
    input: &Input,
    ev: &LayoutEvaluator,
    s: &LayoutSample,
) -> crate::proto::ModuleTuning {
    let list = |d: &Option<crate::ir::Dims>| d.as_ref().map(|d| d.to_vec()).unwrap_or_default();
    let runs = s
        .configs()
        .zip(&s.config_runtime)
        .enumerate()
        .map(|(j, (cfg, &ns))| {
            let nodes = cfg
                .iter()
                .map(|c| {
                    crate::proto::NodeLayout::new(list(&c.output), list(&c.input), list(&c.kernel))
                })
                .collect();
            crate::proto::Run {
                config: crate::proto::RunConfig::Layout(crate::proto::LayoutConfig { nodes }),
                error: false,
                is_default: j == 0,
                profile: profile(ns),
            }
        })
        .collect();
    // Node numbering of the written proto: computations in module order, instructions
    // in program order.
    let m = &input.module;
    let mut base = vec![0u64; m.computations.len()];
    let mut acc = 0u64;
    for (ci, c) in m.computations.values().enumerate() {
        base[ci] = acc;
        acc += c.len() as u64;
    }
    let config_index_to_node = ev
        .nodes
        .iter()
        .map(|n| {
            let c = m.comp(n.comp);
            base[n.comp] + c.order.iter().position(|&x| x == n.instr).unwrap_or(0) as u64
        })
        .collect();
    crate::proto::ModuleTuning {
        module: Some(crate::proto::module_to_proto(m)),
        fingerprint: super::kernel_module::fnv1a(input.name.as_bytes()),
        runs,
        config_index_to_node,
    }
}

/// The layout collection.
pub fn generate_layout(
    inputs: &[Input],
    o: &GenOptions,
    progress: &dyn GenProgress,
) -> Result<GenReport, GenError> {
    o.check()?;
    let start = Instant::now();
    let mut report = GenReport::default();
    let mut configs_done = 0u64;
    // Every module of this shard announces its configurations up front; a module that is
    // skipped, or whose sampler runs dry, takes its share back.
    let per_module = o.sample.configs.max(1) as u64;
    let mine = (0..inputs.len()).filter(|&mi| o.shard.takes(mi)).count() as u64;
    progress.grow(mine * per_module);
    let collection = format!("layout/{}/{}", o.source, o.sample.search.dir());
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
            progress.shrink(per_module);
            continue;
        }
        let dir = o
            .out
            .join("npz")
            .join(&collection)
            .join(o.split.assign(&input.name).dir());
        create_dir(&dir)?;
        let path = dir.join(format!("{}.npz", input.name));
        let Some(job) = LayoutJob::new(input, &o.sample, progress)? else {
            report.notes.push(format!(
                "{}: no configurable nodes; no layout file",
                input.name
            ));
            manifest.write(&[])?;
            continue;
        };
        // The file is written as the configurations are drawn, its rows from the drawn
        // configurations (not replayed after the labels), for as many rows as asked; a
        // sampler that runs dry leaves that file unfinished (its temporary file goes)
        // and the rows it drew are written again from its seed.
        let mut stream = Some(LayoutFileStream::begin(
            &path,
            o.compression(),
            &job.graph,
            &job.ids,
            o.sample.configs.max(1),
        )?);
        let mut row = Vec::new();
        let (s, ev) = job.label(&o.sample, progress, &mut |chunk| {
            if let Some(st) = stream.as_mut() {
                for cfg in chunk {
                    row.clear();
                    layout_row(cfg, &mut row);
                    st.rows(&row)?;
                }
            }
            Ok(())
        })?;
        match stream.take() {
            Some(st) if st.configs() == s.config_runtime.len() => {
                st.finish(&s.config_runtime)?;
            }
            unfinished => {
                drop(unfinished);
                write_members(&path, s.members(), o.compression())?;
            }
        }
        let mut made = vec![(path.clone(), None)];
        if o.write_pb {
            let pb_file = pb_path(&o.out, &path);
            write_pb(&pb_file, layout_tuning(input, &ev, &s))?;
            made.push((pb_file, None));
        }
        manifest.write(&made)?;
        configs_done += s.config_runtime.len() as u64;
        report.files_written += 1;
        report
            .files
            .push(stats(&path, &s.config_runtime, s.graph.num_nodes()));
    }
    finish(&mut report, start, configs_done);
    Ok(report)
}
