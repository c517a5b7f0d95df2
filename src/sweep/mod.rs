//! Sweeps: the teaching view of how one choice moves the runtime (`tpusim sweep`).
//!
//! * [`tile_sweep`]: one kernel of a compiled module under every candidate tile size
//!   of one iteration dim at a time, the other dims at the compiler's default tile —
//!   HBM re-fetch, grid steps and VMEM footprint against tile size.
//! * [`layout_sweep`]: the whole program recompiled and estimated under every layout
//!   (`minor_to_major` permutation) of one tensor of one configurable node, the rest of
//!   the configuration unchanged — the copies layout assignment inserts and what they
//!   and the re-laid-out kernels cost.
//!
//! * [`target`]: the whole program on several TPU generations — its time on each and
//!   the kernels whose bottleneck changes between them.
//!
//! [`plot`] draws the tile and layout sweeps as SVG charts; [`target`] its own.

pub mod plot;
pub mod target;

use rayon::prelude::*;
use serde::Serialize;

use crate::ir::{Module, Opcode};
use crate::kernels::{compile_program_with, tile_overrides, KernelMemo};
use crate::passes::{
    configurable_nodes, CompilationConfig, LayoutEntry, NodeRef, PreparedModule,
    CONFIGURABLE_OPCODES,
};
use crate::tpu::{
    bound_of_dim, default_tile, estimate, tile_candidates, Estimate, KernelDesc, KernelKind,
    ModelError, MxuRole, ReductionKind, TileConfig, TpuTarget,
};

/// Why a sweep could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(
        "kernel `{kernel}`: the default tile cannot be evaluated ({source}); nothing to sweep around"
    )]
    DefaultTile {
        kernel: String,
        source: crate::tpu::ModelError,
    },
    #[error("kernel `{kernel}`: tile {tile:?}: {source}")]
    Tile {
        kernel: String,
        tile: Vec<i64>,
        source: crate::tpu::ModelError,
    },
    #[error("kernel `{kernel}` has {n_iter} iteration dims; --dim {dim} is not one of them")]
    NoSuchDim {
        kernel: String,
        dim: usize,
        n_iter: usize,
    },
    #[error("node `{0}`: no instruction of that name in the module")]
    UnknownNode(String),
    #[error(
        "node `{node}` is a {opcode}, not a configurable node (configurable: {})",
        configurable_names()
    )]
    NotConfigurable { node: String, opcode: String },
    #[error("node `{node}` ({opcode}) has no {tensor} array tensor to lay out{hint}")]
    NoTensor {
        node: String,
        opcode: String,
        tensor: &'static str,
        hint: &'static str,
    },
    #[error("node `{node}`: {tensor} has rank {rank}; sweeps go up to rank 6 (720 layouts)")]
    RankTooHigh {
        node: String,
        tensor: &'static str,
        rank: usize,
    },
    #[error(transparent)]
    Compile(#[from] crate::passes::CompileError),
    #[error(transparent)]
    Program(crate::kernels::ProgramError),
}

/// A compile error stays a compile error whichever stage reports it.
impl From<crate::kernels::ProgramError> for SweepError {
    fn from(e: crate::kernels::ProgramError) -> Self {
        match e {
            crate::kernels::ProgramError::Compile(c) => SweepError::Compile(c),
            e => SweepError::Program(e),
        }
    }
}

fn configurable_names() -> String {
    let v: Vec<&str> = CONFIGURABLE_OPCODES.iter().map(|o| o.name()).collect();
    v.join(", ")
}

// ---------------------------------------------------------------------------
// Tile sweeps

/// One tile evaluated in a tile sweep.
#[derive(Debug, Clone, Serialize)]
pub struct TileRow {
    /// Swept iteration dim.
    pub dim: usize,
    /// Its tile size in this row, in elements (the other dims keep the default tile).
    pub tile: i64,
    /// The tile configuration of this row, as TpuGraphs records it: tile counts over
    /// the physical tiled shapes ([`TileConfig`]).
    pub config: TileConfig,
    /// The bound of `config` that sets the swept dim (`output_bounds[2]`, …), and its
    /// value in tiles; `None` when no list reaches the dim.
    pub bound: Option<(String, i64)>,
    /// Whether this row is the compiler's default tile.
    pub is_default: bool,
    /// The model's estimate; `None` when the tiles do not fit VMEM.
    pub estimate: Option<Estimate>,
    /// VMEM the tiles need (double-buffered, with the accumulator), bytes.
    pub vmem_bytes: u64,
}

/// A tile sweep of one kernel.
#[derive(Debug, Clone, Serialize)]
pub struct TileSweep {
    pub kernel: String,
    pub target: String,
    /// One label per iteration dim (`out0 M`, `red0 K`, …; see [`dim_label`]).
    pub labels: Vec<String>,
    /// Extent of each iteration dim.
    pub extents: Vec<i64>,
    /// The compiler's default tile size of each iteration dim, in elements.
    pub default_tile: Vec<i64>,
    /// The same tile as TpuGraphs records it (tile counts).
    pub default_config: TileConfig,
    /// Kernel time under the default tile, ns.
    pub default_ns: f64,
    /// Rows by swept dim, then by tile size (ascending).
    pub rows: Vec<TileRow>,
}

/// A short name for iteration dim `d` of `desc`: `out{j}` for output dims (with the
/// MXU role of a dot/convolution: `B`, `M`, `N`), `red{j}` for the others (`K` for a
/// contraction, `window`, or the reduction's axis).
pub fn dim_label(desc: &KernelDesc, d: usize) -> String {
    let r = desc.output_rank();
    if d < r {
        match &desc.kind {
            KernelKind::Mxu(spec) => {
                let role = match spec.roles.get(d) {
                    Some(MxuRole::Batch) => " B",
                    Some(MxuRole::M) => " M",
                    Some(MxuRole::N) => " N",
                    None => "",
                };
                format!("out{d}{role}")
            }
            _ => format!("out{d}"),
        }
    } else {
        let kind = match desc.reduction_dims.get(d - r).map(|x| x.kind) {
            Some(ReductionKind::Contraction) => " K",
            Some(ReductionKind::Window) => " window",
            Some(ReductionKind::Reduce(_)) => " reduce",
            None => "",
        };
        format!("red{}{kind}", d - r)
    }
}

/// Sweep the tile of `desc` one iteration dim at a time (`dims`; empty = every dim
/// with more than one candidate size) over [`tile_candidates`] (hardware-aligned powers
/// of two and the full extent), the other dims at the default tile.
pub fn tile_sweep(
    desc: &KernelDesc,
    target: &TpuTarget,
    dims: &[usize],
) -> Result<TileSweep, SweepError> {
    let n = desc.n_iter();
    let default = estimate(desc, &TileConfig::default(), target).map_err(|source| {
        SweepError::DefaultTile {
            kernel: desc.name.to_string(),
            source,
        }
    })?;
    let base: Vec<i64> = default.tile[..n].to_vec();
    let default_config = default_tile(desc, target);
    let cands = tile_candidates(desc, target);
    for &d in dims {
        if d >= n {
            return Err(SweepError::NoSuchDim {
                kernel: desc.name.to_string(),
                dim: d,
                n_iter: n,
            });
        }
    }
    let swept: Vec<usize> = if dims.is_empty() {
        (0..n).filter(|&d| cands[d].len() > 1).collect()
    } else {
        let mut v = Vec::new();
        for &d in dims {
            if !v.contains(&d) {
                v.push(d);
            }
        }
        v
    };
    let mut rows = Vec::new();
    for &d in &swept {
        let mut sizes: Vec<i64> = cands[d].clone();
        if !sizes.contains(&base[d]) {
            sizes.push(base[d]);
        }
        sizes.sort_unstable();
        for t in sizes {
            let mut tile = base.clone();
            tile[d] = t;
            let cfg = TileConfig::from_sizes(desc, &tile);
            let (estimate, vmem_bytes) = match estimate(desc, &cfg, target) {
                Ok(e) => (Some(e), e.vmem_bytes),
                Err(ModelError::Infeasible { needed, .. }) => (None, needed),
                Err(source) => {
                    return Err(SweepError::Tile {
                        kernel: desc.name.to_string(),
                        tile,
                        source,
                    })
                }
            };
            let bound = bound_of_dim(desc, d)
                .and_then(|(f, j)| cfg.bound(f, j).map(|b| (format!("{f}[{j}]"), b)));
            rows.push(TileRow {
                dim: d,
                tile: t,
                is_default: t == base[d],
                config: cfg,
                bound,
                estimate,
                vmem_bytes,
            });
        }
    }
    Ok(TileSweep {
        kernel: desc.name.to_string(),
        target: target.name.clone(),
        labels: (0..n).map(|d| dim_label(desc, d)).collect(),
        extents: (0..n).map(|d| desc.iter_extent(d)).collect(),
        default_tile: base,
        default_config,
        default_ns: default.total_ns,
        rows,
    })
}

impl TileSweep {
    /// CSV: one line per row.
    pub fn to_csv(&self) -> String {
        let mut s = crate::csv_text::CsvText::new(
            "kernel,dim,label,extent,tile,bound,tiles,default,fits_vmem,total_ns,mxu_ns,vpu_ns,\
             xlu_ns,hbm_ns,overhead_ns,hbm_bytes,vmem_bytes,steps,bottleneck",
        );
        for r in &self.rows {
            let (bound, tiles) = match &r.bound {
                Some((f, b)) => (f.clone(), b.to_string()),
                None => (String::new(), String::new()),
            };
            let mut row = vec![
                self.kernel.to_string(),
                r.dim.to_string(),
                self.labels[r.dim].to_string(),
                self.extents[r.dim].to_string(),
                r.tile.to_string(),
                bound,
                tiles,
                r.is_default.to_string(),
                r.estimate.is_some().to_string(),
            ];
            let vmem = r.vmem_bytes.to_string();
            match &r.estimate {
                Some(e) => row.extend([
                    e.total_ns.to_string(),
                    e.mxu_ns.to_string(),
                    e.vpu_ns.to_string(),
                    e.xlu_ns.to_string(),
                    e.hbm_ns.to_string(),
                    e.overhead_ns.to_string(),
                    e.hbm_bytes.to_string(),
                    vmem,
                    e.steps.to_string(),
                    format!("{:?}", e.bottleneck),
                ]),
                None => {
                    row.extend(std::iter::repeat_n(String::new(), 7));
                    row.extend([vmem, String::new(), String::new()]);
                }
            }
            s.row(row);
        }
        s.finish()
    }
}

// ---------------------------------------------------------------------------
// Layout sweeps

/// Which tensor of a configurable node a layout sweep permutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Tensor {
    Output,
    /// Operand 0.
    Input,
    /// Operand 1 (convolution filter / dot right-hand side).
    Kernel,
}

impl Tensor {
    pub fn name(self) -> &'static str {
        match self {
            Tensor::Output => "output",
            Tensor::Input => "input",
            Tensor::Kernel => "kernel",
        }
    }
}

/// One layout evaluated in a layout sweep.
#[derive(Debug, Clone, Serialize)]
pub struct LayoutRow {
    /// `minor_to_major` given to the tensor; empty = the compiler's choice.
    pub layout: Vec<i64>,
    /// Whole-program runtime, ns.
    pub total_ns: f64,
    /// `copy` instructions layout assignment inserted.
    pub copies: usize,
    /// Kernels of the compiled program.
    pub kernels: usize,
}

/// A layout sweep of one tensor of one node.
#[derive(Debug, Clone, Serialize)]
pub struct LayoutSweep {
    pub node: String,
    pub opcode: String,
    pub tensor: Tensor,
    /// Logical dims of the tensor.
    pub dims: Vec<i64>,
    /// Its layout in the input module.
    pub input_layout: Vec<i64>,
    pub target: String,
    /// Row 0: the compiler's choice; then every permutation in lexicographic order.
    pub rows: Vec<LayoutRow>,
}

/// Every permutation of `0..n`, in lexicographic order.
pub fn permutations(n: usize) -> Vec<Vec<i64>> {
    let mut p: Vec<i64> = (0..n as i64).collect();
    let mut out = vec![p.clone()];
    loop {
        // next permutation (Knuth's algorithm L)
        let Some(i) = (1..p.len()).rev().find(|&i| p[i - 1] < p[i]) else {
            return out;
        };
        let j = (i..p.len()).rev().find(|&j| p[j] > p[i - 1]).unwrap_or(i);
        p.swap(i - 1, j);
        p[i..].reverse();
        out.push(p.clone());
    }
}

/// Recompile `module` under `base` with every layout of `tensor` of `node` and
/// estimate the whole program on `target` (configurations in parallel; the rows do not
/// depend on the thread count). `progress(total)` is called once per finished layout,
/// with the number of layouts.
pub fn layout_sweep(
    module: &Module,
    base: &CompilationConfig,
    node: &str,
    tensor: Tensor,
    target: &TpuTarget,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<LayoutSweep, SweepError> {
    let node = node.trim_start_matches('%');
    let Some((ci, id)) = module
        .computations
        .values()
        .enumerate()
        .find_map(|(ci, c)| c.find(node).map(|id| (ci, id)))
    else {
        return Err(SweepError::UnknownNode(node.to_string()));
    };
    let c = module.comp(ci);
    let ins = c.instr(id);
    if !configurable_nodes(module)
        .iter()
        .any(|&(cj, j, _)| cj == ci && j == id)
    {
        return Err(SweepError::NotConfigurable {
            node: node.to_string(),
            opcode: ins.opcode.name().to_string(),
        });
    }
    let shape = match tensor {
        Tensor::Output => Some(&*ins.shape),
        Tensor::Input => c.operand(id, 0).map(|o| &*c.instr(o).shape),
        Tensor::Kernel if ins.opcode != Opcode::Reshape => {
            c.operand(id, 1).map(|o| &*c.instr(o).shape)
        }
        Tensor::Kernel => None,
    };
    let Some(arr) = shape.and_then(|s| s.as_array()) else {
        return Err(SweepError::NoTensor {
            node: node.to_string(),
            opcode: ins.opcode.name().to_string(),
            tensor: tensor.name(),
            hint: if tensor == Tensor::Kernel {
                " (the kernel is operand 1 of a convolution or dot)"
            } else {
                ""
            },
        });
    };
    let rank = arr.rank();
    if rank > 6 {
        return Err(SweepError::RankTooHigh {
            node: node.to_string(),
            tensor: tensor.name(),
            rank,
        });
    }
    let prepared = PreparedModule::new(module)?;
    // the layouts of one tensor share most kernels: lowered and evaluated once
    let memo = KernelMemo::new(module, target);
    let mut layouts = vec![Vec::new()];
    layouts.extend(permutations(rank));
    let total = layouts.len();
    // one layout a task: no core waits on a long share of them
    let rows: Vec<Result<LayoutRow, SweepError>> = layouts
        .into_par_iter()
        .with_max_len(1)
        .map(|layout| {
            let cfg = with_layout(base, node, tensor, &layout);
            let compiled = compile_program_with(&prepared, &cfg, Some(&memo))?;
            let total_ns = compiled
                .program
                .total_ns(target, &tile_overrides(&compiled.kernels))?;
            progress(total);
            Ok(LayoutRow {
                layout,
                total_ns,
                copies: compiled.stats.copies_inserted,
                kernels: compiled.kernels.len(),
            })
        })
        .collect();
    Ok(LayoutSweep {
        node: node.to_string(),
        opcode: ins.opcode.name().to_string(),
        tensor,
        dims: arr.dims.to_vec(),
        input_layout: arr.minor_to_major().to_vec(),
        target: target.name.clone(),
        rows: rows.into_iter().collect::<Result<_, _>>()?,
    })
}

/// `base` with `tensor` of `node` laid out as `layout` (empty = compiler's choice); the
/// node's other tensors keep what `base` gave them.
fn with_layout(
    base: &CompilationConfig,
    node: &str,
    tensor: Tensor,
    layout: &[i64],
) -> CompilationConfig {
    let mut cfg = base.clone();
    let named =
        |e: &LayoutEntry| matches!(&e.node, NodeRef::Name(n) if n.trim_start_matches('%') == node);
    let mut entry = match cfg.layout.iter().position(named) {
        Some(i) => cfg.layout.remove(i),
        None => LayoutEntry {
            node: NodeRef::Name(node.to_string()),
            output: Vec::new(),
            input: Vec::new(),
            kernel: Vec::new(),
        },
    };
    let slot = match tensor {
        Tensor::Output => &mut entry.output,
        Tensor::Input => &mut entry.input,
        Tensor::Kernel => &mut entry.kernel,
    };
    *slot = layout.to_vec();
    cfg.layout.push(entry);
    cfg
}

/// `{3,2,1,0}`, or `compiler` for the compiler's choice.
pub fn layout_text(layout: &[i64]) -> String {
    if layout.is_empty() {
        return "compiler".into();
    }
    let v: Vec<String> = layout.iter().map(|d| d.to_string()).collect();
    format!("{{{}}}", v.join(","))
}

impl LayoutSweep {
    /// Runtime of the compiler's choice (row 0), ns.
    pub fn baseline_ns(&self) -> f64 {
        self.rows.first().map(|r| r.total_ns).unwrap_or(0.0)
    }

    /// CSV: one line per row.
    pub fn to_csv(&self) -> String {
        let mut s =
            crate::csv_text::CsvText::new("node,tensor,layout,total_ns,vs_compiler,copies,kernels");
        let b = self.baseline_ns();
        for r in &self.rows {
            s.row([
                self.node.to_string(),
                self.tensor.name().to_string(),
                layout_text(&r.layout),
                r.total_ns.to_string(),
                (if b > 0.0 { r.total_ns / b } else { 0.0 }).to_string(),
                r.copies.to_string(),
                r.kernels.to_string(),
            ]);
        }
        s.finish()
    }
}
