//! Predicting the runs of TpuGraphs tuning data (`ModuleTuningData` / `TuningData`):
//! every run's configuration applied to the file's module and costed by the one model
//! (`tpusim estimate TUNING.pb --runs`, `score`'s analytical ranking, the Python package).
//!
//! Layout runs go through layout assignment with the run's per-node layouts (nodes by
//! `config_index_to_node`, i.e. TpuGraphs node index). Tile runs set the tile of the
//! file's kernel (the entry computation's root): `output_bounds`, `kernel_bounds` and
//! `input_bounds` are read exactly as TpuGraphs records them, as tile extents per
//! physical dim, major to minor (see docs/cost-model.md for the dimension order).

use rayon::prelude::*;

use crate::dataset::layout_eval::remembered_ns;
use crate::kernels::{compile_program, KernelMemo, ProgramError, TileOverrides};
use crate::passes::{CompilationConfig, CompileError, LayoutEntry, NodeRef, PreparedModule};
use crate::proto::{ModuleTuning, ProtoError, Run, RunConfig};
use crate::tpu::{TileConfig, TpuTarget};

/// Why the runs of a module could not be predicted at all.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("the tuning data holds no module")]
    NoModule,
    #[error(transparent)]
    Proto(#[from] ProtoError),
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error(transparent)]
    Program(#[from] ProgramError),
}

/// The configuration of one layout run, as a [`CompilationConfig`]: each constrained
/// node's layouts, by TpuGraphs node index (`config_index_to_node`).
pub fn layout_run_config(mt: &ModuleTuning, run: &Run) -> Option<CompilationConfig> {
    let RunConfig::Layout(l) = &run.config else {
        return None;
    };
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
    Some(c)
}

/// Predicted runtime (ns) of each run of one module, in run order; a run whose
/// configuration cannot be applied gets its error. The module is prepared once
/// ([`PreparedModule`]) and the runs are costed in parallel (rayon); the result does
/// not depend on the thread count. `on_run` is called once per finished run (progress).
pub fn predict_runs(
    mt: &ModuleTuning,
    target: &TpuTarget,
    on_run: &(dyn Fn() + Sync),
) -> Result<Vec<Result<f64, ProgramError>>, ReplayError> {
    let module = mt.module_ir()?.ok_or(ReplayError::NoModule)?;
    let prepared = PreparedModule::new(&module)?;
    // The default compilation serves every tile run.
    let base_prog = compile_program(&prepared, &CompilationConfig::default())?.program;
    // layout runs share most of their kernels: lowered and evaluated once
    let memo = KernelMemo::new(&module, target);
    // a tile run tunes the module's kernel: its entry root (the compiler keeps the name)
    let root_kernel = {
        let e = module.entry();
        e.instr(e.root).name.to_string()
    };
    let run_one = |run: &Run| -> Result<f64, ProgramError> {
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
                base_prog.total_ns(target, &tiles)
            }
            RunConfig::Layout(_) => {
                let c = layout_run_config(mt, run).unwrap_or_default();
                remembered_ns(&prepared, &c, &memo)
            }
            _ => base_prog.total_ns(target, &TileOverrides::default()),
        }
    };
    // one run a task: no core waits on a long share of the runs
    Ok(mt
        .runs
        .par_iter()
        .with_max_len(1)
        .map(|run| {
            let r = run_one(run);
            on_run();
            r
        })
        .collect())
}
