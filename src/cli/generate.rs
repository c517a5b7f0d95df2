//! `tpusim generate {tile,layout}` and `tpusim score`.

use anyhow::Result;
use clap::{Args, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;

use super::compile::target;
use super::input::load_modules;
use crate::dataset::generate::{generate_layout, generate_tile, GenOptions, Input, Labels, Search};
use crate::dataset::plan::{Shard, SplitRatios};

#[derive(Subcommand, Debug)]
pub enum Collection {
    /// One file per kernel of the default compilation, with sampled tile configs.
    Tile(GenArgs),
    /// One file per module, with sampled layout configs of its configurable nodes.
    Layout(GenArgs),
}

#[derive(Args, Debug)]
pub struct GenArgs {
    /// HLO module files (default: every .hlo in hlo_samples/).
    pub inputs: Vec<PathBuf>,
    /// Output root; files go to OUT/npz/tile/xla/... and OUT/npz/layout/...
    #[arg(long, default_value = "out")]
    pub out: PathBuf,
    /// Configurations per file (the default configuration is one of them).
    #[arg(long, default_value_t = 100)]
    pub configs: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Layout search: random layouts, or perturbations around the default.
    #[arg(long, value_enum, default_value = "random")]
    pub search: Search,
    /// Layout collection: runtimes from the incremental evaluator (fast), or from
    /// compiling, lowering and estimating every configuration (exact, ~18 ms each and
    /// core for ResNet-50 training).
    #[arg(long, value_enum, default_value = "incremental")]
    pub labels: Labels,
    /// Layout source label (xla or nlp).
    #[arg(long, default_value = "xla")]
    pub source: String,
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
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Print the run report as JSON.
    #[arg(long)]
    pub json: bool,
}

fn inputs(paths: &[PathBuf]) -> Result<Vec<Input>> {
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
        let mods = load_modules(&f, false).map_err(|e| anyhow::anyhow!("{e}"))?;
        for m in mods {
            let stem = f
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let stem = stem.strip_suffix(".hlo").unwrap_or(&stem).to_string();
            out.push(Input {
                name: stem.replace(['/', ' '], "_"),
                module: m.module,
            });
        }
    }
    Ok(out)
}

pub fn generate(c: Collection) -> Result<i32> {
    let (a, tile) = match c {
        Collection::Tile(a) => (a, true),
        Collection::Layout(a) => (a, false),
    };
    if a.configs < 2 {
        anyhow::bail!("--configs must be at least 2 (the loaders drop files with fewer)");
    }
    if !(a.noise >= 0.0 && a.noise.is_finite()) {
        anyhow::bail!("--noise must be a finite number >= 0");
    }
    if tile && a.labels != Labels::Incremental {
        anyhow::bail!(
            "--labels is for the layout collection (tile runtimes always come from the model itself)"
        );
    }
    if a.source != "xla" && a.source != "nlp" {
        anyhow::bail!("--source must be xla or nlp");
    }
    let o = GenOptions {
        out: a.out.clone(),
        configs: a.configs,
        seed: a.seed,
        target: target(&a.tpu, false)?,
        split: a.split,
        noise: a.noise,
        shard: a.shard,
        pad_minus_one: a.pad_minus_one,
        progress: !a.quiet && std::io::stderr().is_terminal(),
        source: a.source.clone(),
        search: a.search,
        labels: a.labels,
        write_pb: a.pb,
    };
    let ins = inputs(&a.inputs)?;
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(t) = a.threads {
        builder = builder.num_threads(t.max(1));
    }
    let pool = builder.build()?;
    let report = pool.install(|| {
        if tile {
            generate_tile(&ins, &o)
        } else {
            generate_layout(&ins, &o)
        }
    })?;
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
