//! `tpusim score`: official Kaggle metrics of one or more submissions, side by side, and
//! of the analytical model's own ranking (`--analytical PB_ROOT`).

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use std::path::{Path, PathBuf};

use super::compile::target;
use crate::dataset::replay::predict_runs;
use crate::eval::score::{
    check_complete, npz_of, npz_runtimes, read_submission, score_rankings, split_ids, Ranking,
    ScoreReport,
};
use crate::progress::{Progress, ProgressMode};
use crate::proto::{read_tuning_file, Tuning};
use crate::tpu::TpuTarget;

#[derive(Args, Debug)]
pub struct ScoreArgs {
    /// Root of a TpuGraphs npz tree (the folder holding tile/ and layout/).
    #[arg(long)]
    pub data: PathBuf,
    /// Split whose runtimes are the truth.
    #[arg(long, default_value = "valid")]
    pub split: String,
    /// Kaggle-style CSV: ID,TopConfigs. Repeat to compare submissions side by side.
    #[arg(long)]
    pub predictions: Vec<PathBuf>,
    /// Also score the analytical model: rank every configuration by the runtime it
    /// predicts for its run in the raw TpuGraphs file (.pb) at the same place under this
    /// root (`generate --pb` writes it beside npz/; rows and runs are paired by their
    /// measured runtime). Graphs: those of the first submission, or every npz file of
    /// the split.
    #[arg(long)]
    pub analytical: Option<PathBuf>,
    /// TPU target of the analytical model.
    #[arg(long, default_value = "v3")]
    pub tpu: String,
    /// With --analytical: where to write its ranking as a Kaggle-style submission.
    #[arg(long)]
    pub analytical_out: Option<PathBuf>,
    /// Score a submission that ranks only some of the split's graphs (by default every
    /// npz file of the split must have its row).
    #[arg(long)]
    pub allow_missing: bool,
    /// No progress on stderr (a bar on a terminal, else a line every 10 s).
    #[arg(long)]
    pub quiet: bool,
    /// JSON output instead of the table: with one column (one submission, or only
    /// --analytical) its report; with several, `{"columns": [{name, report}, ...]}` in
    /// the table's order (the submissions, then the analytical model).
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Column {
    name: String,
    #[serde(flatten)]
    report: ScoreReport,
}

/// Which run of a raw TpuGraphs file each npz row is: the usable run (no error, a
/// profile; tile runs also a tile and more than 1 ns) whose measured runtime equals the
/// row's `config_runtime`, the first unused one among equals. The TpuGraphs
/// converter keeps exactly those runs but may shuffle them, and the runtime is the one
/// thing both files store verbatim. An error when a row has no such run: the file is not
/// the npz's twin.
fn pair_rows_with_runs(
    rows: &[f64],
    mt: &crate::proto::ModuleTuning,
    tile: bool,
) -> Result<Vec<usize>> {
    let mut free: std::collections::HashMap<i64, std::collections::VecDeque<usize>> =
        Default::default();
    for (i, r) in mt.runs.iter().enumerate() {
        let usable = if tile {
            r.usable_tile()
        } else {
            r.usable_layout()
        };
        if let (true, Some(t)) = (usable, r.measured()) {
            free.entry(t).or_default().push_back(i);
        }
    }
    rows.iter()
        .enumerate()
        .map(|(j, &y)| {
            free.get_mut(&(y as i64))
                .and_then(|q| q.pop_front())
                .ok_or_else(|| {
                    anyhow::anyhow!("row {j} ({y} ns) matches no measured run of the same runtime")
                })
        })
        .collect()
}

/// The analytical model's ranking of each ID: configurations by predicted runtime,
/// fastest first (ties by index; runs that cannot be applied last). One file at a time
/// (its runs in parallel), so that only one module is in memory.
fn analytical_rankings(
    npz_root: &Path,
    pb_root: &Path,
    split: &str,
    ids: &[String],
    target: &TpuTarget,
    progress: ProgressMode,
) -> Result<Vec<Ranking>> {
    let bar = Progress::new(progress, 0, "runs");
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let (_, npz, tile) =
            npz_of(npz_root, split, id).with_context(|| format!("unknown ID '{id}'"))?;
        let rel = npz.strip_prefix(npz_root).unwrap_or(&npz);
        let pb = pb_root.join(rel).with_extension("pb");
        let tuning = read_tuning_file(&pb)?;
        let mt = match tuning {
            Tuning::Module(m) => m,
            Tuning::Set(s) if s.modules.len() == 1 => {
                s.modules.into_iter().next().context("one module")?
            }
            Tuning::Set(s) => anyhow::bail!(
                "{}: holds {} modules; one per npz file is expected",
                pb.display(),
                s.modules.len()
            ),
        };
        // Raw runtimes (tile files: before normalising), as the runs record them.
        let rows = npz_runtimes(&npz, false)?;
        let runs = pair_rows_with_runs(&rows, &mt, tile)
            .with_context(|| format!("{}: not the twin of {}", pb.display(), npz.display()))?;
        bar.inc_length(mt.runs.len() as u64);
        let pred = predict_runs(&mt, target, &|| bar.inc(1))
            .with_context(|| format!("predicting {}", pb.display()))?;
        let key = |j: usize| pred[runs[j]].as_ref().copied().unwrap_or(f64::INFINITY);
        let mut top: Vec<usize> = (0..runs.len()).collect();
        top.sort_by(|&a, &b| key(a).total_cmp(&key(b)).then(a.cmp(&b)));
        out.push(Ranking {
            id: id.clone(),
            top,
            origin: pb.display().to_string(),
        });
    }
    bar.finish_and_clear();
    Ok(out)
}

pub fn score(a: ScoreArgs) -> Result<i32> {
    if a.predictions.is_empty() && a.analytical.is_none() {
        anyhow::bail!("give --predictions FILE (repeatable), --analytical PB_ROOT, or both");
    }
    if a.analytical_out.is_some() && a.analytical.is_none() {
        anyhow::bail!("--analytical-out needs --analytical PB_ROOT");
    }
    let mut columns = Vec::new();
    let mut first: Option<Vec<Ranking>> = None;
    for p in &a.predictions {
        let r = read_submission(p)?;
        if !a.allow_missing {
            check_complete(&a.data, &a.split, &r, &p.display().to_string())?;
        }
        let report = score_rankings(&a.data, &a.split, &r)?;
        columns.push(Column {
            name: p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| p.display().to_string()),
            report,
        });
        first.get_or_insert(r);
    }
    if let Some(pb_root) = &a.analytical {
        let t = target(&a.tpu, false)?;
        let ids: Vec<String> = match &first {
            Some(r) => r.iter().map(|x| x.id.clone()).collect(),
            None => split_ids(&a.data, &a.split),
        };
        if ids.is_empty() {
            anyhow::bail!("{}: no npz files in split '{}'", a.data.display(), a.split);
        }
        let progress = ProgressMode::for_stderr(a.quiet);
        let r = analytical_rankings(&a.data, pb_root, &a.split, &ids, &t, progress)?;
        if let Some(out) = &a.analytical_out {
            let mut csv = crate::csv_text::CsvText::new("ID,TopConfigs");
            for x in &r {
                let top: Vec<String> = x.top.iter().map(|i| i.to_string()).collect();
                csv.row([x.id.clone(), top.join(";")]);
            }
            crate::proto::write_file_atomic(out, csv.finish().as_bytes())?;
        }
        columns.push(Column {
            name: format!("analytical ({})", t.name),
            report: score_rankings(&a.data, &a.split, &r)?,
        });
    }
    if a.json {
        if let [only] = columns.as_slice() {
            // One submission: the report itself (the shape `score --json` always had).
            outln!("{}", serde_json::to_string_pretty(&only.report)?)?;
        } else {
            outln!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({ "columns": columns }))?
            )?;
        }
        return Ok(0);
    }
    // One row per collection (in order of first appearance), one column per submission.
    let mut rows: Vec<String> = Vec::new();
    for c in &columns {
        for s in &c.report.collections {
            if !rows.contains(&s.collection) {
                rows.push(s.collection.clone());
            }
        }
    }
    let w = columns
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0)
        .max(10);
    let mut head = format!("{:<22} {:>6}", "collection", "graphs");
    for c in &columns {
        head.push_str(&format!("  {:>w$}", c.name));
    }
    outln!("{head}")?;
    for row in &rows {
        let graphs = columns
            .iter()
            .find_map(|c| c.report.collections.iter().find(|s| &s.collection == row))
            .map(|s| s.graphs)
            .unwrap_or(0);
        let mut line = format!("{row:<22} {graphs:>6}");
        for c in &columns {
            match c.report.collections.iter().find(|s| &s.collection == row) {
                Some(s) => line.push_str(&format!("  {:>w$.4}", s.score)),
                None => line.push_str(&format!("  {:>w$}", "-")),
            }
        }
        outln!("{line}")?;
    }
    let mut line = format!("{:<22} {:>6}", "final score", "");
    for c in &columns {
        line.push_str(&format!("  {:>w$.4}", c.report.final_score));
    }
    outln!("{line}")?;
    Ok(0)
}
