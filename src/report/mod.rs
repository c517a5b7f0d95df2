//! The teaching report of one program on one target (`tpusim report`): the program
//! summary, every kernel in a sortable table, the roofline ([`roofline`]), the costliest
//! kernels explained, a tile sweep of the costliest kernel and a layout sweep of the
//! most sensitive tensor of its configurable node, as one self-contained HTML page
//! ([`html`]). Every number is the program model's (`tpusim estimate`, `explain`,
//! `sweep tile`, `sweep layout`): nothing here computes a time of its own.

pub mod html;
pub mod roofline;

pub use roofline::{roofline, Roofline, RooflinePoint};

use std::collections::HashSet;

use crate::ir::Module;
use crate::kernels::{
    compile_program, explain_kernel, find_kernel, tile_overrides, KernelExplanation, ProgramError,
    ProgramEstimate,
};
use crate::passes::{
    configurable_nodes, CompilationConfig, CompileStats, CompiledModule, PreparedModule,
};
use crate::sweep::{layout_sweep, tile_sweep, LayoutSweep, SweepError, Tensor, TileSweep};
use crate::tpu::TpuTarget;

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Program(#[from] ProgramError),
    #[error(transparent)]
    Sweep(#[from] SweepError),
    #[error(transparent)]
    Chart(#[from] crate::sweep::plot::ChartError),
}

/// What a report is made of: the input module and the configuration (for the layout
/// sweep, which recompiles), the module compiled under it, and the target.
pub struct ReportInput<'a> {
    /// The file, as the report names it.
    pub file: &'a str,
    /// The configuration file, if any, as the report names it.
    pub config_name: Option<&'a str>,
    pub module: &'a Module,
    pub config: &'a CompilationConfig,
    pub compiled: &'a CompiledModule,
    pub target: &'a TpuTarget,
}

/// One (node, tensor) the report considered for its layout sweep.
#[derive(Debug, Clone)]
pub struct LayoutCandidate {
    pub node: String,
    pub tensor: Tensor,
    /// (slowest − fastest) / the compiler's choice, over every layout.
    pub spread: f64,
}

/// One kernel explained.
#[derive(Debug, Clone)]
pub struct Explained {
    /// Its share of the program's time.
    pub share: f64,
    pub explanation: KernelExplanation,
}

/// A program's report on one target.
#[derive(Debug, Clone)]
pub struct Report {
    pub file: String,
    pub config_name: Option<String>,
    pub target: TpuTarget,
    pub stats: CompileStats,
    /// The program estimate, `tpusim estimate`'s.
    pub estimate: ProgramEstimate,
    pub roofline: Roofline,
    /// The costliest kernels, largest share first.
    pub explained: Vec<Explained>,
    /// The tile sweep of the costliest kernel that has one.
    pub tile: Option<TileSweep>,
    /// Costlier kernels passed over for the tile sweep, with the reason.
    pub tile_skipped: Vec<(String, String)>,
    /// The kernel whose configurable nodes were swept.
    pub layout_kernel: Option<String>,
    /// Every (node, tensor) swept, in the order tried.
    pub layout_candidates: Vec<LayoutCandidate>,
    /// The sweep of the candidate with the largest spread.
    pub layout: Option<LayoutSweep>,
}

/// Kernels looked at, costliest first, for a tile sweep and for a configurable node.
const TILE_TRIES: usize = 5;
const LAYOUT_KERNELS: usize = 50;
/// Configurable nodes of the chosen kernel whose tensors are swept.
const LAYOUT_NODES: usize = 2;

/// Indices of the estimate's rows, largest share of the program time first (program
/// order among equals); rows that never run are left out.
pub fn by_cost(e: &ProgramEstimate) -> Vec<usize> {
    let mut v: Vec<usize> = (0..e.kernels.len())
        .filter(|&i| e.kernels[i].multiplier > 0.0)
        .collect();
    let cost = |i: usize| e.kernels[i].multiplier * e.kernels[i].total_ns;
    v.sort_by(|&a, &b| cost(b).total_cmp(&cost(a)));
    v
}

/// Builds the report: the estimate, the roofline, the `explain_top` costliest kernels
/// explained, the tile sweep and the layout sweep (`progress(total)` once per layout
/// compiled, as [`layout_sweep`] calls it).
pub fn build(
    input: &ReportInput,
    explain_top: usize,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Report, ReportError> {
    let c = input.compiled;
    let t = input.target;
    // what `tpusim estimate` prints: the program compiled from the input, not the
    // printed module lowered again
    let prepared = PreparedModule::new(input.module).map_err(ProgramError::from)?;
    let estimate = compile_program(&prepared, input.config)?.estimate(t)?;
    let order = by_cost(&estimate);
    let share = |i: usize| {
        let r = &estimate.kernels[i];
        if estimate.total_ns > 0.0 {
            r.multiplier * r.total_ns / estimate.total_ns
        } else {
            0.0
        }
    };
    let overrides = tile_overrides(&c.kernels);
    let mut explained = Vec::new();
    for &i in order.iter().take(explain_top) {
        let name = &estimate.kernels[i].name;
        let x = explain_kernel(&c.module, t, name, overrides.get(name))?;
        explained.push(Explained {
            share: share(i),
            explanation: x,
        });
    }

    let mut tile = None;
    let mut tile_skipped = Vec::new();
    for &i in order.iter().take(TILE_TRIES) {
        let name = &estimate.kernels[i].name;
        let desc = find_kernel(&c.module, name)?.2.into_desc();
        match tile_sweep(&desc, t, &[]) {
            Ok(s) => {
                tile = Some(s);
                break;
            }
            Err(e) => tile_skipped.push((name.clone(), e.to_string())),
        }
    }

    // The configurable nodes inside each kernel, costliest kernel first: the first
    // kernel that has any is swept, its hero first.
    let configurable: HashSet<&str> = configurable_nodes(input.module)
        .into_iter()
        .map(|(ci, id, _)| input.module.comp(ci).instr(id).name.as_str())
        .collect();
    let mut layout_kernel = None;
    let mut nodes: Vec<String> = Vec::new();
    for &i in order.iter().take(LAYOUT_KERNELS) {
        let name = &estimate.kernels[i].name;
        let Some(k) = c.kernels.iter().find(|k| k.name.as_str() == name) else {
            continue;
        };
        let mut inside: Vec<String> = Vec::new();
        if configurable.contains(k.hero_name.as_str()) {
            inside.push(k.hero_name.to_string());
        }
        match k.fused_computation {
            Some(fc) => {
                let comp = c.module.comp(fc);
                for &id in &comp.order {
                    let n = comp.instr(id).name.as_str();
                    if configurable.contains(n) && !inside.iter().any(|x| x == n) {
                        inside.push(n.to_string());
                    }
                }
            }
            None => {
                if configurable.contains(name.as_str()) && !inside.iter().any(|x| x == name) {
                    inside.push(name.clone());
                }
            }
        }
        if !inside.is_empty() {
            inside.truncate(LAYOUT_NODES);
            layout_kernel = Some(name.clone());
            nodes = inside;
            break;
        }
    }
    let mut layout_candidates = Vec::new();
    let mut layout: Option<LayoutSweep> = None;
    let mut best = f64::NEG_INFINITY;
    for node in &nodes {
        for tensor in [Tensor::Output, Tensor::Input, Tensor::Kernel] {
            let s = match layout_sweep(input.module, input.config, node, tensor, t, progress) {
                Ok(s) => s,
                Err(SweepError::NoTensor { .. } | SweepError::RankTooHigh { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            let lo = s
                .rows
                .iter()
                .map(|r| r.total_ns)
                .fold(f64::INFINITY, f64::min);
            let hi = s.rows.iter().map(|r| r.total_ns).fold(0.0, f64::max);
            let b = s.baseline_ns();
            let spread = if b > 0.0 && hi >= lo {
                (hi - lo) / b
            } else {
                0.0
            };
            layout_candidates.push(LayoutCandidate {
                node: node.clone(),
                tensor,
                spread,
            });
            // The first of the largest spread wins.
            if spread > best {
                best = spread;
                layout = Some(s);
            }
        }
    }
    Ok(Report {
        file: input.file.to_string(),
        config_name: input.config_name.map(str::to_string),
        target: t.clone(),
        stats: c.stats,
        roofline: roofline(&estimate, t),
        estimate,
        explained,
        tile,
        tile_skipped,
        layout_kernel,
        layout_candidates,
        layout,
    })
}
