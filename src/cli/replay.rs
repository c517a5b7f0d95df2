//! `tpusim estimate TUNING.pb --runs --out FILE.csv`: apply every run's configuration of a
//! TpuGraphs `ModuleTuningData` / `TuningData` file and write the predicted runtimes,
//! `ID,config_index,predicted_runtime_ns`, one row per run (errored runs included).
//!
//! Layout runs go through layout assignment with the run's per-node layouts (nodes by
//! `config_index_to_node`, i.e. TpuGraphs node index). Tile runs set the tile of the
//! file's kernel (the entry computation's root): `output_bounds`, `kernel_bounds` and
//! `input_bounds` are read exactly as TpuGraphs records them, as tile extents per
//! physical dim, major to minor (see docs/cost-model.md for the dimension order).

use anyhow::Result;
use rayon::prelude::*;
use std::fmt::Write as _;
use std::path::Path;

use crate::dataset::layout_eval::recompiled_ns;
use crate::kernels::{LoweredProgram, TileOverrides};
use crate::passes::{CompilationConfig, LayoutEntry, NodeRef, PreparedModule};
use crate::progress::{Progress, ProgressMode};
use crate::proto::{read_tuning_file, write_file_atomic, ModuleTuning, RunConfig, Tuning};
use crate::tpu::{TileConfig, TpuTarget};

/// Predicted runtime of each run of one module (None where the run's configuration
/// cannot be applied, with the reason), in run order. The module is prepared once
/// ([`PreparedModule`]) and the layout runs are compiled in parallel (rayon); the
/// result does not depend on the thread count.
pub fn predict_runs(
    mt: &ModuleTuning,
    target: &TpuTarget,
    progress: &Progress,
) -> Result<Vec<Result<f64, String>>> {
    let Some(module) = mt.module_ir()? else {
        anyhow::bail!("the tuning data holds no module");
    };
    let prepared = PreparedModule::new(&module)?;
    // The default compilation serves every tile run.
    let base = prepared.compile(&CompilationConfig::default())?;
    let base_prog = LoweredProgram::new(&base.module)?;
    let root_kernel = {
        let e = base.module.entry();
        e.instr(e.root).name.to_string()
    };
    let run_one = |run: &crate::proto::Run| -> Result<f64, String> {
        match &run.config {
            RunConfig::Tile(Some(t)) => {
                let mut tiles = TileOverrides::default();
                let cfg = TileConfig {
                    output_bounds: t.output_bounds.clone(),
                    kernel_bounds: t.kernel_bounds.clone(),
                    input_bounds: t.input_bounds.clone(),
                };
                if cfg != TileConfig::default() {
                    tiles.insert(root_kernel.clone(), cfg);
                }
                base_prog
                    .total_ns(target, &tiles)
                    .map_err(|e| e.to_string())
            }
            RunConfig::Layout(l) => {
                let mut c = CompilationConfig::default();
                for (k, node) in l.nodes.iter().enumerate() {
                    if node.is_unconstrained() {
                        continue;
                    }
                    let Some(&idx) = mt.config_index_to_node.get(k) else {
                        continue;
                    };
                    c.layout.push(LayoutEntry {
                        node: NodeRef::Index(idx as usize),
                        output: node.output().to_vec(),
                        input: node.input().to_vec(),
                        kernel: node.kernel().to_vec(),
                    });
                }
                recompiled_ns(&prepared, &c, target).map_err(|e| e.to_string())
            }
            _ => base_prog
                .total_ns(target, &TileOverrides::default())
                .map_err(|e| e.to_string()),
        }
    };
    Ok(mt
        .runs
        .par_iter()
        .map(|run| {
            let r = run_one(run);
            progress.inc(1);
            r
        })
        .collect())
}

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
    let mut csv = String::from("ID,config_index,predicted_runtime_ns\n");
    let (mut rows, mut failed) = (0, 0);
    for (file, id, m) in modules {
        for (j, r) in predict_runs(m, target, &bar)?.into_iter().enumerate() {
            rows += 1;
            match r {
                Ok(ns) => {
                    let _ = writeln!(csv, "{id},{j},{}", ns.round() as i64);
                }
                Err(e) => {
                    failed += 1;
                    bar.suspend(|| eprintln!("{}: {id} run {j}: {e}", file.display()));
                    let _ = writeln!(csv, "{id},{j},");
                }
            }
        }
    }
    bar.finish_and_clear();
    write_file_atomic(out, csv.as_bytes())?;
    Ok((rows, failed))
}
