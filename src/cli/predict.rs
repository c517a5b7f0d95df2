//! `tpusim predict FILE.npz|FILE.pb|DIR|FILE.hlo ... --out P.csv`: the analytical model's
//! runtime for every configuration row of TpuGraphs files.
//!
//! * `.npz` (the public release's form: features, no HLO): the module is rebuilt from the
//!   features ([`crate::dataset::rebuild`], which says what is exact and what is
//!   inferred) and every configuration row is costed; row j of the CSV is row j of the
//!   file.
//! * `.pb` (`ModuleTuningData` / `TuningData`, full HLO): every run, in run order, as
//!   `estimate --runs` does.
//! * `.hlo` (or any module file) with `--config CFG` (repeatable): the module compiled
//!   and estimated under each configuration, as `estimate --config CFG` prints it; row j
//!   is the j-th `--config` (row 0 the default configuration when none is given).
//!
//! Tile and layout runs of `.npz` and `.pb` files are costed by one function,
//! `dataset::replay::predict_runs`, so a rebuilt file and its raw twin are costed alike.
//! Folders are searched recursively for `.npz` and `.pb` files. The CSV's `ID` is what
//! TpuGraphs writes (`tile:xla:STEM`, `layout:SOURCE:SEARCH:STEM`) when the file sits in
//! the release's tree (`.../tile/xla/SPLIT/STEM.npz`,
//! `.../layout/SOURCE/SEARCH/SPLIT/STEM.npz`), else the file's stem.

use crate::csv_text::CsvText;
use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};

use super::compile::target;
use crate::dataset::rebuild::rebuild_npz;
use crate::dataset::replay::predict_runs;
use crate::eval::metrics::ranking_from_scores;
use crate::progress::{Progress, ProgressMode};
use crate::proto::{read_tuning_file, write_file_atomic, Tuning};
use crate::tpu::TpuTarget;

#[derive(Args, Debug)]
pub struct PredictArgs {
    /// TpuGraphs files (.npz, .pb), folders holding them (searched recursively), or
    /// module files (.hlo) to cost under --config.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The CSV to write.
    #[arg(long)]
    pub out: PathBuf,
    /// TPU target.
    #[arg(long, default_value = "v3")]
    pub tpu: String,
    /// Write a Kaggle submission (`ID,TopConfigs`: every configuration, predicted
    /// fastest first) instead of `ID,config_index,predicted_runtime_ns`.
    #[arg(long)]
    pub kaggle: bool,
    /// For module files: a compilation configuration (JSON or TOML) per row.
    #[arg(long)]
    pub config: Vec<PathBuf>,
    /// Also write each rebuilt module's HLO text into this folder (`ID.hlo`, `:` → `_`).
    #[arg(long)]
    pub emit_hlo: Option<PathBuf>,
    /// No progress on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// The TpuGraphs ID of a file from where it sits (see the module doc).
pub fn tpugraphs_id(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parts: Vec<String> = path
        .parent()
        .map(|p| {
            p.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let tail = |k: usize| -> Option<&[String]> { parts.len().checked_sub(k).map(|i| &parts[i..]) };
    if let Some([a, b, _split]) = tail(3) {
        if a == "tile" && b == "xla" {
            return format!("tile:xla:{stem}");
        }
    }
    if let Some([l, src, search, _split]) = tail(4) {
        if l == "layout" {
            return format!("layout:{src}:{search}:{stem}");
        }
    }
    stem
}

fn collect(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut found = Vec::new();
            let mut stack = vec![p.clone()];
            while let Some(d) = stack.pop() {
                let rd = std::fs::read_dir(&d).with_context(|| format!("{}", d.display()))?;
                for e in rd {
                    let e = e.with_context(|| format!("{}", d.display()))?;
                    let path = e.path();
                    if path.is_dir() {
                        stack.push(path);
                    } else if path.extension().is_some_and(|x| x == "npz" || x == "pb") {
                        found.push(path);
                    }
                }
            }
            if found.is_empty() {
                anyhow::bail!("{}: no .npz or .pb files in this folder", p.display());
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

/// Predicted runtimes of one file's rows: its ID, and per row the runtime (or why not).
type FileRows = (
    String,
    Vec<std::result::Result<f64, crate::kernels::ProgramError>>,
);

fn predict_file(
    file: &Path,
    configs: &[PathBuf],
    t: &TpuTarget,
    emit: Option<&Path>,
    bar: &Progress,
) -> Result<Vec<FileRows>> {
    let id = tpugraphs_id(file);
    let ext = file.extension().and_then(|x| x.to_str()).unwrap_or("");
    match ext {
        "npz" => {
            let r = rebuild_npz(file)?;
            if let Some(dir) = emit {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                let out = dir.join(format!("{}.hlo", id.replace(':', "_")));
                write_file_atomic(&out, r.text.as_bytes())?;
            }
            for (k, why) in &r.stand_ins {
                bar.suspend(|| {
                    eprintln!(
                        "note: {}: node {k} is a stand-in custom-call ({why})",
                        file.display()
                    )
                });
            }
            bar.inc_length(r.tuning.runs.len() as u64);
            let rows = predict_runs(&r.tuning, t, &|| bar.inc(1))
                .with_context(|| format!("{}: costing the rebuilt module", file.display()))?;
            Ok(vec![(id, rows)])
        }
        "pb" => {
            let mts = match read_tuning_file(file)? {
                Tuning::Module(m) => vec![(id, m)],
                Tuning::Set(s) => {
                    let many = s.modules.len() > 1;
                    s.modules
                        .into_iter()
                        .enumerate()
                        .map(|(k, m)| {
                            (
                                if many {
                                    format!("{id}#{k}")
                                } else {
                                    id.clone()
                                },
                                m,
                            )
                        })
                        .collect()
                }
            };
            let mut out = Vec::new();
            for (id, m) in mts {
                bar.inc_length(m.runs.len() as u64);
                let rows = predict_runs(&m, t, &|| bar.inc(1))
                    .with_context(|| format!("predicting {}", file.display()))?;
                out.push((id, rows));
            }
            Ok(out)
        }
        _ => {
            // A module file: one row per --config (the default configuration if none).
            let mods = super::input::load_modules(file, false)?;
            let Some(m) = mods.into_iter().next() else {
                anyhow::bail!("{}: holds no module", file.display());
            };
            let cfgs: Vec<Option<PathBuf>> = if configs.is_empty() {
                vec![None]
            } else {
                configs.iter().cloned().map(Some).collect()
            };
            bar.inc_length(cfgs.len() as u64);
            let mut rows = Vec::new();
            // What `estimate --config` prints for each configuration (one model).
            let prepared = crate::passes::PreparedModule::new(&m.module)?;
            for c in &cfgs {
                let cfg = super::compile::config(c)?;
                let r = crate::dataset::layout_eval::recompiled_ns(&prepared, &cfg, t);
                bar.inc(1);
                rows.push(r);
            }
            Ok(vec![(id, rows)])
        }
    }
}

pub fn predict(a: PredictArgs) -> Result<i32> {
    let t = target(&a.tpu, false)?;
    let files = collect(&a.inputs)?;
    let bar = Progress::new(ProgressMode::for_stderr(a.quiet), 0, "configs");
    let mut csv = if a.kaggle {
        CsvText::new("ID,TopConfigs")
    } else {
        CsvText::new("ID,config_index,predicted_runtime_ns")
    };
    let mut seen: std::collections::HashMap<String, PathBuf> = Default::default();
    let (mut rows, mut failed, mut ok_files) = (0usize, 0usize, 0usize);
    let mut bad_files = 0usize;
    for file in &files {
        let got = match predict_file(file, &a.config, &t, a.emit_hlo.as_deref(), &bar) {
            Ok(g) => g,
            Err(e) => {
                bad_files += 1;
                bar.suspend(|| eprintln!("{}", super::error_line(&e, Some(file))));
                continue;
            }
        };
        ok_files += 1;
        for (id, preds) in got {
            if let Some(first) = seen.insert(id.clone(), file.clone()) {
                anyhow::bail!(
                    "{} and {} both have the ID '{id}'",
                    first.display(),
                    file.display()
                );
            }
            if a.kaggle {
                let scores: Vec<f64> = preds
                    .iter()
                    .map(|r| r.as_ref().copied().unwrap_or(f64::INFINITY))
                    .collect();
                let top: Vec<String> = ranking_from_scores(&scores)
                    .iter()
                    .map(|i| i.to_string())
                    .collect();
                csv.row([id.clone(), top.join(";")]);
            }
            for (j, r) in preds.iter().enumerate() {
                rows += 1;
                match r {
                    Ok(ns) => {
                        if !a.kaggle {
                            csv.row([id.clone(), j.to_string(), (ns.round() as i64).to_string()]);
                        }
                    }
                    Err(e) => {
                        failed += 1;
                        bar.suspend(|| eprintln!("{}: {id} row {j}: {e}", file.display()));
                        if !a.kaggle {
                            csv.row([id.clone(), j.to_string(), String::new()]);
                        }
                    }
                }
            }
        }
    }
    bar.finish_and_clear();
    write_file_atomic(&a.out, csv.finish().as_bytes())?;
    outln!(
        "{ok_files} files, {rows} configurations predicted ({failed} could not be costed), \
         {bad_files} files failed; written to {}",
        a.out.display()
    )?;
    Ok(if bad_files > 0 || (rows > 0 && failed == rows) {
        1
    } else {
        0
    })
}
