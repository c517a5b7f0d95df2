//! Cost analysis with the semantics of XLA's `HloCostAnalysis` (2026), as JAX's
//! `compiled.cost_analysis()` reports it for CPU: `flops`, `transcendentals` and
//! `bytes accessed` per instruction, summed over the entry computation with called
//! computations folded in by their callers.
//!
//! Shape sizes are `ShapeUtil::ByteSizeOf` with 8-byte tuple pointers (or the padded
//! tiled size with [`ShapeSizeMode::Padded`]). The rules per opcode are listed in
//! `docs/analysis.md`.

use serde::Serialize;
use smallvec::SmallVec;
use std::ops::{Add, AddAssign};

use crate::ir::{
    ArrayShape, CallRole, CompId, Computation, FusionKind, InstrId, Instruction, Module, Opcode,
    Shape, Window,
};

/// The three properties of XLA's cost analysis. Custom-calls contribute −1 to
/// `flops` and `bytes_accessed` ("unknown"), exactly as XLA does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Cost {
    pub flops: f64,
    pub transcendentals: f64,
    pub bytes_accessed: f64,
}

impl Cost {
    /// Flops and transcendentals scaled by `k`, bytes dropped (XLA copies only the
    /// non-byte properties of `to_apply` computations into their callers).
    fn compute_times(self, k: f64) -> Cost {
        Cost {
            flops: self.flops * k,
            transcendentals: self.transcendentals * k,
            bytes_accessed: 0.0,
        }
    }

    fn max(self, o: Cost) -> Cost {
        Cost {
            flops: self.flops.max(o.flops),
            transcendentals: self.transcendentals.max(o.transcendentals),
            bytes_accessed: self.bytes_accessed.max(o.bytes_accessed),
        }
    }
}

impl Add for Cost {
    type Output = Cost;
    fn add(self, o: Cost) -> Cost {
        Cost {
            flops: self.flops + o.flops,
            transcendentals: self.transcendentals + o.transcendentals,
            bytes_accessed: self.bytes_accessed + o.bytes_accessed,
        }
    }
}

impl AddAssign for Cost {
    fn add_assign(&mut self, o: Cost) {
        *self = *self + o;
    }
}

/// How array sizes are measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ShapeSizeMode {
    /// `ShapeUtil::ByteSizeOf` (what JAX's CPU cost analysis uses).
    #[default]
    ByteSizeOf,
    /// Padded size of tiled layouts (XLA's `ArraySize`), for TPU-style layouts.
    Padded,
}

/// Options of the analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CostOptions {
    pub shape_size: ShapeSizeMode,
    /// Size of one tuple index-table entry (8 on 64-bit hosts).
    pub pointer_size: u64,
}

impl Default for CostOptions {
    fn default() -> Self {
        CostOptions {
            shape_size: ShapeSizeMode::ByteSizeOf,
            pointer_size: 8,
        }
    }
}

/// Costs of one entry-computation instruction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstrCost {
    pub computation: String,
    pub name: String,
    pub opcode: String,
    pub flops: f64,
    pub transcendentals: f64,
    pub bytes_accessed: f64,
}

/// Module totals and the per-instruction rows of the entry computation (whose sum
/// the totals are). Serialises with the keys `flops`, `transcendentals`,
/// `bytes_accessed` and `instructions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostReport {
    pub flops: f64,
    pub transcendentals: f64,
    pub bytes_accessed: f64,
    pub instructions: Vec<InstrCost>,
}

impl CostReport {
    /// The totals as a [`Cost`].
    pub fn total(&self) -> Cost {
        Cost {
            flops: self.flops,
            transcendentals: self.transcendentals,
            bytes_accessed: self.bytes_accessed,
        }
    }
}

/// Module totals (entry computation, callees folded in) with default options.
pub fn module_cost(m: &Module) -> Cost {
    let mut a = CostAnalyzer::new(m, CostOptions::default());
    a.computation(m.entry)
}

/// Totals and per-instruction rows with default options (XLA CPU semantics).
pub fn analyze_module(m: &Module) -> CostReport {
    analyze_module_with(m, &CostOptions::default())
}

/// Totals and per-instruction rows.
pub fn analyze_module_with(m: &Module, opts: &CostOptions) -> CostReport {
    let mut a = CostAnalyzer::new(m, *opts);
    let mut total = Cost::default();
    let mut rows = Vec::new();
    if let Some((_, entry)) = m.computations.get_index(m.entry) {
        rows.reserve(entry.order.len());
        for &id in &entry.order {
            let c = a.instruction(m.entry, id);
            total += c;
            let i = entry.instr(id);
            rows.push(InstrCost {
                computation: entry.name.clone(),
                name: i.name.to_string(),
                opcode: i.opcode_text(),
                flops: c.flops,
                transcendentals: c.transcendentals,
                bytes_accessed: c.bytes_accessed,
            });
        }
    }
    CostReport {
        flops: total.flops,
        transcendentals: total.transcendentals,
        bytes_accessed: total.bytes_accessed,
        instructions: rows,
    }
}

/// Shape-size functions under the analysis options.
#[derive(Clone, Copy)]
struct Sizer(CostOptions);

impl Sizer {
    fn array_size(&self, a: &ArrayShape) -> f64 {
        let data = match self.0.shape_size {
            ShapeSizeMode::ByteSizeOf => a.byte_size(),
            ShapeSizeMode::Padded => a.padded_byte_size(),
        };
        // Dynamic shapes carry their runtime sizes: one s32 per dimension.
        let meta = if a.dynamic_mask != 0 {
            4 * a.rank() as u64
        } else {
            0
        };
        (data + meta) as f64
    }

    /// XLA `GetShapeSize`: arrays by size, tuples by their index table only.
    fn size(&self, s: &Shape) -> f64 {
        match s {
            Shape::Array(a) => self.array_size(a),
            Shape::Tuple(v) => (v.len() as u64 * self.0.pointer_size) as f64,
            Shape::Buffer(b) => self.size(b),
        }
    }

    /// Σ over array leaves (tuple index tables excluded): the 2026 output size.
    fn leaf_size(&self, s: &Shape) -> f64 {
        match s {
            Shape::Array(a) => self.array_size(a),
            Shape::Tuple(v) => v.iter().map(|e| self.leaf_size(e)).sum(),
            Shape::Buffer(b) => self.leaf_size(b),
        }
    }
}

#[derive(Clone, Copy)]
enum Memo {
    Todo,
    InProgress,
    Done(Cost),
}

/// Cost analysis of one module with memoised computation totals: each called
/// computation is analysed once however many callers it has.
pub struct CostAnalyzer<'m> {
    m: &'m Module,
    opts: CostOptions,
    comps: Vec<Memo>,
    comps_compute: Vec<Memo>,
    fusions: Vec<Memo>,
}

fn is_effective_bitcast_transpose(op: &ArrayShape, out: &ArrayShape, perm: &[i64]) -> bool {
    if op.element_type != out.element_type || perm.len() != out.rank() {
        return false;
    }
    let om = out.minor_to_major();
    let im = op.minor_to_major();
    if om.len() != im.len() {
        return false;
    }
    om.iter().zip(im.iter()).all(|(&o, &i)| {
        usize::try_from(o)
            .ok()
            .and_then(|o| perm.get(o))
            .is_some_and(|&p| p == i)
    })
}

fn log2_ceil(n: u64) -> u64 {
    if n <= 1 {
        0
    } else {
        64 - u64::from((n - 1).leading_zeros())
    }
}

fn log2_floor(n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        63 - u64::from(n.leading_zeros())
    }
}

/// Flops of a dot, as XLA's `HloCostAnalysis` counts them: 2 × output elements × the
/// product of the lhs contracting dims. The one dot flop count (the kernel model's MXU
/// work is this too).
pub fn dot_flops(out_elements: f64, lhs_dims: &[i64], dims: Option<&crate::ir::DotDims>) -> f64 {
    let k: f64 = dims
        .map(|d| {
            d.lhs_contracting
                .iter()
                .map(|&i| {
                    usize::try_from(i)
                        .ok()
                        .and_then(|i| lhs_dims.get(i))
                        .copied()
                        .unwrap_or(1) as f64
                })
                .product()
        })
        .unwrap_or(1.0);
    2.0 * out_elements * k
}

/// Flops a convolution performs on the MXU: 2 × output elements × the kernel window ×
/// the kernel's input features. Every window position is multiplied, padding and
/// dilation holes included (the MXU does not skip them), so this is at least
/// [`conv_flops`], which counts only products of real input elements (XLA's count).
/// Without convolution dims: 2 × output elements.
pub fn conv_window_flops(
    out_elements: f64,
    rhs_dims: &[i64],
    dims: Option<&crate::ir::ConvDims>,
) -> f64 {
    let Some(cd) = dims else {
        return 2.0 * out_elements;
    };
    let at = |d: i64| -> f64 {
        usize::try_from(d)
            .ok()
            .and_then(|d| rhs_dims.get(d))
            .copied()
            .unwrap_or(1) as f64
    };
    let spatial: f64 = cd.kernel_spatial.iter().map(|&d| at(d)).product();
    2.0 * out_elements * spatial * at(cd.kernel_input_feature)
}

/// Flops of a convolution as XLA's `HloCostAnalysis` counts them: 2 × the
/// multiply-adds whose input element is real (not padding, not a dilation hole), over
/// feature and batch groups. 0 without array operands or convolution dims.
pub fn conv_flops(instr: &Instruction, lhs: Option<&Shape>, rhs: Option<&Shape>) -> f64 {
    let (l, r, o) = match (
        lhs.and_then(|s| s.as_array()),
        rhs.and_then(|s| s.as_array()),
        instr.shape.as_array(),
    ) {
        (Some(l), Some(r), Some(o)) => (l, r, o),
        _ => return 0.0,
    };
    let cd = match instr.attrs.conv_dims.as_deref() {
        Some(c) => c,
        None => return 0.0,
    };
    let dim = |a: &ArrayShape, i: i64| -> i64 {
        usize::try_from(i)
            .ok()
            .and_then(|i| a.dims.get(i))
            .copied()
            .unwrap_or(1)
    };
    let input_feature = dim(l, cd.input_feature);
    let output_feature = dim(o, cd.output_feature);
    let batch = dim(l, cd.input_batch);
    let default_window = Window::default();
    let w = instr.attrs.window.as_deref().unwrap_or(&default_window);
    let mut positions: i64 = 1;
    for (i, wd) in w.dims.iter().enumerate() {
        let k = cd.kernel_spatial.get(i).map(|&d| dim(r, d)).unwrap_or(1);
        let out = cd.output_spatial.get(i).map(|&d| dim(o, d)).unwrap_or(1);
        let inp = cd.input_spatial.get(i).map(|&d| dim(l, d)).unwrap_or(1);
        positions = positions.saturating_mul(valid_positions(inp, k, out, wd));
    }
    let fgc = instr.attrs.feature_group_count.unwrap_or(1).max(1);
    let bgc = instr.attrs.batch_group_count.unwrap_or(1).max(1);
    let fma = (input_feature / fgc) as f64
        * output_feature as f64
        * (batch / bgc) as f64
        * positions as f64;
    2.0 * fma
}

/// Number of (output, kernel) index pairs of one spatial dimension that land on a
/// real (not padded, not dilation-hole) input element; XLA's exact loop with its
/// two shortcuts.
fn valid_positions(input: i64, kernel: i64, output: i64, w: &crate::ir::WindowDim) -> i64 {
    if input == output
        && kernel == output
        && input == w.base_dilation
        && w.window_dilation == 1
        && (input - 1).max(1) == w.stride
        && w.pad_low == 0
        && w.pad_high == 0
    {
        return input;
    }
    if input == 1
        && kernel == output
        && w.window_dilation == 1
        && w.base_dilation == 1
        && w.stride == 1
        && w.pad_high == output - 1
        && w.pad_low == output - 1
    {
        return output;
    }
    // Sum over the shorter of the two loops; the inner one is counted in closed form.
    let (sd, wd, pl) = (
        i128::from(w.stride.max(1)),
        i128::from(w.window_dilation.max(1)),
        i128::from(w.pad_low),
    );
    let bd = i128::from(w.base_dilation.max(1));
    let mut count: i64 = 0;
    if kernel <= output {
        for k in 0..kernel.max(0) {
            let c = i128::from(k) * wd - pl;
            count = count.saturating_add(progression_hits(output, sd, c, input, bd));
        }
    } else {
        for o in 0..output.max(0) {
            let c = i128::from(o) * sd - pl;
            count = count.saturating_add(progression_hits(kernel, wd, c, input, bd));
        }
    }
    count
}

/// How many `j` in `0..n` make `u = j·step + c` a multiple of `bd` with `u / bd` in
/// `0..input` (a real, not padded and not dilation-hole, input element). Closed
/// form: an arithmetic progression intersected with a range.
fn progression_hits(n: i64, step: i128, c: i128, input: i64, bd: i128) -> i64 {
    let (n, input) = (i128::from(n), i128::from(input));
    if input <= 0 || n <= 0 {
        return 0;
    }
    // j·step + c ∈ [0, (input − 1)·bd]  and  j ∈ [0, n − 1]
    let lo = div_ceil_i128(-c, step).max(0);
    let hi = div_floor_i128((input - 1) * bd - c, step).min(n - 1);
    if lo > hi {
        return 0;
    }
    if bd == 1 {
        return (hi - lo + 1) as i64;
    }
    // j·step ≡ −c (mod bd): solvable iff gcd(step, bd) divides c.
    let (g, inv, _) = ext_gcd(step.rem_euclid(bd), bd);
    if c.rem_euclid(g) != 0 {
        return 0;
    }
    let period = bd / g;
    let j0 = ((-c / g).rem_euclid(period) * inv.rem_euclid(period)).rem_euclid(period);
    let first = lo + (j0 - lo).rem_euclid(period);
    if first > hi {
        0
    } else {
        ((hi - first) / period + 1) as i64
    }
}

fn div_floor_i128(a: i128, b: i128) -> i128 {
    a.div_euclid(b)
}

fn div_ceil_i128(a: i128, b: i128) -> i128 {
    -((-a).div_euclid(b))
}

/// Extended Euclid: (g, x, y) with a·x + b·y = g = gcd(a, b).
fn ext_gcd(a: i128, b: i128) -> (i128, i128, i128) {
    if b == 0 {
        (a, 1, 0)
    } else {
        let (g, x, y) = ext_gcd(b, a.rem_euclid(b));
        (g, y, x - (a.div_euclid(b)) * y)
    }
}

impl<'m> CostAnalyzer<'m> {
    /// A fresh analyzer for `m`.
    pub fn new(m: &'m Module, opts: CostOptions) -> Self {
        let n = m.computations.len();
        CostAnalyzer {
            m,
            opts,
            comps: vec![Memo::Todo; n],
            comps_compute: vec![Memo::Todo; n],
            fusions: vec![Memo::Todo; n],
        }
    }

    fn size(&self, s: &Shape) -> f64 {
        Sizer(self.opts).size(s)
    }

    fn leaf_size(&self, s: &Shape) -> f64 {
        Sizer(self.opts).leaf_size(s)
    }

    fn comp_ref(&self, id: CompId) -> Option<&'m Computation> {
        self.m.computations.get_index(id).map(|(_, c)| c)
    }

    /// Total cost of a computation: the sum over all its instructions (memoised).
    pub fn computation(&mut self, id: CompId) -> Cost {
        self.computation_with(id, true)
    }

    /// With `bytes = false` only flops and transcendentals are computed (what callers
    /// that drop the callee's bytes need: fusions, reducers); bytes come back as 0.
    fn computation_with(&mut self, id: CompId, bytes: bool) -> Cost {
        if let Some(Memo::Done(c)) = self.comps.get(id).copied() {
            return if bytes { c } else { c.compute_times(1.0) };
        }
        let memo = if bytes {
            &self.comps
        } else {
            &self.comps_compute
        };
        match memo.get(id).copied() {
            Some(Memo::Done(c)) => return c,
            Some(Memo::InProgress) | None => return Cost::default(),
            Some(Memo::Todo) => {}
        }
        self.memo_mut(bytes)[id] = Memo::InProgress;
        let mut total = Cost::default();
        if let Some(comp) = self.comp_ref(id) {
            for &i in &comp.order {
                total += self.instruction_with(id, i, bytes);
            }
        }
        self.memo_mut(bytes)[id] = Memo::Done(total);
        total
    }

    fn memo_mut(&mut self, bytes: bool) -> &mut Vec<Memo> {
        if bytes {
            &mut self.comps
        } else {
            &mut self.comps_compute
        }
    }

    fn called(&mut self, instr: &Instruction, role: CallRole, bytes: bool) -> Cost {
        match instr.attrs.called_with(role) {
            Some(c) => self.computation_with(c, bytes),
            None => Cost::default(),
        }
    }

    /// Cost of one instruction of computation `comp`.
    pub fn instruction(&mut self, comp_id: CompId, id: InstrId) -> Cost {
        self.instruction_with(comp_id, id, true)
    }

    fn instruction_with(&mut self, comp_id: CompId, id: InstrId, bytes: bool) -> Cost {
        let comp = match self.comp_ref(comp_id) {
            Some(c) => c,
            None => return Cost::default(),
        };
        let instr = comp.instr(id);
        use Opcode as O;
        // Free instructions first: no operand walk needed (most fused instructions
        // are parameters).
        if instr.async_wrapped.is_none() {
            match instr.opcode {
                O::Parameter
                | O::Constant
                | O::GetTupleElement
                | O::Bitcast
                | O::Domain
                | O::AfterAll
                | O::AddDependency => return Cost::default(),
                O::Tuple => {
                    return Cost {
                        bytes_accessed: self.size(&instr.shape),
                        ..Default::default()
                    }
                }
                _ => {}
            }
        }
        let ops: SmallVec<[InstrId; 4]> = comp.operands(id);
        let opshape =
            |k: usize| -> Option<&'m Shape> { ops.get(k).map(|&o| &*comp.instr(o).shape) };
        let out: &Shape = &instr.shape;
        let out_elems = out.element_count() as f64;
        let sz = Sizer(self.opts);
        let operand_bytes = || -> f64 { ops.iter().map(|&o| sz.size(&comp.instr(o).shape)).sum() };
        let default_bytes = || {
            if bytes {
                sz.leaf_size(out) + operand_bytes()
            } else {
                0.0
            }
        };
        let bytes_only = |b: f64| Cost {
            bytes_accessed: b,
            ..Default::default()
        };
        if instr.async_wrapped.is_some() && instr.opcode != O::AsyncStart {
            return bytes_only(default_bytes());
        }
        match instr.opcode {
            O::Transpose => {
                let eff = match (opshape(0).and_then(|s| s.as_array()), out.as_array()) {
                    (Some(a), Some(o)) => instr
                        .attrs
                        .dimensions
                        .as_ref()
                        .is_some_and(|p| is_effective_bitcast_transpose(a, o, p)),
                    _ => false,
                };
                if eff {
                    Cost::default()
                } else {
                    bytes_only(default_bytes())
                }
            }
            O::Copy => bytes_only(default_bytes()),
            op if op.is_elementwise() => {
                let mut c = bytes_only(default_bytes());
                if op.is_transcendental() {
                    c.transcendentals = out_elems;
                } else {
                    c.flops = out_elems;
                }
                c
            }
            O::Dot => {
                let lhs = opshape(0).map(|s| s.dims()).unwrap_or(&[]);
                Cost {
                    flops: dot_flops(out_elems, lhs, instr.attrs.dot_dims.as_deref()),
                    transcendentals: 0.0,
                    bytes_accessed: default_bytes(),
                }
            }
            O::Convolution => Cost {
                flops: conv_flops(instr, opshape(0), opshape(1)),
                transcendentals: 0.0,
                bytes_accessed: default_bytes(),
            },
            O::Fft => {
                let real = match opshape(0) {
                    Some(Shape::Tuple(v)) => v.first(),
                    s => s,
                };
                let logs: u64 = instr
                    .attrs
                    .fft_length
                    .as_ref()
                    .map(|l| l.iter().map(|&d| log2_floor(d.max(0) as u64)).product())
                    .unwrap_or(1);
                let n = real.map(|s| s.element_count()).unwrap_or(0) as f64;
                Cost {
                    flops: 2.0 * 4.0 * logs as f64 * n,
                    transcendentals: 0.0,
                    bytes_accessed: default_bytes(),
                }
            }
            O::Reduce => {
                let sub = self.called(instr, CallRole::ToApply, false);
                let input = opshape(0).map(|s| s.element_count()).unwrap_or(0) as f64;
                let output = match out {
                    Shape::Tuple(v) => v.first().map(|s| s.element_count()).unwrap_or(0),
                    s => s.element_count(),
                } as f64;
                let mut c = sub.compute_times(input - output);
                c.bytes_accessed = default_bytes();
                c
            }
            O::ReduceWindow => {
                let sub = self.called(instr, CallRole::ToApply, false);
                let k = self.reduce_window_count(instr, out);
                let mut c = sub.compute_times(k);
                c.bytes_accessed = default_bytes();
                c
            }
            O::Map => {
                let sub = self.called(instr, CallRole::ToApply, false);
                let mut c = sub.compute_times(out_elems);
                c.bytes_accessed = default_bytes();
                c
            }
            O::Scatter => self.scatter_cost(instr, &ops, comp),
            O::SelectAndScatter => {
                let sel = self.called(instr, CallRole::Select, false);
                let sc = self.called(instr, CallRole::Scatter, false);
                let src = opshape(1).map(|s| s.element_count()).unwrap_or(0) as f64;
                let win: f64 = instr
                    .attrs
                    .window
                    .as_ref()
                    .map(|w| w.dims.iter().map(|d| d.size as f64).product())
                    .unwrap_or(1.0);
                let mut c = sel.compute_times(src * (win - 1.0)) + sc.compute_times(src);
                c.bytes_accessed = default_bytes();
                c
            }
            O::Sort => {
                let n = opshape(0).map(|s| s.element_count()).unwrap_or(0);
                Cost {
                    flops: n as f64 * log2_ceil(n) as f64,
                    transcendentals: 0.0,
                    bytes_accessed: default_bytes(),
                }
            }
            O::TriangularSolve => {
                let a = opshape(0);
                let b = opshape(1);
                let minor = a.and_then(|s| s.dims().last().copied()).unwrap_or(0) as f64;
                let belems = b.map(|s| s.element_count()).unwrap_or(0) as f64;
                Cost {
                    flops: 2.0 * minor * belems,
                    transcendentals: 0.0,
                    bytes_accessed: self.leaf_size(out)
                        + a.map(|s| self.size(s)).unwrap_or(0.0) / 2.0
                        + b.map(|s| self.size(s)).unwrap_or(0.0),
                }
            }
            O::Cholesky => {
                let a = opshape(0);
                let minor = a.and_then(|s| s.dims().last().copied()).unwrap_or(0) as u64;
                let elems = a.map(|s| s.element_count()).unwrap_or(0);
                let half = a.map(|s| self.size(s)).unwrap_or(0.0) / 2.0;
                Cost {
                    flops: (minor.saturating_mul(elems) / 3) as f64,
                    transcendentals: 0.0,
                    bytes_accessed: half + half,
                }
            }
            O::AllReduce | O::AllReduceStart => {
                let leaves = out.leaves();
                let flops: f64 = leaves.iter().map(|a| a.element_count() as f64).sum();
                Cost {
                    flops,
                    transcendentals: 0.0,
                    bytes_accessed: default_bytes(),
                }
            }
            O::Rng => Cost {
                flops: 0.0,
                transcendentals: out_elems,
                bytes_accessed: default_bytes(),
            },
            O::RngBitGenerator => Cost {
                flops: 0.0,
                transcendentals: out.leaves().iter().map(|a| a.element_count() as f64).sum(),
                bytes_accessed: default_bytes(),
            },
            O::Slice => bytes_only(2.0 * self.size(out)),
            O::DynamicSlice | O::Gather => {
                bytes_only(2.0 * self.size(out) + opshape(1).map(|s| self.size(s)).unwrap_or(0.0))
            }
            O::DynamicUpdateSlice => bytes_only(
                2.0 * opshape(1).map(|s| self.size(s)).unwrap_or(0.0)
                    + opshape(2).map(|s| self.size(s)).unwrap_or(0.0),
            ),
            O::While => {
                self.called(instr, CallRole::Body, bytes)
                    + self.called(instr, CallRole::Condition, bytes)
            }
            O::Call => self.called(instr, CallRole::ToApply, bytes),
            O::AsyncStart => match instr.attrs.called.first() {
                Some(&(_, c)) => self.computation_with(c, bytes),
                None => bytes_only(default_bytes()),
            },
            O::Conditional => {
                let branches: SmallVec<[CompId; 4]> =
                    instr.attrs.called.iter().map(|&(_, c)| c).collect();
                let mut best: Option<Cost> = None;
                for b in branches {
                    let c = self.computation_with(b, bytes);
                    best = Some(match best {
                        None => c,
                        Some(x) => x.max(c),
                    });
                }
                best.unwrap_or_default()
            }
            O::Fusion => self.fusion_cost(instr, &ops, comp, bytes),
            O::CustomCall => Cost {
                flops: -1.0,
                transcendentals: 0.0,
                bytes_accessed: -1.0,
            },
            O::Infeed => bytes_only(self.leaf_size(out)),
            O::Outfeed => bytes_only(
                ops.iter()
                    .map(|&o| self.leaf_size(&comp.instr(o).shape))
                    .sum(),
            ),
            _ => bytes_only(default_bytes()),
        }
    }

    fn reduce_window_count(&self, instr: &Instruction, out: &Shape) -> f64 {
        let default_window = Window::default();
        let w = instr.attrs.window.as_deref().unwrap_or(&default_window);
        let mut window_elems: i64 = w.dims.iter().fold(1i64, |a, d| a.saturating_mul(d.size));
        let out_elems = match out {
            Shape::Tuple(v) => v.first().map(|s| s.element_count()).unwrap_or(0),
            s => s.element_count(),
        } as i64;
        let mut count = (window_elems as f64 - 1.0) * out_elems as f64;
        let reducing = w.dims.iter().filter(|d| d.size != 1).count();
        let padded = w
            .dims
            .iter()
            .filter(|d| d.pad_low != 0 || d.pad_high != 0)
            .count();
        if reducing == 1 && padded == 1 {
            if let Shape::Array(oa) = out {
                let found = w.dims.iter().position(|d| {
                    d.size != 1
                        && d.pad_low != 0
                        && d.pad_high != 0
                        && d.pad_low == d.pad_high
                        && Some(d.size) == d.pad_low.checked_mul(2).and_then(|x| x.checked_add(1))
                });
                if let Some(i) = found {
                    let span = oa.dims.get(i).copied().unwrap_or(0);
                    if w.dims[i].pad_low == span - 1 && span > 0 {
                        window_elems = span;
                        count = (out_elems / window_elems + (window_elems - 1)) as f64;
                    }
                }
            }
        }
        count
    }

    fn scatter_cost(&mut self, instr: &Instruction, ops: &[InstrId], comp: &Computation) -> Cost {
        let n = ops.len() / 2;
        let upd_bytes: f64 = (0..n)
            .filter_map(|i| ops.get(n + 1 + i))
            .map(|&u| self.size(&comp.instr(u).shape))
            .sum();
        let idx_bytes = ops
            .get(n)
            .map(|&i| self.size(&comp.instr(i).shape))
            .unwrap_or(0.0);
        let elems = ops
            .get(n + 1)
            .map(|&u| comp.instr(u).shape.element_count())
            .unwrap_or(0) as f64;
        let sub = self.called(instr, CallRole::ToApply, false);
        let mut c = sub.compute_times(elems);
        c.bytes_accessed = 3.0 * upd_bytes + idx_bytes;
        c
    }

    fn fusion_cost(
        &mut self,
        instr: &Instruction,
        ops: &[InstrId],
        caller: &Computation,
        bytes: bool,
    ) -> Cost {
        let fid = match instr.attrs.called_with(CallRole::Calls) {
            Some(f) => f,
            None => {
                let out = self.leaf_size(&instr.shape);
                let inp: f64 = ops.iter().map(|&o| self.size(&caller.instr(o).shape)).sum();
                return Cost {
                    bytes_accessed: out + inp,
                    ..Default::default()
                };
            }
        };
        if !bytes && instr.attrs.fusion_kind != Some(FusionKind::Custom) {
            return self.computation_with(fid, false);
        }
        match self.fusions.get(fid).copied() {
            Some(Memo::Done(c)) => return c,
            Some(Memo::InProgress) | None => return Cost::default(),
            Some(Memo::Todo) => {}
        }
        self.fusions[fid] = Memo::InProgress;
        let c = self.fusion_cost_uncached(instr, fid);
        self.fusions[fid] = Memo::Done(c);
        c
    }

    fn fusion_cost_uncached(&mut self, instr: &Instruction, fid: CompId) -> Cost {
        let f = match self.comp_ref(fid) {
            Some(f) => f,
            None => return Cost::default(),
        };
        // Custom fusions around a gather or scatter are costed as that instruction.
        if instr.attrs.fusion_kind == Some(FusionKind::Custom) {
            for &i in &f.order {
                let op = f.instr(i).opcode;
                if op == Opcode::Gather {
                    let inner = f.instr(i);
                    let idx = f
                        .operand(i, 1)
                        .map(|x| self.size(&f.instr(x).shape))
                        .unwrap_or(0.0);
                    return Cost {
                        bytes_accessed: 2.0 * self.size(&inner.shape) + idx,
                        ..Default::default()
                    };
                }
                if op == Opcode::Scatter {
                    let ops = f.operands(i);
                    return self.scatter_cost(f.instr(i), &ops, f);
                }
            }
        }
        let mut c = self.computation_with(fid, false);
        if !f.graph.contains_node(f.root) {
            return c;
        }
        let root = f.instr(f.root);
        // Outputs: a dynamic-update-slice root (or tuple element) writes only its update.
        let dus_update = |x: InstrId| -> Option<f64> {
            let xi = f.instr(x);
            if xi.opcode == Opcode::DynamicUpdateSlice {
                f.operand(x, 1).map(|u| self.size(&f.instr(u).shape))
            } else {
                None
            }
        };
        let mut bytes = 0.0;
        match &*instr.shape {
            Shape::Tuple(elems) => {
                let root_ops = if root.opcode == Opcode::Tuple {
                    f.operands(f.root)
                } else {
                    SmallVec::new()
                };
                for (k, e) in elems.iter().enumerate() {
                    let special =
                        root_ops.get(k).and_then(
                            |&x| {
                                if e.is_tuple() {
                                    None
                                } else {
                                    dus_update(x)
                                }
                            },
                        );
                    bytes += special.unwrap_or_else(|| self.leaf_size(e));
                }
            }
            s => bytes += dus_update(f.root).unwrap_or_else(|| self.leaf_size(s)),
        }
        // Large constants inside the fusion are read from memory.
        for &i in &f.order {
            let x = f.instr(i);
            if x.opcode == Opcode::Constant && x.shape.element_count() > 1 && !x.shape.is_tuple() {
                bytes += self.size(&x.shape);
            }
        }
        for &p in &f.params {
            bytes += self.param_read_bytes(f, p);
        }
        c.bytes_accessed = bytes;
        c
    }

    /// Bytes a fusion reads from one fused parameter (XLA `FusionParameterReadBytes`);
    /// tuple parameters are followed through their get-tuple-element users.
    fn param_read_bytes(&mut self, f: &Computation, p: InstrId) -> f64 {
        let shape: &Shape = &f.instr(p).shape;
        if let Shape::Tuple(_) = shape {
            let mut total = 0.0;
            // Walk the leaves depth-first, following GTE users where they exist.
            fn leaves_with_index(s: &Shape, prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
                match s {
                    Shape::Tuple(v) => {
                        for (i, e) in v.iter().enumerate() {
                            prefix.push(i);
                            leaves_with_index(e, prefix, out);
                            prefix.pop();
                        }
                    }
                    _ => out.push(prefix.clone()),
                }
            }
            let mut idxs = Vec::new();
            leaves_with_index(shape, &mut Vec::new(), &mut idxs);
            for index in idxs {
                let mut node = p;
                for &k in &index {
                    let next = f.users(node).into_iter().find(|&u| {
                        let ui = f.instr(u);
                        ui.opcode == Opcode::GetTupleElement
                            && ui.attrs.tuple_index == Some(k as i64)
                    });
                    if let Some(n) = next {
                        node = n;
                    } else {
                        break;
                    }
                }
                total += self.read_bytes(f, node);
            }
            return total;
        }
        self.read_bytes(f, p)
    }

    fn read_bytes(&mut self, f: &Computation, h: InstrId) -> f64 {
        let hs = &f.instr(h).shape;
        let full = self.size(hs);
        let mut size = 0.0;
        let mut seen_trivial = false;
        for u in f.users(h) {
            let ui = f.instr(u);
            match ui.opcode {
                Opcode::Fusion => {
                    if let Some(inner) = ui
                        .attrs
                        .called_with(CallRole::Calls)
                        .and_then(|c| self.comp_ref(c))
                    {
                        for (slot, o) in f.operands(u).into_iter().enumerate() {
                            if o == h {
                                if let Some(&ip) = inner.params.get(slot) {
                                    size += self.param_read_bytes(inner, ip);
                                }
                            }
                        }
                    }
                }
                Opcode::Slice => size += self.size(&ui.shape),
                Opcode::DynamicSlice => {
                    if f.operand(u, 0) == Some(h) {
                        size += self.size(&ui.shape);
                    } else if !seen_trivial {
                        seen_trivial = true;
                        size += full;
                    }
                }
                Opcode::DynamicUpdateSlice => {
                    if f.operand(u, 0) != Some(h) && !seen_trivial {
                        seen_trivial = true;
                        size += full;
                    }
                }
                Opcode::Broadcast | Opcode::Reshape => size += full,
                _ => {
                    if !seen_trivial {
                        seen_trivial = true;
                        size += full;
                    }
                }
            }
        }
        size
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::WindowDim;

    /// XLA's loop, verbatim in behaviour.
    fn reference(input: i64, kernel: i64, output: i64, w: &WindowDim) -> i64 {
        let mut count = 0;
        for k in 0..kernel {
            for o in 0..output {
                let u = o * w.stride - w.pad_low + k * w.window_dilation;
                let i = if w.base_dilation > 1 {
                    u / w.base_dilation
                } else {
                    u
                };
                if u != i * w.base_dilation || i < 0 || i >= input {
                    continue;
                }
                count += 1;
            }
        }
        count
    }

    #[test]
    fn closed_form_valid_positions_equal_the_loop() {
        let mut n = 0;
        for input in 1..7 {
            for kernel in 1..5 {
                for stride in 1..4 {
                    for bd in 1..4 {
                        for wd in 1..3 {
                            for pad_low in -2..4 {
                                for output in 1..8 {
                                    let w = WindowDim {
                                        size: kernel,
                                        stride,
                                        pad_low,
                                        pad_high: 0,
                                        window_dilation: wd,
                                        base_dilation: bd,
                                        window_reversal: false,
                                    };
                                    // bypass the two shortcuts: they are XLA's too
                                    let ours = valid_positions(input, kernel, output, &w);
                                    assert_eq!(
                                        ours,
                                        reference(input, kernel, output, &w),
                                        "{input} {kernel} {output} {w:?}"
                                    );
                                    n += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(n > 10_000);
    }

    #[test]
    fn huge_windows_do_not_stall() {
        let w = WindowDim {
            size: 1 << 40,
            pad_low: 1 << 39,
            pad_high: 1 << 39,
            ..Default::default()
        };
        // a full-length 1-D correlation: 2^40 taps, 3 outputs
        let v = valid_positions(1 << 40, 1 << 40, 3, &w);
        assert_eq!(v, 3 * (1 << 39) + 3);
    }

    #[test]
    fn log2_helpers() {
        assert_eq!(
            (log2_ceil(0), log2_ceil(1), log2_ceil(2), log2_ceil(70)),
            (0, 0, 1, 7)
        );
        assert_eq!((log2_floor(1), log2_floor(64), log2_floor(65)), (0, 6, 6));
    }
}
