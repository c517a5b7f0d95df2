//! `tpusim estimate TUNING.pb --runs --out FILE.csv`: apply every run's configuration of a
//! TpuGraphs `ModuleTuningData` / `TuningData` file and write the predicted runtimes,
//! `ID,config_index,predicted_runtime_ns`, one row per run (errored runs included).
//!
//! The predictions are [`crate::dataset::replay::predict_runs`]'s.

use crate::csv_text::CsvText;
use anyhow::Result;
use std::path::Path;

use crate::dataset::replay::predict_runs;
use crate::progress::{Progress, ProgressMode};
use crate::proto::{read_tuning_file, write_file_atomic, ModuleTuning, Tuning};
use crate::tpu::TpuTarget;

/// Write one CSV for the tuning files `files`, in order; returns the number of rows and
/// of failed runs, with `progress` on stderr ([`crate::progress`]).
pub fn replay(
    files: &[std::path::PathBuf],
    target: &TpuTarget,
    out: &Path,
    progress: ProgressMode,
) -> Result<(usize, usize)> {
    let mut tunings = Vec::with_capacity(files.len());
    for file in files {
        tunings.push((file, read_tuning_file(file)?));
    }
    let mut modules: Vec<(&Path, String, &ModuleTuning)> = Vec::new();
    for (file, tuning) in &tunings {
        let stem = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = stem.strip_suffix(".pb").unwrap_or(&stem).to_string();
        match tuning {
            Tuning::Module(m) => modules.push((file.as_path(), stem.clone(), m)),
            Tuning::Set(s) => modules.extend(
                s.modules
                    .iter()
                    .enumerate()
                    .map(|(k, m)| (file.as_path(), format!("{stem}#{k}"), m)),
            ),
        }
    }
    let total: usize = modules.iter().map(|(_, _, m)| m.runs.len()).sum();
    let bar = Progress::new(progress, total as u64, "runs");
    let mut csv = CsvText::new("ID,config_index,predicted_runtime_ns");
    let (mut rows, mut failed) = (0, 0);
    for (file, id, m) in modules {
        for (j, r) in predict_runs(m, target, &|| bar.inc(1))?
            .into_iter()
            .enumerate()
        {
            rows += 1;
            match r {
                Ok(ns) => {
                    csv.row([id.clone(), j.to_string(), (ns.round() as i64).to_string()]);
                }
                Err(e) => {
                    failed += 1;
                    bar.suspend(|| eprintln!("{}: {id} run {j}: {e}", file.display()));
                    csv.row([id.clone(), j.to_string(), String::new()]);
                }
            }
        }
    }
    bar.finish_and_clear();
    write_file_atomic(out, csv.finish().as_bytes())?;
    Ok((rows, failed))
}
