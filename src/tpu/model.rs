//! The analytical kernel cost model (formulas in `docs/cost-model.md`).
//!
//! `estimate` is allocation-free: all per-dim state lives in fixed stack
//! arrays of [`MAX_DIMS`]; the optional [`Derivation`] that `explain` has filled is the
//! only thing that allocates.

use serde::{Deserialize, Serialize};

use super::derivation::{
    derive, Derivation, DimRole, GridDim, GridFit, InputTraffic, MxuFacts, OutputTraffic, Pipeline,
    Traffic,
};
use super::error::ModelError;
use super::kernel::{
    storage_bits, DimMap, InputDesc, KernelDesc, KernelKind, MxuPrecision, MxuRole, OpCounts,
    ReduceAxis, ReductionKind, TensorDesc, MAX_DIMS,
};
use super::target::TpuTarget;
use super::tile::{resolve_sizes, TileConfig};

/// Inputs whose fetch fractions are cached on the stack; more are recomputed.
const CACHED_INPUTS: usize = 16;
/// Distinct tile shapes whose per-step results are kept on the stack.
const STORED_COMBOS: usize = 16;
/// Memoised DMA sizes per evaluation (the same tile sizes recur).
const DMA_MEMO: usize = 8;

/// What limits the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Bottleneck {
    /// Matrix unit.
    Mxu,
    /// Vector unit.
    Vpu,
    /// Cross-lane unit (lane reductions, transposes).
    Xlu,
    /// HBM bandwidth.
    Hbm,
    /// Fixed costs (grid steps, launch, dispatch, MXU fill).
    Overhead,
}

/// Result of evaluating one kernel under one tile config (all times in ns).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Predicted kernel time.
    pub total_ns: f64,
    /// Σ over steps of MXU busy time.
    pub mxu_ns: f64,
    /// Σ over steps of VPU busy time.
    pub vpu_ns: f64,
    /// Σ over steps of XLU busy time.
    pub xlu_ns: f64,
    /// Σ of all DMA time (HBM↔VMEM) at the achievable bandwidth.
    pub hbm_ns: f64,
    /// Σ over steps of max(mxu, vpu, xlu).
    pub compute_ns: f64,
    /// Steady-state time: Σ over steps of max(compute, overlapped DMA),
    /// after the megacore split.
    pub pipelined_ns: f64,
    /// Un-overlapped DMA of the first step's inputs.
    pub prologue_ns: f64,
    /// Un-overlapped write of the last output tile.
    pub epilogue_ns: f64,
    /// MXU pipeline fill + drain (2R + C − 2 cycles, once per kernel).
    pub mxu_fill_ns: f64,
    /// steps × per-step overhead (after the megacore split).
    pub step_overhead_ns: f64,
    /// Per-kernel launch overhead.
    pub launch_ns: f64,
    /// Host dispatch overhead (0 unless the target enables it).
    pub dispatch_ns: f64,
    /// step_overhead + launch + dispatch + mxu_fill.
    pub overhead_ns: f64,
    /// Largest of mxu / vpu / xlu / hbm / overhead.
    pub bottleneck: Bottleneck,
    /// Grid steps (product of per-dim tile counts).
    pub steps: u64,
    /// Steps on the critical core (steps / cores for megacore splits).
    pub steps_per_core: u64,
    /// Resolved tile sizes per iteration dim (first `n_iter` entries valid).
    pub tile: [i64; MAX_DIMS],
    /// Tiles per iteration dim.
    pub grid: [i64; MAX_DIMS],
    /// Number of iteration dims.
    pub n_iter: usize,
    /// Bytes read from HBM including re-fetches and layout padding.
    pub hbm_read_bytes: f64,
    /// Bytes written to HBM including layout padding.
    pub hbm_write_bytes: f64,
    /// hbm_read_bytes + hbm_write_bytes.
    pub hbm_bytes: f64,
    /// Logical bytes of all operands and the output, each counted once.
    pub min_bytes: f64,
    /// VMEM footprint (double-buffered tiles + f32 accumulator).
    pub vmem_bytes: u64,
    /// Logical FLOPs of the kernel.
    pub flops: f64,
    /// FLOPs the MXU executes including padding to hardware tiles.
    pub padded_flops: f64,
    /// flops / padded_flops (1 for non-MXU kernels).
    pub mxu_utilization: f64,
}

/// Cycles per vreg for an op mix.
fn op_cycles(ops: &OpCounts, t: &TpuTarget) -> f64 {
    let alus = f64::from(t.alus_per_lane);
    (ops.cheap + ops.expensive * t.vpu_expensive_ops) / alus + ops.medium * t.vpu_medium_cycles
}

fn round_up(x: i64, a: i64) -> i64 {
    if a <= 1 {
        x
    } else {
        (x + a - 1) / a * a
    }
}

fn ceil_div(x: i64, a: i64) -> i64 {
    if a <= 0 {
        x
    } else {
        (x + a - 1) / a
    }
}

/// Extent of input dim `i` (size `size`, map `m`) for iteration tile `e`.
#[inline]
fn input_extent(m: &DimMap, size: i64, e: &[i64]) -> i64 {
    let at = |d: usize| e.get(d).copied().unwrap_or(1);
    match *m {
        DimMap::Iter(d) => at(d).min(size),
        DimMap::Window {
            out,
            win,
            stride,
            dilation,
        } => ((at(out) - 1) * stride + (at(win) - 1) * dilation + 1).min(size),
        DimMap::Full => size,
        DimMap::Outer { iter, inner } => ceil_div(at(iter), inner).min(size),
    }
}

/// Elements of a tile of `rank` dims after tiled-layout padding: the
/// second-minor dim rounds up to the sublane tile, the minor dim to 128
/// lanes; rank-1 arrays round up to one (sublane tile × 128) tile.
#[inline]
fn padded_elems(rank: usize, ext: impl Fn(usize) -> i64, sub: i64, lanes: i64) -> i64 {
    match rank {
        0 => 1,
        1 => round_up(ext(0), sub * lanes),
        _ => {
            let mut p = 1i64;
            for i in 0..rank - 2 {
                p = p.saturating_mul(ext(i));
            }
            p.saturating_mul(round_up(ext(rank - 2), sub))
                .saturating_mul(round_up(ext(rank - 1), lanes))
        }
    }
}

/// Padded bytes of the tile of `inp` needed for iteration tile `e`.
#[inline]
pub(crate) fn input_tile_bytes(inp: &InputDesc, e: &[i64], t: &TpuTarget) -> f64 {
    // both as plain slices: the closure below indexes them once per dim
    let (dims, maps): (&[i64], &[DimMap]) = (&inp.tensor.dims, &inp.dims);
    let bits = storage_bits(inp.tensor.elem_bits);
    let ext = |i: usize| match (maps.get(i), dims.get(i)) {
        (Some(m), Some(&s)) => input_extent(m, s, e),
        _ => 1,
    };
    let el = padded_elems(dims.len(), ext, t.sublane_tile(bits), i64::from(t.lanes));
    el as f64 * f64::from(bits) / 8.0
}

/// Padded bytes of the output tile `e[..r]` at element width `bits`.
#[inline]
fn out_tile_bytes(out: &TensorDesc, e: &[i64], bits: u32, t: &TpuTarget) -> f64 {
    let r = out.dims.len();
    let sb = storage_bits(bits);
    let ext = |i: usize| e.get(i).copied().unwrap_or(1);
    let el = padded_elems(r, ext, t.sublane_tile(sb), i64::from(t.lanes));
    el as f64 * f64::from(sb) / 8.0
}

/// f32 vregs covering the output tile (VPU work unit: elementwise math runs in 32-bit).
#[inline]
fn out_vregs(r: usize, e: &[i64], t: &TpuTarget) -> f64 {
    let ext = |i: usize| e.get(i).copied().unwrap_or(1);
    let el = padded_elems(r, ext, i64::from(t.sublanes), i64::from(t.lanes));
    el as f64 / f64::from(t.sublanes * t.lanes)
}

/// VMEM footprint of per-iteration-dim tile sizes `t`: 2 buffers per input
/// tile and output tile, plus an f32 accumulator tile when the kernel has
/// reduction dims.
pub(crate) fn vmem_footprint(desc: &KernelDesc, target: &TpuTarget, t: &[i64]) -> u64 {
    footprint_with(desc, target, t, |_, inp| input_tile_bytes(inp, t, target))
}

/// [`vmem_footprint`] with the tile bytes of input `k` given by `input(k, inp)` (which
/// must be [`input_tile_bytes`] at `t`, perhaps remembered): the one sum, in one order.
#[inline]
pub(crate) fn footprint_with(
    desc: &KernelDesc,
    target: &TpuTarget,
    t: &[i64],
    mut input: impl FnMut(usize, &InputDesc) -> f64,
) -> u64 {
    let mut bytes = 0.0;
    for (k, inp) in desc.inputs.iter().enumerate() {
        bytes += 2.0 * input(k, inp);
    }
    bytes += 2.0 * out_tile_bytes(&desc.output, t, desc.output.elem_bits, target);
    if !desc.reduction_dims.is_empty() {
        bytes += out_tile_bytes(&desc.output, t, 32, target);
    }
    bytes.min(u64::MAX as f64) as u64
}

/// Iteration dim `d` as a bit of an [`input_reads`] mask (none for `d` ≥ 64: a tile
/// has at most [`super::kernel::MAX_DIMS`] dims).
#[inline]
pub(crate) fn dim_bit(d: usize) -> u64 {
    if d < 64 {
        1u64 << d
    } else {
        0
    }
}

/// The iteration dims (below 64) whose tile size [`input_tile_bytes`] of `inp` reads, as
/// bits: its bytes are the same at every tile that differs only in other dims.
pub(crate) fn input_reads(inp: &InputDesc) -> u64 {
    inp.dims
        .iter()
        .take(inp.tensor.dims.len())
        .map(|m| match *m {
            DimMap::Iter(d) => dim_bit(d),
            DimMap::Window { out, win, .. } => dim_bit(out) | dim_bit(win),
            DimMap::Full => 0,
            DimMap::Outer { iter, .. } => dim_bit(iter),
        })
        .fold(0, |a, b| a | b)
}

/// Number of times the block of `inp` is fetched: the product of grid counts
/// of all loops up to (and including) the innermost loop whose index changes
/// the block. Loops are iteration dims in order (output major→minor, then
/// reduction dims); consecutive identical blocks are not re-fetched.
fn fetch_count(inp: &InputDesc, g: &[i64]) -> f64 {
    let mut jstar: Option<usize> = None;
    for (d, &gd) in g.iter().enumerate() {
        if gd > 1 && inp.depends_on(d) {
            jstar = Some(d);
        }
    }
    match jstar {
        None => 1.0,
        Some(j) => g[..=j].iter().map(|&x| x as f64).product(),
    }
}

/// Per-step DMA time of a transfer of `bytes` at the size-dependent bandwidth.
#[inline]
fn dma_ns(bytes: f64, bw: f64, t: &TpuTarget) -> f64 {
    if bytes <= 0.0 {
        0.0
    } else {
        bytes / (bw * t.hbm_efficiency_at(bytes)) * 1e9
    }
}

struct Ctx<'a> {
    desc: &'a KernelDesc,
    target: &'a TpuTarget,
    n: usize,
    r: usize,
    g: [i64; MAX_DIMS],
    frac: [f64; CACHED_INPUTS],
    frac_out: f64,
    steps: f64,
    bw: f64,
    k_tiled: bool,
    /// [`KernelDesc::has_big_window`]: window taps fold into K.
    big_window: bool,
    memo: [(f64, f64); DMA_MEMO],
    memo_len: usize,
}

impl Ctx<'_> {
    /// DMA time of one transfer, memoised by size.
    fn dma(&mut self, bytes: f64) -> f64 {
        for &(b, ns) in &self.memo[..self.memo_len] {
            if b == bytes {
                return ns;
            }
        }
        let ns = dma_ns(bytes, self.bw, self.target);
        let slot = self.memo_len % DMA_MEMO;
        self.memo[slot] = (bytes, ns);
        self.memo_len = (self.memo_len + 1).min(DMA_MEMO);
        ns
    }

    fn input_frac(&self, k: usize, inp: &InputDesc) -> f64 {
        match self.frac.get(k) {
            Some(&f) => f,
            None => fetch_count(inp, &self.g[..self.n]) / self.steps,
        }
    }

    /// (steady DMA ns per step weighted by fetch fraction, read bytes, write bytes).
    /// `full` holds the input bytes when `e` is the full tile.
    fn step_memory(&mut self, e: &[i64], full: Option<&[f64; CACHED_INPUTS]>) -> (f64, f64, f64) {
        let mut ns = 0.0;
        let mut rd = 0.0;
        let desc = self.desc;
        for (k, inp) in desc.inputs.iter().enumerate() {
            let b = match full.and_then(|f| f.get(k)) {
                Some(&b) => b,
                None => input_tile_bytes(inp, e, self.target),
            };
            let f = self.input_frac(k, inp);
            ns += f * self.dma(b);
            rd += f * b;
        }
        let ob = out_tile_bytes(&desc.output, e, desc.output.elem_bits, self.target);
        ns += self.frac_out * self.dma(ob);
        (ns, rd, self.frac_out * ob)
    }

    /// (MXU cycles, padded MXU flops) of one step with tile `e`.
    fn mxu_step(&self, e: &[i64]) -> (f64, f64) {
        let KernelKind::Mxu(spec) = &self.desc.kind else {
            return (0.0, 0.0);
        };
        let t = self.target;
        let rr = i64::from(t.mxu_size);
        let (mut m_other, mut m_in, mut n_other, mut n_in, mut batch) =
            (1i64, 1i64, 1i64, 1i64, 1i64);
        let (mut seen_m, mut seen_n) = (false, false);
        // innermost dim of each role pads; others multiply
        for d in (0..self.r).rev() {
            let x = e[d];
            match spec.roles.get(d) {
                Some(MxuRole::M) => {
                    if seen_m {
                        m_other *= x
                    } else {
                        m_in = x;
                        seen_m = true
                    }
                }
                Some(MxuRole::N) => {
                    if seen_n {
                        n_other *= x
                    } else {
                        n_in = x;
                        seen_n = true
                    }
                }
                _ => batch *= x,
            }
        }
        let (mut k_other, mut k_in, mut window, mut seen_k) = (1i64, 1i64, 1i64, false);
        for d in (self.r..self.n).rev() {
            let x = e[d];
            match self.desc.reduction_dims.get(d - self.r).map(|q| q.kind) {
                Some(ReductionKind::Contraction) => {
                    if seen_k {
                        k_other *= x
                    } else {
                        k_in = x;
                        seen_k = true
                    }
                }
                _ => window *= x,
            }
        }
        if self.big_window {
            // A filter gradient: the window taps and the input features are one
            // contraction (im2col), not one pass per tap with K padded to the array.
            k_in *= window;
            window = 1;
        }
        let m_pad = m_other * round_up(m_in, i64::from(t.sublanes));
        let n_pad = n_other * round_up(n_in, rr);
        let k_pad = k_other * round_up(k_in, rr);
        let folds = (batch * window) as f64
            * (k_pad / rr) as f64
            * (n_pad / rr) as f64
            * spec.precision.passes();
        let per_mxu = (folds / f64::from(t.mxus_per_core)).ceil();
        let speed = if spec.precision == MxuPrecision::Int8 {
            t.int8_speedup()
        } else {
            1.0
        };
        let cycles = per_mxu * (m_pad.max(rr) as f64) / speed;
        let pflops = 2.0 * (batch * window) as f64 * m_pad as f64 * n_pad as f64 * k_pad as f64;
        (cycles, pflops)
    }

    /// (VPU cycles, XLU cycles) of one step with tile `e`.
    fn vector_step(&self, e: &[i64]) -> (f64, f64) {
        let t = self.target;
        let desc = self.desc;
        let alus = f64::from(t.alus_per_lane);
        let sub = i64::from(t.sublanes);
        let lanes = i64::from(t.lanes);
        let ov = out_vregs(self.r, e, t);
        let mut vpu = ov * op_cycles(&desc.vpu.per_output_element, t);
        let mut xlu = 0.0;
        let is_mxu = matches!(desc.kind, KernelKind::Mxu(_));
        if is_mxu {
            if self.k_tiled {
                vpu += ov / alus; // acc += partial product
            }
            return (vpu, xlu);
        }
        // Work layout: input 0 for reductions, else the output.
        let (mut lane_d, mut sub_d): (Option<usize>, Option<usize>) = if self.r >= 2 {
            (Some(self.r - 1), Some(self.r - 2))
        } else if self.r == 1 {
            (Some(0), None)
        } else {
            (None, None)
        };
        if self.n > self.r {
            if let Some(i0) = desc.inputs.first() {
                let rk = i0.dims.len();
                if rk >= 1 {
                    if let Some(DimMap::Iter(d)) = i0.dims.get(rk - 1) {
                        lane_d = Some(*d);
                    }
                }
                sub_d = None;
                if rk >= 2 {
                    if let Some(DimMap::Iter(d)) = i0.dims.get(rk - 2) {
                        sub_d = Some(*d);
                    }
                }
            }
        }
        if self.n > self.r {
            let mut total = 1f64;
            for &x in &e[..self.n] {
                total *= x as f64;
            }
            let le = lane_d.map(|d| e[d]).unwrap_or(1);
            let se = sub_d.map(|d| e[d]).unwrap_or(1);
            let major = (total / (le as f64 * se as f64)).max(1.0);
            let lane_v = ceil_div(le, lanes) as f64;
            let sub_v = ceil_div(se, sub) as f64;
            let point_vregs = major * sub_v * lane_v;
            vpu += point_vregs * op_cycles(&desc.vpu.per_reduction_point, t);
            let mut has_sub = false;
            let mut has_lane = false;
            for q in &desc.reduction_dims {
                match q.kind {
                    ReductionKind::Reduce(ReduceAxis::Sublanes) => has_sub = true,
                    ReductionKind::Reduce(ReduceAxis::Lanes) => has_lane = true,
                    _ => {}
                }
            }
            // after vreg-wise accumulation: one vreg per (major, lane group)
            // needs a sublane reduce, one per (major, sublane group) a lane reduce
            if has_sub {
                vpu += major * lane_v * t.sublane_reduce_ops / alus;
            }
            if has_lane {
                let groups = if has_sub { 1.0 } else { sub_v };
                xlu += major * groups * t.xlu_lane_reduce_cycles;
            }
        }
        // relayout of inputs whose minor / second-minor dim differs from the work layout
        for inp in &desc.inputs {
            let rk = inp.dims.len();
            if rk == 0 {
                continue;
            }
            let minor = match inp.dims.get(rk - 1) {
                Some(DimMap::Iter(d)) => Some(*d),
                _ => None,
            };
            let second = if rk >= 2 {
                match inp.dims.get(rk - 2) {
                    Some(DimMap::Iter(d)) => Some(*d),
                    _ => None,
                }
            } else {
                None
            };
            let ext_of = |d: Option<usize>| d.map(|d| e[d]).unwrap_or(1);
            let bytes = input_tile_bytes(inp, e, t);
            let vregs = (bytes / f64::from(4 * t.sublanes * t.lanes)).max(1.0);
            if minor.is_some() && minor != lane_d && ext_of(minor) > 1 && ext_of(lane_d) > 1 {
                xlu += vregs * t.xlu_transpose_cycles;
            } else if second.is_some() && second != sub_d && ext_of(second) > 1 && ext_of(sub_d) > 1
            {
                vpu += vregs / alus;
            }
        }
        (vpu, xlu)
    }
}

/// Estimates one kernel under one tile config on `target`.
///
/// Empty bounds lists take the compiler default ([`super::tile::default_tile`]).
/// Returns [`ModelError::Infeasible`] when the double-buffered tiles do not
/// fit the scoped VMEM limit; never clamps a config silently.
pub fn estimate(
    desc: &KernelDesc,
    cfg: &TileConfig,
    target: &TpuTarget,
) -> Result<Estimate, ModelError> {
    evaluate(desc, cfg, target, None)
}

/// [`estimate`] of a description that is valid ([`KernelDesc::validate`]): a lowered
/// kernel's, checked once when it was lowered
/// ([`crate::kernels::LoweredKernel::desc`]).
pub(crate) fn estimate_valid(
    desc: &KernelDesc,
    cfg: &TileConfig,
    target: &TpuTarget,
) -> Result<Estimate, ModelError> {
    evaluate_valid(desc, cfg, target, None)
}

/// Shared implementation of `estimate` and `explain`.
pub(crate) fn evaluate(
    desc: &KernelDesc,
    cfg: &TileConfig,
    target: &TpuTarget,
    trace: Option<&mut Derivation>,
) -> Result<Estimate, ModelError> {
    desc.validate()?;
    evaluate_valid(desc, cfg, target, trace)
}

/// [`evaluate`] of a valid description (the tile arithmetic indexes arrays of
/// [`MAX_DIMS`] by its iteration dims).
fn evaluate_valid(
    desc: &KernelDesc,
    cfg: &TileConfig,
    target: &TpuTarget,
    mut trace: Option<&mut Derivation>,
) -> Result<Estimate, ModelError> {
    let mut tile = [0i64; MAX_DIMS];
    resolve_sizes(desc, cfg, target, &mut tile)?;
    let n = desc.n_iter();
    let r = desc.output_rank();
    let mut ext = [1i64; MAX_DIMS];
    let mut g = [1i64; MAX_DIMS];
    let mut rem = [1i64; MAX_DIMS];
    let mut steps = 1f64;
    for d in 0..n {
        ext[d] = desc.iter_extent(d);
        g[d] = ceil_div(ext[d], tile[d]);
        rem[d] = ext[d] - (g[d] - 1) * tile[d];
        steps *= g[d] as f64;
    }
    // Full-tile input bytes, reused for the footprint, the prologue and the
    // first tile shape (same formula as `vmem_footprint`).
    let mut full_in = [0.0f64; CACHED_INPUTS];
    let mut vmem_f = 0.0;
    for (k, inp) in desc.inputs.iter().enumerate() {
        let b = input_tile_bytes(inp, &tile[..n], target);
        if let Some(slot) = full_in.get_mut(k) {
            *slot = b;
        }
        vmem_f += 2.0 * b;
    }
    vmem_f += 2.0 * out_tile_bytes(&desc.output, &tile[..n], desc.output.elem_bits, target);
    if !desc.reduction_dims.is_empty() {
        vmem_f += out_tile_bytes(&desc.output, &tile[..n], 32, target);
    }
    let vmem = vmem_f.min(u64::MAX as f64) as u64;
    if let Some(tr) = trace.as_deref_mut() {
        tr.grid = Some(GridFit {
            dims: (0..n)
                .map(|d| GridDim {
                    role: if d < r {
                        DimRole::Output
                    } else {
                        DimRole::Reduction
                    },
                    extent: ext[d],
                    tile: tile[d],
                    tiles: g[d],
                    last_tile: rem[d],
                })
                .collect(),
            steps,
            vmem_bytes: vmem,
            vmem_limit_bytes: target.vmem_limit_bytes,
            accumulator: !desc.reduction_dims.is_empty(),
            fits: vmem <= target.vmem_limit_bytes,
        });
    }
    if vmem > target.vmem_limit_bytes {
        return Err(ModelError::Infeasible {
            needed: vmem,
            available: target.vmem_limit_bytes,
        });
    }

    let mut ctx = Ctx {
        desc,
        target,
        n,
        r,
        g,
        frac: [0.0; CACHED_INPUTS],
        frac_out: 1.0,
        steps,
        bw: target.core_hbm_bandwidth(),
        k_tiled: (r..n).any(|d| g[d] > 1),
        big_window: desc.has_big_window(),
        memo: [(0.0, 0.0); DMA_MEMO],
        memo_len: 0,
    };
    for (k, inp) in desc.inputs.iter().enumerate().take(CACHED_INPUTS) {
        ctx.frac[k] = fetch_count(inp, &g[..n]) / steps;
    }
    let out_blocks: f64 = g[..r].iter().map(|&x| x as f64).product();
    ctx.frac_out = out_blocks / steps;

    if let Some(tr) = trace.as_deref_mut() {
        tr.traffic = Some(Traffic {
            bandwidth_bytes_per_s: ctx.bw,
            inputs: desc
                .inputs
                .iter()
                .map(|inp| {
                    let b = input_tile_bytes(inp, &tile[..n], target);
                    InputTraffic {
                        dims: inp.tensor.dims.to_vec(),
                        elem_bits: inp.tensor.elem_bits,
                        tile_bytes: b,
                        fetches: fetch_count(inp, &g[..n]),
                        dma_efficiency: target.hbm_efficiency_at(b),
                    }
                })
                .collect(),
            output: OutputTraffic {
                dims: desc.output.dims.to_vec(),
                elem_bits: desc.output.elem_bits,
                tile_bytes: out_tile_bytes(&desc.output, &tile[..n], desc.output.elem_bits, target),
                writes: out_blocks,
            },
        });
    }

    // Partial dims: last tile smaller than the others.
    let mut partial = [0usize; MAX_DIMS];
    let mut np = 0usize;
    for d in 0..n {
        if g[d] > 1 && rem[d] != tile[d] {
            partial[np] = d;
            np += 1;
        }
    }
    let combos = 1usize << np;

    // One pass over the distinct tile shapes: DMA and compute per step.
    let mxu_hz = target.mxu_rate_hz();
    let clk = target.clock_hz;
    let (mut mem_total, mut rd_total, mut wr_total) = (0.0, 0.0, 0.0);
    let (mut mxu_ns, mut vpu_ns, mut xlu_ns, mut compute_ns, mut pflops) =
        (0.0, 0.0, 0.0, 0.0, 0.0);
    let mut stored = [(0.0f64, 0.0f64, 0.0f64); STORED_COMBOS];
    let mut e = [1i64; MAX_DIMS];
    let eval_combo =
        |ctx: &mut Ctx, e: &[i64], mask: usize| -> (f64, f64, f64, f64, f64, f64, f64) {
            let (mem, rd, wr) = ctx.step_memory(e, (mask == 0).then_some(&full_in));
            let (mc, pf) = ctx.mxu_step(e);
            let (vc, xc) = ctx.vector_step(e);
            (
                mem,
                rd,
                wr,
                mc / mxu_hz * 1e9,
                vc / clk * 1e9,
                xc / clk * 1e9,
                pf,
            )
        };
    for mask in 0..combos {
        let count = combo(&tile, &g, &rem, n, &partial[..np], mask, &mut e);
        let (mem, rd, wr, m, v, x, pf) = eval_combo(&mut ctx, &e[..n], mask);
        let c = m.max(v).max(x);
        mem_total += count * mem;
        rd_total += count * rd;
        wr_total += count * wr;
        mxu_ns += count * m;
        vpu_ns += count * v;
        xlu_ns += count * x;
        compute_ns += count * c;
        pflops += count * pf;
        if let Some(slot) = stored.get_mut(mask) {
            *slot = (count, c, mem);
        }
    }
    // Prologue: all inputs of the first step; epilogue: the last output tile.
    let mut prologue = 0.0;
    for (k, inp) in desc.inputs.iter().enumerate() {
        let b = match full_in.get(k) {
            Some(&b) => b,
            None => input_tile_bytes(inp, &tile[..n], target),
        };
        prologue += ctx.dma(b);
    }
    let epilogue = ctx.dma(out_tile_bytes(
        &desc.output,
        &rem[..n],
        desc.output.elem_bits,
        target,
    ));
    let fixed_mem = (prologue + epilogue).min(mem_total);
    let steady_scale = if mem_total > 0.0 {
        (mem_total - fixed_mem) / mem_total
    } else {
        0.0
    };
    // Steady state: Σ count · max(compute, DMA scaled to exclude prologue/epilogue).
    let mut piped = 0.0;
    for mask in 0..combos {
        let (count, c, mem) = match stored.get(mask) {
            Some(&s) => s,
            None => {
                let count = combo(&tile, &g, &rem, n, &partial[..np], mask, &mut e);
                let (mem, _, _, m, v, x, _) = eval_combo(&mut ctx, &e[..n], mask);
                (count, m.max(v).max(x), mem)
            }
        };
        piped += count * c.max(mem * steady_scale);
    }

    // Megacore: parallel (output) tiles are split across the cores.
    let cores = f64::from(target.device_cores());
    let core_factor = if cores > 1.0 && out_blocks >= 2.0 {
        (out_blocks / cores).ceil() / out_blocks
    } else {
        1.0
    };
    let steps_per_core = (steps * core_factor).round();
    let pipelined_ns = piped * core_factor;
    let step_overhead_ns = steps_per_core * target.grid_step_overhead_ns;
    let mxu_fill_ns = if matches!(desc.kind, KernelKind::Mxu(_)) {
        let rr = f64::from(target.mxu_size);
        (3.0 * rr - 2.0) / mxu_hz * 1e9
    } else {
        0.0
    };
    let launch_ns = target.kernel_launch_overhead_ns;
    let dispatch_ns = if target.include_host_dispatch {
        target.host_dispatch_overhead_ns
    } else {
        0.0
    };
    let overhead_ns = step_overhead_ns + launch_ns + dispatch_ns + mxu_fill_ns;
    let total_ns = pipelined_ns + fixed_mem + overhead_ns;
    let prologue_ns = prologue.min(mem_total);

    let mut bottleneck = Bottleneck::Mxu;
    let mut best = mxu_ns;
    for (b, v) in [
        (Bottleneck::Vpu, vpu_ns),
        (Bottleneck::Xlu, xlu_ns),
        (Bottleneck::Hbm, mem_total),
        (Bottleneck::Overhead, overhead_ns),
    ] {
        if v > best {
            best = v;
            bottleneck = b;
        }
    }
    let mut min_bytes = desc.output.bytes();
    for inp in &desc.inputs {
        min_bytes += inp.tensor.bytes();
    }
    let padded_flops = if matches!(desc.kind, KernelKind::Mxu(_)) {
        pflops
    } else {
        desc.flops
    };
    let mxu_utilization = if padded_flops > 0.0 {
        (desc.flops / padded_flops).min(1.0)
    } else {
        1.0
    };

    let est = Estimate {
        total_ns,
        mxu_ns,
        vpu_ns,
        xlu_ns,
        hbm_ns: mem_total,
        compute_ns,
        pipelined_ns,
        prologue_ns,
        epilogue_ns: fixed_mem - prologue_ns,
        mxu_fill_ns,
        step_overhead_ns,
        launch_ns,
        dispatch_ns,
        overhead_ns,
        bottleneck,
        steps: steps.min(u64::MAX as f64) as u64,
        steps_per_core: steps_per_core.min(u64::MAX as f64) as u64,
        tile,
        grid: g,
        n_iter: n,
        hbm_read_bytes: rd_total,
        hbm_write_bytes: wr_total,
        hbm_bytes: rd_total + wr_total,
        min_bytes,
        vmem_bytes: vmem,
        flops: desc.flops,
        padded_flops,
        mxu_utilization,
    };
    if let Some(tr) = trace {
        tr.pipeline = Some(Pipeline {
            estimate: est,
            tile_shapes: 1usize << np,
            mxu: match &desc.kind {
                KernelKind::Mxu(spec) => Some(MxuFacts {
                    arrays: target.mxus_per_core,
                    size: target.mxu_size,
                    rate_hz: target.mxu_rate_hz(),
                    precision: spec.precision,
                    passes: spec.precision.passes(),
                    big_window: desc.has_big_window(),
                }),
                _ => None,
            },
            steady_dma_scale: steady_scale,
            megacore_factor: core_factor,
            grid_step_overhead_ns: target.grid_step_overhead_ns,
            device_peak_flops: target.device_peak_bf16(),
        });
    }
    Ok(est)
}

/// Fills `e` with the tile extents of combination `mask` (bit i set = the
/// i-th partial dim takes its last, smaller tile) and returns how many grid
/// steps have exactly these extents.
#[inline]
fn combo(
    tile: &[i64; MAX_DIMS],
    g: &[i64; MAX_DIMS],
    rem: &[i64; MAX_DIMS],
    n: usize,
    partial: &[usize],
    mask: usize,
    e: &mut [i64; MAX_DIMS],
) -> f64 {
    let mut count = 1f64;
    let mut is_partial = 0u32;
    for &d in partial {
        is_partial |= 1 << d;
    }
    for d in 0..n {
        e[d] = tile[d];
        if is_partial & (1 << d) == 0 {
            count *= g[d] as f64;
        }
    }
    for (i, &d) in partial.iter().enumerate() {
        if mask & (1 << i) != 0 {
            e[d] = rem[d];
        } else {
            count *= (g[d] - 1) as f64;
        }
    }
    count
}

/// Full derivation of the estimate in words and numbers (teaching view): the text of
/// [`derive`]. Infeasible or invalid configs are explained too (the text ends with the
/// reason).
pub fn explain(desc: &KernelDesc, cfg: &TileConfig, target: &TpuTarget) -> String {
    derive(desc, cfg, target).to_string()
}
