//! `tpusim generate {tile,layout}` and `tpusim score`.

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

use super::compile::target;
use super::input::load_modules;
use crate::dataset::generate::{
    generate_layout, generate_tile, module_names, GenOptions, Input, SampleOptions, Search,
};
use crate::dataset::plan::{Shard, SplitRatios};
use crate::progress::{Progress, ProgressMode};

/// `--search`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SearchArg {
    /// Random layouts for every configurable node.
    Random,
    /// Perturbations of a few nodes around the compiler's default.
    Default,
}

impl From<SearchArg> for Search {
    fn from(s: SearchArg) -> Search {
        match s {
            SearchArg::Random => Search::Random,
            SearchArg::Default => Search::Default,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Collection {
    /// One file per kernel of the default compilation, with sampled tile configs.
    Tile(TileGenArgs),
    /// One file per module, with sampled layout configs of its configurable nodes.
    Layout(LayoutGenArgs),
}

#[derive(Args, Debug)]
pub struct TileGenArgs {
    #[command(flatten)]
    pub common: GenArgs,
}

#[derive(Args, Debug)]
pub struct LayoutGenArgs {
    #[command(flatten)]
    pub common: GenArgs,
    /// Layout search: random layouts, or perturbations around the default.
    #[arg(long, value_enum, default_value = "random")]
    pub search: SearchArg,
    /// Source label of the collection (OUT/npz/layout/SOURCE/...): xla or nlp.
    #[arg(long, default_value = "xla")]
    pub source: String,
}

/// Options of both collections.
#[derive(Args, Debug)]
pub struct GenArgs {
    /// HLO module files (default: every .hlo in hlo_samples/).
    pub inputs: Vec<PathBuf>,
    /// Output root; files go to OUT/npz/tile/xla/... and OUT/npz/layout/..., and what
    /// each module made to OUT/manifest/ (a re-run skips what is complete and current).
    #[arg(long, default_value = "out")]
    pub out: PathBuf,
    /// Configurations per file (the default configuration is one of them).
    #[arg(long, default_value_t = 100)]
    pub configs: usize,
    /// Seed of the configuration sampling (and of --noise).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// This machine's share of the inputs: i/n.
    #[arg(long, default_value = "0/1")]
    pub shard: Shard,
    /// Train/valid/test ratios, assigned by a hash of the module name.
    #[arg(long, default_value = "80/10/10")]
    pub split: SplitRatios,
    /// Multiplicative measurement noise σ (runtime × exp(σ·z)).
    #[arg(long, default_value_t = 0.0)]
    pub noise: f64,
    /// TPU target (TpuGraphs was measured on v3).
    #[arg(long, default_value = "v3")]
    pub tpu: String,
    /// Pad the no-aggregate feature lists with -1 instead of 0.
    #[arg(long)]
    pub pad_minus_one: bool,
    /// Also write the raw TpuGraphs ModuleTuningData (.pb) of every file under OUT/pb/.
    #[arg(long)]
    pub pb: bool,
    /// Deflate the npz members, as np.savez_compressed does (smaller files, slower to
    /// write and read; every npz reader reads both).
    #[arg(long)]
    pub compress: bool,
    /// No progress on stderr (a bar on a terminal, else a line every 10 s).
    #[arg(long)]
    pub quiet: bool,
    /// Print the run report as JSON (with each file's kernel, for the tile collection).
    #[arg(long)]
    pub json: bool,
}

/// The modules of the files `paths` (default: every `.hlo` of `hlo_samples/`), in the
/// order of their sorted paths, named as [`module_names`] says.
pub fn inputs(paths: &[PathBuf]) -> Result<Vec<Input>> {
    let mut files: Vec<PathBuf> = paths.to_vec();
    if files.is_empty() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("hlo_samples");
        let dir = if dir.is_dir() {
            dir
        } else {
            PathBuf::from("hlo_samples")
        };
        for e in std::fs::read_dir(&dir)? {
            let p = e?.path();
            if p.extension().is_some_and(|x| x == "hlo") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let mods = load_modules(&f, false)?;
        let names = module_names(&f, mods.len());
        for (m, name) in mods.into_iter().zip(names) {
            out.push(Input {
                name,
                module: m.module,
            });
        }
    }
    Ok(out)
}

pub fn generate(c: Collection) -> Result<i32> {
    let (a, layout) = match c {
        Collection::Tile(t) => (t.common, None),
        Collection::Layout(l) => {
            let LayoutGenArgs {
                common,
                search,
                source,
            } = l;
            (common, Some((search.into(), source)))
        }
    };
    let tile = layout.is_none();
    let (search, source) = layout.unwrap_or((Search::Random, "xla".into()));
    let o = GenOptions {
        out: a.out.clone(),
        sample: SampleOptions {
            configs: a.configs,
            seed: a.seed,
            target: target(&a.tpu, false)?,
            noise: a.noise,
            pad_minus_one: a.pad_minus_one,
            search,
        },
        split: a.split,
        shard: a.shard,
        source,
        write_pb: a.pb,
        compress: a.compress,
    };
    // The options are checked before the inputs are read (as the library checks them).
    o.check().map_err(|e| anyhow::anyhow!("{e}"))?;
    let ins = inputs(&a.inputs)?;
    let what = if tile {
        "tile kernels"
    } else {
        "layout configs"
    };
    let progress = Progress::new(ProgressMode::for_stderr(a.quiet), 0, what);
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(t) = a.threads {
        builder = builder.num_threads(t.max(1));
    }
    let pool = builder.build()?;
    let report = pool.install(|| {
        if tile {
            generate_tile(&ins, &o, &progress)
        } else {
            generate_layout(&ins, &o, &progress)
        }
    });
    progress.finish_and_clear();
    // One line says it all (the error's cause is in its message).
    let report = report.map_err(|e| anyhow::anyhow!("{e}"))?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        outln!(
            "{} modules, {} files written, {} skipped (already complete), {} configs in {:.2} s ({:.0} configs/s)",
            report.modules,
            report.files_written,
            report.files_skipped,
            report.configs,
            report.seconds,
            report.configs_per_second
        )?;
        for n in &report.notes {
            outln!("note: {n}")?;
        }
    }
    Ok(0)
}
