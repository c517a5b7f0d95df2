//! Lowering of one HLO instruction (a fusion or an unfused op) to the
//! kernel-level description of the cost model ([`KernelDesc`]).
//!
//! The instruction becomes a *region*: the fused computation of a fusion
//! (leaves = its parameters = the fusion operands), or the instruction alone
//! (leaves = its operands). The region's main output fixes the iteration
//! space (its physical dims, major→minor); the *hero* (dot / convolution →
//! MXU, reduce / reduce-window → reduction, gather / scatter / sort / ... →
//! other, physical transpose → copy-transpose, else elementwise) adds the
//! reduction dims. Dim maps are then traced backwards, from the output
//! through every fused instruction to the leaves, in *logical* dims; only
//! the two ends (output, leaves) are turned into physical order. Rules and
//! approximations: `docs/kernels.md`.

use serde::Serialize;
use smallvec::SmallVec;

use thiserror::Error;

use super::ops::{
    add_scaled, computation_ops, dim_size, elem_bits, elem_shape, elements, is_data, op_class,
    physical_dims, physical_order, total_ops, PhysOrder,
};
use crate::ir::{
    ArrayShape, Attrs, CallRole, CompId, Computation, InstrId, Module, Name, Opcode, PrimitiveType,
    Shape,
};
use crate::passes::KernelBody;
use crate::tpu::{
    DimMap, Figure, Formula, InputDesc, KernelDesc, KernelKind, ModelError, MxuPrecision, MxuRole,
    MxuSpec, OpCounts, ReduceAxis, ReductionDim, ReductionKind, TensorDesc, VpuWork, MAX_DIMS,
};

/// Maps keyed by instruction id, hashed with foldhash (the lowering builds a few per
/// kernel).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;

/// Why an instruction cannot be lowered.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LowerError {
    /// The computation index is out of range.
    #[error("computation #{0} does not exist in the module")]
    NoComputation(CompId),
    /// The instruction id is not in the computation.
    #[error("instruction #{instr} does not exist in computation `{comp}`")]
    NoInstruction {
        /// Computation name.
        comp: String,
        /// Node index.
        instr: usize,
    },
    /// A fusion without a `calls=` computation.
    #[error("fusion `{0}` has no fused computation (calls=)")]
    NoFusedComputation(String),
    /// The fused computation has no valid root.
    #[error("computation `{0}` has no root instruction")]
    NoRoot(String),
    /// The kernel description (even the flattened fallback) is rejected by the model.
    #[error("kernel `{kernel}`: {source}")]
    Model {
        /// Instruction name.
        kernel: String,
        /// Model error.
        source: ModelError,
    },
}

/// A lowered kernel: the model's description plus what the model does not
/// carry (hero, side outputs, operand numbering).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoweredKernel {
    /// The kernel description the cost model evaluates, valid
    /// ([`KernelDesc::validate`]): it is read through [`LoweredKernel::desc`], so that
    /// no one changes it after the lowering checked it, and the model does not check it again.
    desc: KernelDesc,
    /// Opcode of the hero instruction (the op that decides the kind).
    #[serde(serialize_with = "opcode_name")]
    pub hero: Opcode,
    /// Name of the hero instruction.
    pub hero_name: Name,
    /// Outputs written besides `desc.output` (other elements of a
    /// multi-output fusion; the buffer initialisation of an in-place
    /// update computed inside the fusion). Counted as extra write traffic
    /// by the program model.
    pub side_outputs: Vec<TensorDesc>,
    /// For each `desc.inputs[i]`, the operand number of the instruction
    /// (fusion operand / parameter number) it reads.
    pub operand_of_input: Vec<usize>,
    /// True when the traced description was rejected (too many dims, …) and a
    /// flattened 2-D approximation is used instead.
    pub flattened: bool,
}

impl LoweredKernel {
    /// The kernel description the cost model evaluates (valid: see
    /// [`KernelDesc::validate`]).
    pub fn desc(&self) -> &KernelDesc {
        &self.desc
    }

    /// The description, taken out of the kernel.
    pub fn into_desc(self) -> KernelDesc {
        self.desc
    }

    /// The same kernel under the name `name` (a remembered kernel handed out for
    /// another of the same body).
    pub(crate) fn rename(&mut self, name: &str) {
        self.desc.name = Name::from(name);
    }
}

/// An opcode as its HLO name.
fn opcode_name<S: serde::Serializer>(o: &Opcode, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(o.name())
}

/// Lowers one instruction of `module` to a kernel description.
///
/// Returns `Ok(None)` for instructions that cost nothing at run time
/// (parameter, constant, tuple, get-tuple-element, bitcast, …, physical
/// no-op reshapes/transposes, empty arrays) and for control flow (`while`,
/// `conditional`, `call`, generic `async-start`), whose cost is that of the
/// computations they call (see `program`).
pub fn lower_kernel(
    module: &Module,
    comp: CompId,
    instr: InstrId,
) -> Result<Option<KernelDesc>, LowerError> {
    Ok(lower_kernel_full(module, comp, instr)?.map(|k| k.desc))
}

/// [`lower_kernel`] with the extra facts of [`LoweredKernel`].
pub fn lower_kernel_full(
    module: &Module,
    comp: CompId,
    instr: InstrId,
) -> Result<Option<LoweredKernel>, LowerError> {
    let c = module
        .computations
        .get_index(comp)
        .map(|(_, c)| c)
        .ok_or(LowerError::NoComputation(comp))?;
    let ins = c
        .graph
        .node_weight(instr)
        .ok_or_else(|| LowerError::NoInstruction {
            comp: c.name.clone(),
            instr: instr.index(),
        })?;
    let op = ins.opcode;
    if op.is_zero_cost() || op.is_control_flow() {
        return Ok(None);
    }
    let region = match (op, ins.async_wrapped) {
        (Opcode::Fusion, _) | (Opcode::AsyncStart, Some(Opcode::Fusion)) => {
            let callee = ins
                .attrs
                .called_with(CallRole::Calls)
                .or_else(|| ins.attrs.called.first().map(|(_, c)| *c))
                .ok_or_else(|| LowerError::NoFusedComputation(ins.name.to_string()))?;
            let fc = module
                .computations
                .get_index(callee)
                .map(|(_, c)| c)
                .ok_or(LowerError::NoComputation(callee))?;
            if fc.graph.node_weight(fc.root).is_none() {
                return Err(LowerError::NoRoot(fc.name.clone()));
            }
            Region::fused(module, fc)
        }
        // generic async-start: the program model walks the wrapped computation
        (Opcode::AsyncStart, None) => return Ok(None),
        _ => Region::single(module, c, instr),
    };
    if region.single
        && matches!(op, Opcode::Reshape | Opcode::Transpose)
        && region.is_tpu_bitcast(region.root)
    {
        return Ok(None);
    }
    lower_region(&region, &ins.name)
}

/// Lowers one kernel listed with its instructions by
/// [`crate::passes::PreparedModule::compile_bodies`] (`name` = the kernel's name; called
/// computations are looked up in `module`, the *input* module). Gives what
/// [`lower_kernel_full`] gives for the same kernel of the compiled module.
pub fn lower_body(
    module: &Module,
    body: KernelBody<'_>,
    name: &str,
) -> Result<Option<LoweredKernel>, LowerError> {
    Ok(lower_body_at(module, body, name)?.map(|(k, _)| k))
}

/// [`lower_body`] and the position of the kernel's hero in `body`.
pub(crate) fn lower_body_at(
    module: &Module,
    body: KernelBody<'_>,
    name: &str,
) -> Result<Option<(LoweredKernel, usize)>, LowerError> {
    if body.root as usize >= body.instrs.len() {
        return Err(LowerError::NoRoot(name.to_string()));
    }
    let region = Region::body(module, body);
    if body.single {
        let op = body.opcode(body.root as usize);
        if op.is_zero_cost()
            || op.is_control_flow()
            || (matches!(op, Opcode::Reshape | Opcode::Transpose)
                && region.is_tpu_bitcast(region.root))
        {
            return Ok(None);
        }
    }
    Ok(lower_region_at(&region, name)?.map(|(k, hero)| (k, hero.index())))
}

// ---------------------------------------------------------------------------
// Regions

/// Where a region's instructions are read from.
#[derive(Clone, Copy)]
enum Source<'m> {
    /// A computation of the module.
    Comp(&'m Computation),
    /// A kernel listed by the compiler (ids = positions in `instrs`).
    Body(KernelBody<'m>),
}

/// The operands of an instruction of a region, in slot order: a kernel body's, read in
/// place, or a computation's, collected from its graph.
enum Operands<'a> {
    InPlace(&'a [InstrId]),
    Collected(SmallVec<[InstrId; 4]>),
}

impl std::ops::Deref for Operands<'_> {
    type Target = [InstrId];
    fn deref(&self) -> &[InstrId] {
        match self {
            Operands::InPlace(s) => s,
            Operands::Collected(v) => v,
        }
    }
}

/// The members of a region ([`Region::members`]): a range of a kernel body's positions,
/// or a computation's instructions listed.
enum Members {
    Range(std::ops::Range<usize>),
    Listed(std::vec::IntoIter<InstrId>),
}

impl Iterator for Members {
    type Item = InstrId;
    fn next(&mut self) -> Option<InstrId> {
        match self {
            Members::Range(r) => r.next().map(InstrId::new),
            Members::Listed(l) => l.next(),
        }
    }
}

/// The opcode an instruction stands for: an async-start's wrapped op, else its own.
fn effective_opcode(opcode: Opcode, async_wrapped: Option<Opcode>) -> Opcode {
    match (opcode, async_wrapped) {
        (Opcode::AsyncStart, Some(w)) => w,
        (o, _) => o,
    }
}

/// What lowering reads of an instruction.
#[derive(Clone, Copy)]
struct Ins<'m> {
    opcode: Opcode,
    /// The effective opcode ([`effective_opcode`]).
    op: Opcode,
    shape: &'m Shape,
    attrs: &'m Attrs,
}

struct Region<'m> {
    module: &'m Module,
    src: Source<'m>,
    /// A body's instructions, read once (lowering reads each many times), and the
    /// array each produces for tracing.
    table: Vec<Ins<'m>>,
    arrs: Vec<Option<&'m ArrayShape>>,
    root: InstrId,
    /// Single-instruction region (an unfused op).
    single: bool,
    /// Leaf instruction → operand number (of a computation's region: a body's leaves
    /// are its first instructions).
    leaf_input: HashMap<InstrId, usize>,
    /// Leaves in operand order (distinct).
    leaves: SmallVec<[InstrId; 8]>,
    /// Output shape override (async-start sugar: element {1} of the tuple).
    out_shape: Option<&'m Shape>,
}

impl<'m> Region<'m> {
    fn fused(module: &'m Module, fc: &'m Computation) -> Self {
        let mut leaf_input = HashMap::default();
        let mut leaves = SmallVec::new();
        for (i, &p) in fc.params.iter().enumerate() {
            if fc.graph.node_weight(p).is_some() {
                leaf_input.insert(p, i);
                leaves.push(p);
            }
        }
        Region {
            module,
            table: Vec::new(),
            arrs: Vec::new(),
            src: Source::Comp(fc),
            root: fc.root,
            single: false,
            leaf_input,
            leaves,
            out_shape: None,
        }
    }

    fn single(module: &'m Module, c: &'m Computation, id: InstrId) -> Self {
        let mut leaf_input = HashMap::default();
        let mut leaves = SmallVec::new();
        for o in c.operands(id) {
            if let std::collections::hash_map::Entry::Vacant(e) = leaf_input.entry(o) {
                e.insert(leaves.len());
                leaves.push(o);
            }
        }
        let ins = c.instr(id);
        let out_shape = if ins.opcode == Opcode::AsyncStart {
            ins.shape.tuple_element(1)
        } else {
            None
        };
        Region {
            module,
            table: Vec::new(),
            arrs: Vec::new(),
            src: Source::Comp(c),
            root: id,
            single: true,
            leaf_input,
            leaves,
            out_shape,
        }
    }

    /// The region of a compiler-listed kernel: like [`Region::fused`] for a fusion, like
    /// [`Region::single`] for an unfused instruction.
    fn body(module: &'m Module, b: KernelBody<'m>) -> Self {
        let root = InstrId::new(b.root as usize);
        // the leaves come first, in operand order ([`Region::leaf_operand`])
        let leaf_input = HashMap::default();
        let leaves = (0..b.leaves as usize).map(InstrId::new).collect();
        let table = (0..b.instrs.len())
            .map(|i| {
                let (opcode, async_wrapped, shape, attrs) = b.get(i);
                Ins {
                    opcode,
                    op: effective_opcode(opcode, async_wrapped),
                    shape,
                    attrs,
                }
            })
            .collect::<Vec<Ins<'m>>>();
        let arrs = table.iter().map(|i| elem_shape(i.shape)).collect();
        let mut r = Region {
            module,
            table,
            arrs,
            src: Source::Body(b),
            root,
            single: b.single,
            leaf_input,
            leaves,
            out_shape: None,
        };
        if b.single && r.ins(root).opcode == Opcode::AsyncStart {
            r.out_shape = r.ins(root).shape.tuple_element(1);
            // the root's array is the output's ([`Region::arr`])
            if let (Some(s), Some(a)) = (r.out_shape, r.arrs.get_mut(root.index())) {
                *a = elem_shape(s);
            }
        }
        r
    }

    fn is_leaf(&self, id: InstrId) -> bool {
        self.leaf_operand(id).is_some()
    }

    /// The operand number leaf `id` stands for; None when `id` is no leaf.
    fn leaf_operand(&self, id: InstrId) -> Option<usize> {
        match self.src {
            Source::Body(b) => (id.index() < b.leaves as usize).then_some(id.index()),
            Source::Comp(_) => self.leaf_input.get(&id).copied(),
        }
    }

    fn ins(&self, id: InstrId) -> Ins<'m> {
        match self.src {
            Source::Comp(c) => {
                let i = c.instr(id);
                Ins {
                    opcode: i.opcode,
                    op: effective_opcode(i.opcode, i.async_wrapped),
                    shape: &i.shape,
                    attrs: &i.attrs,
                }
            }
            Source::Body(_) => self.table[id.index()],
        }
    }

    /// Name of instruction `id` (as in the compiled module).
    fn name(&self, id: InstrId) -> Name {
        match self.src {
            Source::Comp(c) => c.instr(id).name.clone(),
            Source::Body(b) => b.name(id.index()),
        }
    }

    /// Effective opcode (async-start sugar → wrapped op).
    fn opcode(&self, id: InstrId) -> Opcode {
        self.ins(id).op
    }

    /// Array produced by `id` for tracing (first leaf of a tuple).
    fn arr(&self, id: InstrId) -> Option<&'m ArrayShape> {
        match self.src {
            // the root's is the output's already ([`Region::body`])
            Source::Body(_) => self.arrs[id.index()],
            Source::Comp(_) => match self.out_shape {
                Some(s) if id == self.root => elem_shape(s),
                _ => elem_shape(self.ins(id).shape),
            },
        }
    }

    /// Dim sizes of [`Region::arr`] (unbounded dynamic dims as 1, [`dim_size`]);
    /// borrowed from the shape when it has none.
    fn dims(&self, id: InstrId) -> std::borrow::Cow<'m, [i64]> {
        use std::borrow::Cow;
        match self.arr(id) {
            Some(a) if a.dims.iter().all(|&d| d >= 0) => Cow::Borrowed(&a.dims[..]),
            Some(a) => Cow::Owned(a.dims.iter().map(|&d| dim_size(d)).collect()),
            None => Cow::Borrowed(&[]),
        }
    }

    fn rank(&self, id: InstrId) -> usize {
        self.arr(id).map(|a| a.rank()).unwrap_or(0)
    }

    /// Instructions inside the region (no leaves), in program order.
    fn members(&self) -> Members {
        if self.single {
            let i = self.root.index();
            Members::Range(i..i + 1)
        } else {
            match self.src {
                Source::Comp(c) => Members::Listed(
                    c.order
                        .iter()
                        .copied()
                        .filter(|&id| !self.is_leaf(id))
                        .collect::<Vec<_>>()
                        .into_iter(),
                ),
                // the leaves come first
                Source::Body(b) => Members::Range(b.leaves as usize..b.instrs.len()),
            }
        }
    }

    fn operands(&self, id: InstrId) -> Operands<'_> {
        match &self.src {
            Source::Comp(c) => Operands::Collected(c.operands(id)),
            Source::Body(b) => Operands::InPlace(&b.instrs[id.index()].operands),
        }
    }

    /// Whether a copy / transpose / reshape changes the physical order of the data
    /// (otherwise it is a bitcast and costs nothing unfused).
    fn changes_physical(&self, id: InstrId) -> bool {
        let ins = self.ins(id);
        let src = self.operands(id).first().map(|&o| self.ins(o).shape);
        changes_physical(ins.opcode, ins.attrs, ins.shape, src)
    }

    /// Whether a standalone reshape / transpose moves no bytes in HBM
    /// ([`crate::passes::tiling::is_tpu_bitcast`]: the layout pass's rule, tiles included).
    fn is_tpu_bitcast(&self, id: InstrId) -> bool {
        let ins = self.ins(id);
        let src = self.operands(id).first().map(|&o| self.ins(o).shape);
        let (Some(b), Some(a)) = (ins.shape.as_array(), src.and_then(|s| s.as_array())) else {
            return false;
        };
        let perm = match ins.opcode {
            Opcode::Transpose => match &ins.attrs.dimensions {
                Some(p) => Some(p.as_slice()),
                None => return false,
            },
            _ => None,
        };
        // the layouts as the model reads them (row-major when none)
        let read = |s: &ArrayShape| {
            super::ops::with_model_minor_to_major(s, |m| {
                m.map_or_else(
                    || crate::passes::tiling::row_major(s.rank()),
                    crate::ir::Dims::from,
                )
            })
        };
        let (am, bm) = (read(a), read(b));
        crate::passes::tiling::is_tpu_bitcast(
            perm,
            crate::passes::tiling::Laid {
                et: a.element_type,
                dims: &a.dims,
                m2m: &am,
            },
            crate::passes::tiling::Laid {
                et: b.element_type,
                dims: &b.dims,
                m2m: &bm,
            },
        )
    }

    fn called(&self, id: InstrId, role: CallRole) -> Option<&'m Computation> {
        let c = self.ins(id).attrs.called_with(role)?;
        self.module.computations.get_index(c).map(|(_, c)| c)
    }
}

/// [`Region::changes_physical`] of an instruction with this opcode, attributes and
/// shape, whose operand 0 has shape `src`.
fn changes_physical(op: Opcode, attrs: &Attrs, shape: &Shape, src: Option<&Shape>) -> bool {
    let Some(out) = shape.as_array() else {
        return true;
    };
    let Some(src) = src.and_then(|s| s.as_array()) else {
        return true;
    };
    match op {
        Opcode::Reshape => {
            // a reshape is a bitcast when both sides are row-major (size-1
            // dims ignored) — the linear order is then preserved
            !(is_row_major(out) && is_row_major(src))
        }
        Opcode::Transpose | Opcode::Copy => {
            let rank = out.rank();
            if src.rank() != rank {
                return true;
            }
            // operand logical dim → output logical dim
            let mut to_out: Vec<usize> = (0..rank).collect();
            if op == Opcode::Transpose {
                if let Some(p) = &attrs.dimensions {
                    for (i, &d) in p.iter().enumerate() {
                        if let Some(slot) = usize::try_from(d).ok().and_then(|d| to_out.get_mut(d))
                        {
                            *slot = i;
                        }
                    }
                }
            }
            let out_seq: PhysOrder = physical_order(out)
                .into_iter()
                .filter(|&l| dim_size(out.dims[l]) != 1)
                .collect();
            let src_seq: PhysOrder = physical_order(src)
                .into_iter()
                .filter(|&l| dim_size(src.dims[l]) != 1)
                .map(|l| to_out[l])
                .collect();
            out_seq != src_seq
        }
        _ => true,
    }
}

fn is_row_major(a: &ArrayShape) -> bool {
    let seq: PhysOrder = physical_order(a)
        .into_iter()
        .filter(|&l| dim_size(a.dims[l]) != 1)
        .collect();
    seq.windows(2).all(|w| w[0] < w[1])
}

// ---------------------------------------------------------------------------
// Hero

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeroClass {
    Mxu,
    Reduction,
    Other,
    CopyTranspose,
    Elementwise,
}

/// Reduction iteration dims created by the hero.
#[derive(Debug, Default)]
struct HeroDims {
    /// Dot: iteration dim of each entry of `lhs_contracting` (same order).
    contraction: Vec<usize>,
    /// Convolution: iteration dim of each spatial window dim.
    window: Vec<usize>,
    /// Convolution: iteration dim of the input feature (K).
    cin: Option<usize>,
    /// Reduce / reduce-window: operand logical dim → iteration dim.
    reduced: Vec<(usize, usize)>,
}

/// The MXU work of a dot ([`crate::analysis::cost::dot_flops`]) or convolution
/// ([`crate::analysis::cost::conv_window_flops`]); 0 for anything else.
#[inline(never)]
fn mxu_flops(r: &Region, id: InstrId) -> f64 {
    let out = r.arr(id).map(elements).unwrap_or(0.0);
    let ins = r.ins(id);
    let operand_dims = |k: usize| {
        r.operands(id)
            .get(k)
            .map(|&o| r.dims(o))
            .unwrap_or_default()
    };
    match r.opcode(id) {
        Opcode::Dot => {
            crate::analysis::cost::dot_flops(out, &operand_dims(0), ins.attrs.dot_dims.as_deref())
        }
        Opcode::Convolution => crate::analysis::cost::conv_window_flops(
            out,
            &operand_dims(1),
            ins.attrs.conv_dims.as_deref(),
        ),
        _ => 0.0,
    }
}

fn find_hero(r: &Region, main: InstrId, main_dims: &[i64]) -> (InstrId, HeroClass) {
    let mut best: Option<(f64, InstrId)> = None;
    for id in r.members() {
        if r.opcode(id).is_mxu() {
            let f = mxu_flops(r, id);
            if best.is_none_or(|(bf, _)| f > bf) {
                best = Some((f, id));
            }
        }
    }
    if let Some((_, id)) = best {
        return (id, HeroClass::Mxu);
    }
    let mut best: Option<(f64, InstrId)> = None;
    for id in r.members() {
        if r.opcode(id).is_reduction() && *r.dims(id) == *main_dims {
            let n = r
                .operands(id)
                .first()
                .and_then(|&o| r.arr(o))
                .map(elements)
                .unwrap_or(0.0);
            if best.is_none_or(|(bn, _)| n > bn) {
                best = Some((n, id));
            }
        }
    }
    if let Some((_, id)) = best {
        return (id, HeroClass::Reduction);
    }
    let mut best: Option<(f64, InstrId)> = None;
    for id in r.members() {
        if r.opcode(id).is_other_hero() {
            let n = r.arr(id).map(elements).unwrap_or(0.0);
            if best.is_none_or(|(bn, _)| n > bn) {
                best = Some((n, id));
            }
        }
    }
    if let Some((_, id)) = best {
        return (id, HeroClass::Other);
    }
    for id in r.members() {
        if matches!(r.opcode(id), Opcode::Copy | Opcode::Transpose)
            && (r.single || r.changes_physical(id))
        {
            return (id, HeroClass::CopyTranspose);
        }
    }
    if r.single && matches!(r.opcode(main), Opcode::Reshape) {
        return (main, HeroClass::CopyTranspose);
    }
    (main, HeroClass::Elementwise)
}

// ---------------------------------------------------------------------------
// Dim tracing

fn score(m: &[DimMap]) -> usize {
    m.iter().filter(|x| !matches!(x, DimMap::Full)).count()
}

/// Maps `m` (over dims `to`) onto dims `from`, matching equal sizes from
/// the minor end; unmatched dims are `Full`.
fn positional(from: &[i64], to: &[i64], m: &[DimMap]) -> Maps {
    let mut res = smallvec::smallvec![DimMap::Full; from.len()];
    let mut j = to.len().min(m.len());
    for i in (0..from.len()).rev() {
        if from[i] == 1 {
            continue;
        }
        let mut k = j;
        while k > 0 {
            k -= 1;
            if to[k] == from[i] {
                res[i] = m[k];
                j = k;
                break;
            }
        }
    }
    res
}

/// Maps for the dims `a` of a reshape operand, given maps `m` on the result
/// dims `b` (both in linearisation order). 1:1 groups map directly; a dim
/// split into several becomes a `Window` over the two most-minor parts (its
/// tile spans `(t_major−1)·size_minor + t_minor` elements); merged dims all
/// take the merged dim's map, the more-major ones as [`DimMap::Outer`].
fn reshape_maps(a: &[i64], b: &[i64], m: &[DimMap]) -> Maps {
    let mut res = smallvec::smallvec![DimMap::Full; a.len()];
    let groups = if a.iter().chain(b).any(|&d| d <= 0) {
        None
    } else {
        crate::passes::tiling::reshape_groups(a, b)
    };
    let Some((ga, gb)) = groups else {
        return positional(a, b, m);
    };
    let at = |k: usize| m.get(k).copied().unwrap_or(DimMap::Full);
    // The dims of size > 1 of each side, major → minor: their group numbers never
    // decrease, so each group is a run of each list.
    let na: SmallVec<[usize; 8]> = (0..a.len()).filter(|&i| ga[i] != usize::MAX).collect();
    let nb: SmallVec<[usize; 8]> = (0..b.len()).filter(|&j| gb[j] != usize::MAX).collect();
    let (mut p, mut q) = (0, 0);
    while p < na.len() && q < nb.len() {
        let g = ga[na[p]].min(gb[nb[q]]);
        let pe = p + na[p..].iter().take_while(|&&i| ga[i] == g).count();
        let qe = q + nb[q..].iter().take_while(|&&j| gb[j] == g).count();
        let (oa, ob) = (&na[p..pe], &nb[q..qe]);
        (p, q) = (pe, qe);
        if oa.is_empty() || ob.is_empty() {
            continue;
        }
        if ob.len() == 1 || oa.len() >= 2 {
            // merged (or many-to-many, treated as merged into the minor
            // result dim): the minor operand dim runs along the result dim,
            // the more-major ones advance once per `inner` iterations
            let mm = at(*ob.last().unwrap_or(&0));
            let mut inner = 1i64;
            for &i in oa.iter().rev() {
                res[i] = match mm {
                    DimMap::Iter(d) if inner > 1 => DimMap::Outer { iter: d, inner },
                    x => x,
                };
                inner = inner.saturating_mul(a[i]);
            }
        } else {
            // one operand dim split into several result dims
            let minor = ob[ob.len() - 1];
            let second = ob[ob.len() - 2];
            res[oa[0]] = match (at(second), at(minor)) {
                (DimMap::Iter(o), DimMap::Iter(w)) => DimMap::Window {
                    out: o,
                    win: w,
                    stride: b[minor].max(1),
                    dilation: 1,
                },
                (_, DimMap::Iter(w)) => DimMap::Iter(w),
                (DimMap::Iter(o), _) => DimMap::Iter(o),
                _ => DimMap::Full,
            };
        }
    }
    res
}

/// Dim maps of one instruction's dims (inline for the ranks HLO programs use).
type Maps = SmallVec<[DimMap; 6]>;

/// The maps of an operand, from its user's ([`Tracer::operand_maps`]). Inline: a boxed
/// variant would allocate for every operand traced.
#[allow(clippy::large_enum_variant)]
enum OperandMaps {
    /// The user's own maps (an operand of the same dims: elementwise, slice, …).
    Same,
    New(Maps),
}

struct Tracer<'r, 'm> {
    r: &'r Region<'m>,
    hero: InstrId,
    class: HeroClass,
    hd: HeroDims,
    /// The maps the hero was traced with.
    hero_maps: Maps,
    /// Leaves aliased with the output (in-place update buffers): not read.
    aliased: Vec<InstrId>,
    bufs: TraceBufs,
}

/// The work buffers of a [`Tracer`], kept per thread between kernels (tracing is the
/// innermost loop of lowering, and a program has thousands of kernels).
#[derive(Default)]
struct TraceBufs {
    /// [`score`] of the maps each traced instruction was reached with (the best so far:
    /// an instruction is traced again only with better maps), by [`InstrId::index`];
    /// `scored` lists the indices set, to reset them.
    scores: Vec<Option<usize>>,
    scored: Vec<usize>,
    leaf_maps: HashMap<InstrId, Maps>,
    /// The maps of every queued instruction, one after another; a stack entry names
    /// its maps by their span here (an operand traced with its user's maps shares
    /// the user's span), so queueing moves 24 bytes, not a few hundred.
    maps: Vec<DimMap>,
    /// Instructions to trace: (instruction, start and length of its maps in `maps`).
    stack: Vec<(InstrId, usize, usize)>,
    /// The operand maps of the instruction being traced ([`Tracer::operand_maps`]).
    operands: Vec<(InstrId, OperandMaps)>,
}

thread_local! {
    static TRACE_BUFS: std::cell::Cell<Option<TraceBufs>> = const { std::cell::Cell::new(None) };
}

impl TraceBufs {
    /// This thread's buffers, empty.
    fn take() -> Self {
        TRACE_BUFS.with(|b| b.take()).unwrap_or_default()
    }
}

impl Drop for Tracer<'_, '_> {
    fn drop(&mut self) {
        let mut b = std::mem::take(&mut self.bufs);
        for i in b.scored.drain(..) {
            b.scores[i] = None;
        }
        b.leaf_maps.clear();
        b.maps.clear();
        b.stack.clear();
        TRACE_BUFS.with(|c| c.set(Some(b)));
    }
}

impl Tracer<'_, '_> {
    /// Queue `id` with maps `m` given over dims `src` (see [`Tracer::refit`]).
    fn push(&mut self, id: InstrId, mut m: Maps, src: &[i64]) {
        self.refit(id, &mut m, src);
        let at = self.store(&m);
        self.bufs.stack.push((id, at.0, at.1));
    }

    /// Keep maps `m` in the buffers: their span (start, length).
    fn store(&mut self, m: &[DimMap]) -> (usize, usize) {
        let start = self.bufs.maps.len();
        self.bufs.maps.extend_from_slice(m);
        (start, m.len())
    }

    /// Maps `m` of `id` given over dims `src`, re-fitted to `id`'s dims when the rank
    /// differs (e.g. a tuple element).
    fn refit(&self, id: InstrId, m: &mut Maps, src: &[i64]) {
        if m.len() != self.r.rank(id) {
            *m = positional(&self.r.dims(id), src, m);
        }
    }

    fn run(&mut self) {
        let mut guard = 0usize;
        while let Some((id, start, len)) = self.bufs.stack.pop() {
            guard += 1;
            if guard > 1_000_000 {
                break;
            }
            let span = start..start + len;
            let b = &mut self.bufs;
            if self.r.is_leaf(id) {
                let m = &b.maps[span];
                let e = b
                    .leaf_maps
                    .entry(id)
                    .or_insert_with(|| smallvec::smallvec![DimMap::Full; m.len()]);
                for (slot, &x) in e.iter_mut().zip(m) {
                    if matches!(slot, DimMap::Full) {
                        *slot = x;
                    }
                }
                continue;
            }
            let sc = score(&b.maps[span.clone()]);
            let i = id.index();
            if b.scores.len() <= i {
                b.scores.resize(i + 1, None);
            }
            match b.scores[i] {
                Some(best) if best >= sc => continue,
                Some(_) => {}
                None => b.scored.push(i),
            }
            b.scores[i] = Some(sc);
            if id == self.hero {
                self.hero_maps.clear();
                self.hero_maps
                    .extend_from_slice(&self.bufs.maps[span.clone()]);
            }
            let mut ops = std::mem::take(&mut self.bufs.operands);
            ops.clear();
            self.operand_maps(id, &self.bufs.maps[span.clone()], &mut ops);
            let src = self.r.dims(id);
            // operand 0 is traced first: queued last
            for (o, om) in ops.iter_mut().rev() {
                let o = *o;
                let at = match om {
                    // the user's maps fit: every queued instruction's maps have its rank
                    // (`push` and `refit`), and `Same` is an operand of the user's rank
                    OperandMaps::Same => {
                        debug_assert_eq!(self.r.rank(o), len);
                        (start, len)
                    }
                    OperandMaps::New(m) => {
                        self.refit(o, m, &src);
                        self.store(m)
                    }
                };
                self.bufs.stack.push((o, at.0, at.1));
            }
            self.bufs.operands = ops;
        }
    }

    fn reduced_iter(&self, id: InstrId, d: usize) -> DimMap {
        if id == self.hero
            || (self.class == HeroClass::Reduction
                && self.r.opcode(id) == self.r.opcode(self.hero)
                && self.same_reduce(id))
        {
            self.hd
                .reduced
                .iter()
                .find(|(l, _)| *l == d)
                .map(|&(_, it)| DimMap::Iter(it))
                .unwrap_or(DimMap::Full)
        } else {
            DimMap::Full
        }
    }

    /// A second reduce with the hero's operand dims and reduced dims.
    fn same_reduce(&self, id: InstrId) -> bool {
        let r = self.r;
        let op0 = |x: InstrId| r.operands(x).first().map(|&o| r.dims(o));
        r.ins(id).attrs.dimensions == r.ins(self.hero).attrs.dimensions && op0(id) == op0(self.hero)
    }

    /// Maps of each operand of `id` given maps `m` of its result dims, appended to `res`.
    fn operand_maps(&self, id: InstrId, m: &[DimMap], res: &mut Vec<(InstrId, OperandMaps)>) {
        let r = self.r;
        let ins = r.ins(id);
        let ops = r.operands(id);
        let out_dims = r.dims(id);
        let full = |o: InstrId| smallvec::smallvec![DimMap::Full; r.rank(o)];
        let at = |k: usize| m.get(k).copied().unwrap_or(DimMap::Full);
        // Pushed where made: `Same` is then a tag written, where a returned value is a
        // few hundred bytes moved (a call to memcpy).
        let push_same_or_pos = |res: &mut Vec<(InstrId, OperandMaps)>, o: InstrId| {
            // (an instruction's rank is the length of its dims)
            let rank = r.rank(o);
            // equal rank: the same dims, possibly resized (slice, pad,
            // dynamic-slice, concatenate, reverse, …)
            if rank == out_dims.len() {
                res.push((o, OperandMaps::Same));
            } else if rank == 0 {
                res.push((o, OperandMaps::New(Maps::new())));
            } else {
                res.push((o, OperandMaps::New(positional(&r.dims(o), &out_dims, m))));
            }
        };
        let idx = |d: i64| usize::try_from(d).ok();
        let op = r.opcode(id);
        match op {
            Opcode::Broadcast => {
                if let Some(&o) = ops.first() {
                    let mut om = full(o);
                    if let Some(dims) = &ins.attrs.dimensions {
                        for (j, &d) in dims.iter().enumerate() {
                            if let (Some(slot), Some(d)) = (om.get_mut(j), idx(d)) {
                                *slot = at(d);
                            }
                        }
                    }
                    res.push((o, OperandMaps::New(om)));
                }
            }
            Opcode::Transpose => {
                if let Some(&o) = ops.first() {
                    let mut om = full(o);
                    if let Some(dims) = &ins.attrs.dimensions {
                        for (i, &d) in dims.iter().enumerate() {
                            if let Some(slot) = idx(d).and_then(|d| om.get_mut(d)) {
                                *slot = at(i);
                            }
                        }
                    }
                    res.push((o, OperandMaps::New(om)));
                }
            }
            Opcode::Reshape | Opcode::DynamicReshape => {
                if let Some(&o) = ops.first() {
                    res.push((o, OperandMaps::New(reshape_maps(&r.dims(o), &out_dims, m))));
                }
            }
            Opcode::Bitcast => {
                if let (Some(&o), Some(out_a)) = (ops.first(), r.arr(id)) {
                    let om = match r.arr(o) {
                        Some(src_a) => {
                            // group-match in physical order, then back to logical
                            let po = physical_order(out_a);
                            let ps = physical_order(src_a);
                            let pm: Maps = po.iter().map(|&l| at(l)).collect();
                            let mapped =
                                reshape_maps(&physical_dims(src_a), &physical_dims(out_a), &pm);
                            let mut om = smallvec::smallvec![DimMap::Full; src_a.rank()];
                            for (k, &l) in ps.iter().enumerate() {
                                if let (Some(slot), Some(&x)) = (om.get_mut(l), mapped.get(k)) {
                                    *slot = x;
                                }
                            }
                            om
                        }
                        None => Maps::new(),
                    };
                    res.push((o, OperandMaps::New(om)));
                }
            }
            Opcode::GetTupleElement => {
                if let Some(&o) = ops.first() {
                    let ti = ins.attrs.tuple_index.and_then(|t| usize::try_from(t).ok());
                    if r.opcode(o) == Opcode::Tuple && !r.is_leaf(o) {
                        if let Some(e) = ti.and_then(|t| r.operands(o).get(t).copied()) {
                            push_same_or_pos(res, e);
                            return;
                        }
                    }
                    push_same_or_pos(res, o);
                }
            }
            Opcode::Reduce => {
                let n = ops.len() / 2;
                let reduced: Vec<usize> = ins
                    .attrs
                    .dimensions
                    .as_ref()
                    .map(|d| d.iter().filter_map(|&x| idx(x)).collect())
                    .unwrap_or_default();
                for (k, &o) in ops.iter().enumerate() {
                    if k >= n {
                        res.push((o, OperandMaps::New(full(o))));
                        continue;
                    }
                    let rank = r.rank(o);
                    let mut om = smallvec::smallvec![DimMap::Full; rank];
                    let mut j = 0usize;
                    for (d, slot) in om.iter_mut().enumerate() {
                        if reduced.contains(&d) {
                            *slot = self.reduced_iter(id, d);
                        } else {
                            *slot = at(j);
                            j += 1;
                        }
                    }
                    res.push((o, OperandMaps::New(om)));
                }
            }
            Opcode::ReduceWindow => {
                let n = ops.len() / 2;
                for (k, &o) in ops.iter().enumerate() {
                    if k >= n {
                        res.push((o, OperandMaps::New(full(o))));
                        continue;
                    }
                    let rank = r.rank(o);
                    let mut om = smallvec::smallvec![DimMap::Full; rank];
                    for (d, slot) in om.iter_mut().enumerate() {
                        let wd = ins
                            .attrs
                            .window
                            .as_ref()
                            .and_then(|w| w.dims.get(d))
                            .copied()
                            .unwrap_or_default();
                        let red = if id == self.hero {
                            self.hd.reduced.iter().find(|(l, _)| *l == d).map(|x| x.1)
                        } else {
                            None
                        };
                        *slot = match (red, at(d)) {
                            (Some(w), DimMap::Iter(o)) => DimMap::Window {
                                out: o,
                                win: w,
                                stride: wd.stride.max(1),
                                dilation: wd.window_dilation.max(1),
                            },
                            (_, x) => x,
                        };
                    }
                    res.push((o, OperandMaps::New(om)));
                }
            }
            Opcode::Dot => self.dot_maps(id, m, &ops, res),
            Opcode::Convolution => self.conv_maps(id, m, &ops, res),
            Opcode::Gather => self.gather_maps(id, m, &ops, res),
            Opcode::Scatter => {
                // not the in-place root: operands keep the dims, indices unknown
                let k = ops.len().saturating_sub(1) / 2;
                for (i, &o) in ops.iter().enumerate() {
                    if i < k {
                        push_same_or_pos(res, o);
                    } else if i == k {
                        res.push((o, OperandMaps::New(full(o))));
                    } else {
                        res.push((o, OperandMaps::New(positional(&r.dims(o), &out_dims, m))));
                    }
                }
            }
            Opcode::Iota | Opcode::Constant | Opcode::Rng | Opcode::RngBitGenerator => {}
            _ => {
                for &o in ops.iter() {
                    push_same_or_pos(res, o);
                }
            }
        }
    }

    #[inline(never)]
    fn dot_maps(
        &self,
        id: InstrId,
        m: &[DimMap],
        ops: &[InstrId],
        res: &mut Vec<(InstrId, OperandMaps)>,
    ) {
        let r = self.r;
        let (Some(&lhs), Some(&rhs)) = (ops.first(), ops.get(1)) else {
            return;
        };
        let Some(dd) = r.ins(id).attrs.dot_dims.as_deref() else {
            for &o in ops {
                res.push((o, OperandMaps::New(positional(&r.dims(o), &r.dims(id), m))));
            }
            return;
        };
        let hero = id == self.hero;
        let at = |k: usize| m.get(k).copied().unwrap_or(DimMap::Full);
        let idx = |d: i64| usize::try_from(d).ok();
        let nb = dd.lhs_batch.len();
        let side = |o: InstrId, batch: &[i64], contracting: &[i64], free_start: usize| {
            let rank = r.rank(o);
            let mut om = smallvec::smallvec![DimMap::Full; rank];
            for (k, &d) in batch.iter().enumerate() {
                if let Some(slot) = idx(d).and_then(|d| om.get_mut(d)) {
                    *slot = at(k);
                }
            }
            for (k, &d) in contracting.iter().enumerate() {
                if let Some(slot) = idx(d).and_then(|d| om.get_mut(d)) {
                    *slot = match (hero, self.hd.contraction.get(k)) {
                        (true, Some(&it)) => DimMap::Iter(it),
                        _ => DimMap::Full,
                    };
                }
            }
            let mut j = free_start;
            let mut nfree = 0usize;
            for (d, slot) in om.iter_mut().enumerate() {
                let di = d as i64;
                if !batch.contains(&di) && !contracting.contains(&di) {
                    *slot = at(j);
                    j += 1;
                    nfree += 1;
                }
            }
            (om, nfree)
        };
        let (lm, nlf) = side(lhs, &dd.lhs_batch, &dd.lhs_contracting, nb);
        let (rm, _) = side(rhs, &dd.rhs_batch, &dd.rhs_contracting, nb + nlf);
        res.push((lhs, OperandMaps::New(lm)));
        res.push((rhs, OperandMaps::New(rm)));
        for &o in ops.iter().skip(2) {
            res.push((
                o,
                OperandMaps::New(smallvec::smallvec![DimMap::Full; r.rank(o)]),
            ));
        }
    }

    #[inline(never)]
    fn conv_maps(
        &self,
        id: InstrId,
        m: &[DimMap],
        ops: &[InstrId],
        res: &mut Vec<(InstrId, OperandMaps)>,
    ) {
        let r = self.r;
        let ins = r.ins(id);
        let (Some(&lhs), Some(&rhs)) = (ops.first(), ops.get(1)) else {
            return;
        };
        let Some(cd) = ins.attrs.conv_dims.as_deref() else {
            for &o in ops {
                res.push((o, OperandMaps::New(positional(&r.dims(o), &r.dims(id), m))));
            }
            return;
        };
        let hero = id == self.hero;
        let at = |d: i64| {
            usize::try_from(d)
                .ok()
                .and_then(|d| m.get(d))
                .copied()
                .unwrap_or(DimMap::Full)
        };
        let set = |v: &mut Maps, d: i64, x: DimMap| {
            if let Some(slot) = usize::try_from(d).ok().and_then(|d| v.get_mut(d)) {
                *slot = x;
            }
        };
        let groups = ins.attrs.feature_group_count.unwrap_or(1);
        let cin = match (hero, self.hd.cin) {
            (true, Some(c)) => DimMap::Iter(c),
            _ => DimMap::Full,
        };
        let mut lm = smallvec::smallvec![DimMap::Full; r.rank(lhs)];
        set(&mut lm, cd.input_batch, at(cd.output_batch));
        set(
            &mut lm,
            cd.input_feature,
            if groups > 1 {
                at(cd.output_feature)
            } else {
                cin
            },
        );
        for (i, (&sd, &od)) in cd.input_spatial.iter().zip(&cd.output_spatial).enumerate() {
            let wd = ins
                .attrs
                .window
                .as_ref()
                .and_then(|w| w.dims.get(i))
                .copied()
                .unwrap_or_default();
            let base = wd.base_dilation.max(1);
            let x = match (hero, self.hd.window.get(i), at(od)) {
                (true, Some(&w), DimMap::Iter(o)) => DimMap::Window {
                    out: o,
                    win: w,
                    stride: (wd.stride / base).max(1),
                    dilation: (wd.window_dilation / base).max(1),
                },
                (_, _, x) => x,
            };
            set(&mut lm, sd, x);
        }
        let mut km = smallvec::smallvec![DimMap::Full; r.rank(rhs)];
        set(&mut km, cd.kernel_output_feature, at(cd.output_feature));
        set(&mut km, cd.kernel_input_feature, cin);
        for (i, &kd) in cd.kernel_spatial.iter().enumerate() {
            let x = match (hero, self.hd.window.get(i)) {
                (true, Some(&w)) => DimMap::Iter(w),
                _ => DimMap::Full,
            };
            set(&mut km, kd, x);
        }
        res.push((lhs, OperandMaps::New(lm)));
        res.push((rhs, OperandMaps::New(km)));
    }

    #[inline(never)]
    fn gather_maps(
        &self,
        id: InstrId,
        m: &[DimMap],
        ops: &[InstrId],
        res: &mut Vec<(InstrId, OperandMaps)>,
    ) {
        let r = self.r;
        let (Some(&operand), Some(&indices)) = (ops.first(), ops.get(1)) else {
            return;
        };
        let Some(g) = r.ins(id).attrs.gather.as_deref() else {
            for &o in ops {
                res.push((o, OperandMaps::New(positional(&r.dims(o), &r.dims(id), m))));
            }
            return;
        };
        let out_rank = r.rank(id);
        let at = |k: usize| m.get(k).copied().unwrap_or(DimMap::Full);
        let offset: Vec<usize> = g
            .offset_dims
            .iter()
            .filter_map(|&d| usize::try_from(d).ok())
            .collect();
        let batch: Vec<usize> = (0..out_rank).filter(|d| !offset.contains(d)).collect();
        // the gathered rows follow the innermost batch dim
        let row = batch.last().map(|&b| at(b)).unwrap_or(DimMap::Full);
        let od = r.dims(operand);
        let mut om = smallvec::smallvec![DimMap::Full; od.len()];
        let mut next_offset = offset.iter();
        for (d, slot) in om.iter_mut().enumerate() {
            let di = d as i64;
            let collapsed =
                g.collapsed_slice_dims.contains(&di) || g.operand_batching_dims.contains(&di);
            let slice = g.slice_sizes.get(d).copied().unwrap_or(od[d]);
            let indexed = g.start_index_map.contains(&di) && slice < od[d];
            if collapsed {
                *slot = if g.operand_batching_dims.contains(&di) {
                    DimMap::Full
                } else {
                    row
                };
                continue;
            }
            let o = next_offset.next();
            *slot = if indexed && slice == 1 {
                row
            } else {
                o.map(|&o| at(o)).unwrap_or(DimMap::Full)
            };
        }
        let idd = r.dims(indices);
        let ivd = usize::try_from(g.index_vector_dim).unwrap_or(usize::MAX);
        let mut im = smallvec::smallvec![DimMap::Full; idd.len()];
        let mut bi = batch.iter();
        for (d, slot) in im.iter_mut().enumerate() {
            if d == ivd {
                continue;
            }
            if let Some(&b) = bi.next() {
                *slot = at(b);
            }
        }
        res.push((operand, OperandMaps::New(om)));
        res.push((indices, OperandMaps::New(im)));
    }
}

// ---------------------------------------------------------------------------
// Region lowering

/// Physical TensorDesc of an array.
fn tensor(a: &ArrayShape) -> TensorDesc {
    TensorDesc::typed(physical_dims(a), a.element_type, elem_bits(a))
}

/// Leaf logical maps → physical-order maps of the input tensor.
fn to_physical(a: &ArrayShape, logical: &[DimMap]) -> Vec<DimMap> {
    physical_order(a)
        .iter()
        .map(|&l| logical.get(l).copied().unwrap_or(DimMap::Full))
        .collect()
}

#[inline(never)]
fn precision_of(r: &Region, hero: InstrId) -> MxuPrecision {
    let ops = r.operands(hero);
    let ty = |k: usize| {
        ops.get(k)
            .and_then(|&o| r.arr(o))
            .map(|a| a.element_type)
            .unwrap_or(PrimitiveType::F32)
    };
    let (a, b) = (ty(0), ty(1));
    let int8 = |t: PrimitiveType| t.is_integral() && t.bit_width() <= 8;
    if int8(a) && int8(b) {
        return MxuPrecision::Int8;
    }
    let wide = |t: PrimitiveType| t.bit_width() >= 32;
    if !(wide(a) || wide(b)) {
        return MxuPrecision::Bf16;
    }
    match r.ins(hero).attrs.operand_precision() {
        crate::ir::Precision::Highest => MxuPrecision::F32Highest,
        crate::ir::Precision::High => MxuPrecision::F32High,
        crate::ir::Precision::Default => MxuPrecision::Bf16,
    }
}

fn lower_region(r: &Region, name: &str) -> Result<Option<LoweredKernel>, LowerError> {
    Ok(lower_region_at(r, name)?.map(|(k, _)| k))
}

/// [`lower_region`] and the kernel's hero instruction.
///
/// Every kernel of every configuration runs this one long path, about 40 KB of code,
/// more than a core's instruction cache holds. The helpers that only some kernels need
/// (MXU kernels, gathers, in-place updates, descriptions the model rejects) are kept
/// out of line (`#[inline(never)]`, `#[cold]`) so that the common path stays short: 3 to
/// 7 % fewer instruction-cache misses labelling random configurations (cachegrind; the
/// layout of the rest of the code moves the count by a few per cent).
fn lower_region_at(r: &Region, name: &str) -> Result<Option<(LoweredKernel, InstrId)>, LowerError> {
    let Some(mut outputs) = main_outputs(r) else {
        return Ok(None);
    };
    let in_place = in_place_update(r, &mut outputs);
    let Some(space) = iteration_space(&outputs, in_place.as_ref()) else {
        return Ok(None);
    };
    let hero = choose_hero(r, &outputs, &space, in_place.is_some());
    let red = reduction_dims(r, &hero, space.rank());
    let tr = trace(r, &hero, red.hero, &outputs, &space, in_place);
    let mut inputs = kernel_inputs(r, &tr, &space);
    let kernel_operand = order_inputs(r, &hero, &mut inputs);
    let kind = kernel_kind(r, &hero, &tr, space.rank());
    let work = vpu_work(r, &hero, &red.dims, space.out_arr);
    let desc = KernelDesc {
        name: Name::from(name),
        kind,
        output: space.out_desc,
        reduction_dims: red.dims,
        inputs: inputs.inputs,
        kernel_operand,
        vpu: work.vpu,
        transcendentals: work.transcendentals,
        flops: work.flops,
    };
    let (desc, flattened) = validated(desc, name)?;
    Ok(Some((
        LoweredKernel {
            desc,
            hero: hero.op,
            hero_name: r.name(hero.id),
            side_outputs: outputs.side,
            operand_of_input: inputs.operand_of_input,
            flattened,
        },
        hero.id,
    )))
}

/// What a kernel writes.
struct Outputs<'m> {
    /// The instruction of the main output (the largest data element of a tuple root).
    main: InstrId,
    main_arr: &'m ArrayShape,
    /// Outputs written besides the main one.
    side: Vec<TensorDesc>,
}

/// The region's main output and side outputs; None when it writes no data.
fn main_outputs<'m>(r: &Region<'m>) -> Option<Outputs<'m>> {
    let root_ins = r.ins(r.root);
    let root_shape = r.out_shape.unwrap_or(root_ins.shape);
    let mut side: Vec<TensorDesc> = Vec::new();
    let (main, main_arr): (InstrId, &'m ArrayShape) = match root_shape {
        Shape::Array(a) => (r.root, a),
        Shape::Tuple(_) => {
            let leaves: Vec<(Option<InstrId>, &'m ArrayShape)> =
                if r.opcode(r.root) == Opcode::Tuple && !r.single {
                    let ops = r.operands(r.root);
                    ops.iter()
                        .filter_map(|&o| r.arr(o).map(|a| (Some(o), a)))
                        .collect()
                } else {
                    root_shape.leaves().into_iter().map(|a| (None, a)).collect()
                };
            let bytes = |a: &ArrayShape| elements(a) * f64::from(elem_bits(a));
            let bi = leaves
                .iter()
                .enumerate()
                .filter(|(_, (_, a))| is_data(a))
                .max_by(|x, y| bytes(x.1 .1).total_cmp(&bytes(y.1 .1)))
                .map(|(i, _)| i)?;
            for (i, (_, a)) in leaves.iter().enumerate() {
                if i != bi && is_data(a) {
                    side.push(tensor(a));
                }
            }
            let (p, a) = leaves[bi];
            (p.unwrap_or(r.root), a)
        }
        Shape::Buffer(_) => return None,
    };
    is_data(main_arr).then_some(Outputs {
        main,
        main_arr,
        side,
    })
}

/// An in-place update (dynamic-update-slice, scatter): the kernel iterates over the
/// update, and the buffer is aliased with the output.
#[derive(Default)]
struct InPlace<'m> {
    /// The update's shape (None when it is not data: the output's space is kept).
    update: Option<&'m ArrayShape>,
    /// Buffers that come straight from a leaf: not read.
    aliased: Vec<InstrId>,
    /// Where the trace starts: (instruction, maps, dims the maps are given over), the
    /// last first.
    start: Vec<(InstrId, Maps, Vec<i64>)>,
    /// Buffers computed inside the region, traced after `start`.
    after: Vec<(InstrId, Maps)>,
}

/// The in-place update the main output is, if it is one; buffers computed inside the
/// region are written as side outputs.
#[inline(never)]
fn in_place_update<'m>(r: &Region<'m>, outputs: &mut Outputs<'m>) -> Option<InPlace<'m>> {
    let main = outputs.main;
    let main_op = if r.is_leaf(main) {
        Opcode::Parameter
    } else {
        r.opcode(main)
    };
    if !main_op.updates_in_place() {
        return None;
    }
    let mut ip = InPlace::default();
    let ops = r.operands(main);
    let (buf_k, upd_k) = if main_op == Opcode::Scatter {
        let k = ops.len().saturating_sub(1) / 2;
        (k, k + 1)
    } else {
        (1, 1)
    };
    let upd = ops.get(upd_k).copied();
    let Some(ua) = upd.and_then(|u| r.arr(u)).filter(|a| is_data(a)) else {
        return Some(ip);
    };
    ip.update = Some(ua);
    let udims: Vec<i64> = ua.dims.iter().map(|&d| dim_size(d)).collect();
    let phys = physical_order(ua);
    let mut um: Maps = smallvec::smallvec![DimMap::Full; ua.rank()];
    for (k, &l) in phys.iter().enumerate() {
        um[l] = DimMap::Iter(k);
    }
    // buffers: aliased when they come straight from a leaf
    let n_buf = if main_op == Opcode::Scatter { buf_k } else { 1 };
    for &b in ops.iter().take(n_buf) {
        if r.is_leaf(b) {
            ip.aliased.push(b);
        } else if let Some(ba) = r.arr(b) {
            outputs.side.push(tensor(ba));
            let bm = positional(&r.dims(b), &udims, &um);
            ip.after.push((b, bm));
        }
    }
    if main_op == Opcode::Scatter {
        // indices: scatter dims of the updates
        if let (Some(&idx_op), Some(sd)) = (ops.get(buf_k), r.ins(main).attrs.scatter.as_deref()) {
            let win: Vec<usize> = sd
                .update_window_dims
                .iter()
                .filter_map(|&d| usize::try_from(d).ok())
                .collect();
            let scatter_dims: Vec<usize> = (0..ua.rank()).filter(|d| !win.contains(d)).collect();
            let ivd = usize::try_from(sd.index_vector_dim).unwrap_or(usize::MAX);
            let mut im: Maps = smallvec::smallvec![DimMap::Full; r.rank(idx_op)];
            let mut it = scatter_dims.iter();
            for (d, slot) in im.iter_mut().enumerate() {
                if d != ivd {
                    if let Some(&s) = it.next() {
                        *slot = um[s];
                    }
                }
            }
            ip.start.push((idx_op, im, udims.clone()));
        }
        for &u in ops.iter().skip(upd_k) {
            ip.start.push((u, um.clone(), udims.clone()));
        }
    } else {
        for &o in ops.iter().skip(2) {
            ip.start.push((o, Maps::new(), vec![]));
        }
        if let Some(u) = upd {
            ip.start.push((u, um, udims));
        }
    }
    Some(ip)
}

/// The kernel's iteration space: the physical dims of the array it writes (the update
/// of an in-place update).
struct IterationSpace<'m> {
    /// The array written.
    out_arr: &'m ArrayShape,
    out_desc: TensorDesc,
    /// Logical dims of the main output.
    out_dims_logical: Vec<i64>,
}

impl IterationSpace<'_> {
    /// Number of output iteration dims (the reduction dims come after).
    fn rank(&self) -> usize {
        self.out_desc.dims.len()
    }
}

/// The iteration space of `outputs`; None when it is empty.
fn iteration_space<'m>(
    outputs: &Outputs<'m>,
    in_place: Option<&InPlace<'m>>,
) -> Option<IterationSpace<'m>> {
    let out_arr = in_place
        .and_then(|ip| ip.update)
        .unwrap_or(outputs.main_arr);
    let out_desc = tensor(out_arr);
    if out_desc.dims.iter().any(|&d| d <= 0) {
        return None;
    }
    let out_dims_logical = outputs.main_arr.dims.iter().map(|&d| dim_size(d)).collect();
    Some(IterationSpace {
        out_arr,
        out_desc,
        out_dims_logical,
    })
}

/// The instruction that decides the kernel's kind.
struct Hero {
    id: InstrId,
    class: HeroClass,
    /// Its opcode (`copy` for a leaf).
    op: Opcode,
    /// Its operands (none for a leaf).
    operands: SmallVec<[InstrId; 4]>,
}

/// The hero of the region: the main output itself for an in-place update, else
/// [`find_hero`]'s choice.
fn choose_hero(r: &Region, outputs: &Outputs, space: &IterationSpace, in_place: bool) -> Hero {
    let (id, class) = if in_place {
        (outputs.main, HeroClass::Other)
    } else {
        find_hero(r, outputs.main, &space.out_dims_logical)
    };
    let (op, operands) = if r.is_leaf(id) {
        (Opcode::Copy, SmallVec::new())
    } else {
        (r.opcode(id), SmallVec::from_slice(&r.operands(id)))
    };
    Hero {
        id,
        class,
        op,
        operands,
    }
}

/// The reduction iteration dims of a kernel, numbered after the output dims.
struct ReductionDims {
    rank_out: usize,
    dims: Vec<ReductionDim>,
    /// Which hero dim each one is.
    hero: HeroDims,
}

impl ReductionDims {
    /// Adds a reduction dim; its iteration dim.
    fn push(&mut self, size: i64, kind: ReductionKind) -> usize {
        let it = self.rank_out + self.dims.len();
        self.dims.push(ReductionDim { size, kind });
        it
    }
}

/// The reduction dims the hero adds: contracting dims of a dot, window and input
/// feature of a convolution, reduced dims of a reduce / reduce-window, each in the
/// physical order of the operand that has them.
fn reduction_dims(r: &Region, hero: &Hero, rank_out: usize) -> ReductionDims {
    let mut red = ReductionDims {
        rank_out,
        dims: Vec::new(),
        hero: HeroDims::default(),
    };
    match hero.class {
        HeroClass::Mxu if hero.op == Opcode::Dot => dot_reduction_dims(r, hero, &mut red),
        HeroClass::Mxu => conv_reduction_dims(r, hero, &mut red),
        HeroClass::Reduction => reduced_dims(r, hero, &mut red),
        _ => {}
    }
    red
}

/// A dot's contracting dims.
#[inline(never)]
fn dot_reduction_dims(r: &Region, hero: &Hero, red: &mut ReductionDims) {
    let (Some(dd), Some(la)) = (
        r.ins(hero.id).attrs.dot_dims.as_deref(),
        hero.operands.first().and_then(|&o| r.arr(o)),
    ) else {
        return;
    };
    let phys = physical_order(la);
    let mut cs: Vec<(usize, usize)> = dd
        .lhs_contracting
        .iter()
        .enumerate()
        .filter_map(|(k, &d)| {
            let d = usize::try_from(d).ok()?;
            Some((phys.iter().position(|&p| p == d).unwrap_or(d), k))
        })
        .collect();
    cs.sort_unstable();
    red.hero.contraction = vec![0; dd.lhs_contracting.len()];
    for (_, k) in cs {
        let d = dd.lhs_contracting[k];
        let size = usize::try_from(d)
            .ok()
            .and_then(|d| la.dims.get(d))
            .map(|&x| dim_size(x))
            .unwrap_or(1)
            .max(1);
        let it = red.push(size, ReductionKind::Contraction);
        red.hero.contraction[k] = it;
    }
}

/// A convolution's window dims and input feature.
#[inline(never)]
fn conv_reduction_dims(r: &Region, hero: &Hero, red: &mut ReductionDims) {
    let (Some(cd), Some(ka)) = (
        r.ins(hero.id).attrs.conv_dims.as_deref(),
        hero.operands.get(1).and_then(|&o| r.arr(o)),
    ) else {
        return;
    };
    let phys = physical_order(ka);
    let mut sp: Vec<(usize, usize)> = cd
        .kernel_spatial
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| {
            let d = usize::try_from(d).ok()?;
            Some((phys.iter().position(|&p| p == d).unwrap_or(d), i))
        })
        .collect();
    sp.sort_unstable();
    red.hero.window = vec![0; cd.kernel_spatial.len()];
    let ksize = |d: i64| {
        usize::try_from(d)
            .ok()
            .and_then(|d| ka.dims.get(d))
            .map(|&x| dim_size(x))
            .unwrap_or(1)
            .max(1)
    };
    for (_, i) in sp {
        let it = red.push(ksize(cd.kernel_spatial[i]), ReductionKind::Window);
        red.hero.window[i] = it;
    }
    let it = red.push(ksize(cd.kernel_input_feature), ReductionKind::Contraction);
    red.hero.cin = Some(it);
}

/// The reduced dims of a reduce or reduce-window, by the axis they reduce across.
fn reduced_dims(r: &Region, hero: &Hero, red: &mut ReductionDims) {
    let Some(oa) = hero.operands.first().and_then(|&o| r.arr(o)) else {
        return;
    };
    let phys = physical_order(oa);
    let rank = phys.len();
    let hi = r.ins(hero.id);
    let reduced: Vec<(usize, i64)> = if hero.op == Opcode::Reduce {
        hi.attrs
            .dimensions
            .as_ref()
            .map(|d| {
                d.iter()
                    .filter_map(|&x| usize::try_from(x).ok())
                    .filter(|&x| x < rank)
                    .map(|x| (x, dim_size(oa.dims[x]).max(1)))
                    .collect()
            })
            .unwrap_or_default()
    } else {
        hi.attrs
            .window
            .as_ref()
            .map(|w| {
                w.dims
                    .iter()
                    .enumerate()
                    .filter(|(d, wd)| {
                        *d < rank
                            && (wd.size != 1
                                || wd.stride != 1
                                || wd.window_dilation != 1
                                || wd.base_dilation != 1)
                    })
                    .map(|(d, wd)| (d, wd.size.max(1)))
                    .collect()
            })
            .unwrap_or_default()
    };
    for (pos, &l) in phys.iter().enumerate() {
        if let Some(&(_, size)) = reduced.iter().find(|(d, _)| *d == l) {
            let axis = if pos + 1 == rank {
                ReduceAxis::Lanes
            } else if pos + 2 == rank {
                ReduceAxis::Sublanes
            } else {
                ReduceAxis::Major
            };
            let it = red.push(size, ReductionKind::Reduce(axis));
            red.hero.reduced.push((l, it));
        }
    }
}

/// Dim maps traced from the outputs back to the leaves.
fn trace<'r, 'm>(
    r: &'r Region<'m>,
    hero: &Hero,
    hd: HeroDims,
    outputs: &Outputs,
    space: &IterationSpace,
    in_place: Option<InPlace>,
) -> Tracer<'r, 'm> {
    let (aliased, in_place) = match in_place {
        Some(mut ip) => (std::mem::take(&mut ip.aliased), Some(ip)),
        None => (Vec::new(), None),
    };
    let mut tr = Tracer {
        r,
        hero: hero.id,
        class: hero.class,
        hd,
        hero_maps: Maps::new(),
        aliased,
        bufs: TraceBufs::take(),
    };
    let main = outputs.main;
    let out_phys = physical_order(space.out_arr);
    if let Some(ip) = in_place {
        for (id, m, src) in ip.start.into_iter().rev() {
            tr.push(id, m, &src);
        }
        tr.run();
        for (b, bm) in ip.after {
            let src = r.dims(b);
            tr.push(b, bm, &src);
            tr.run();
        }
    } else {
        let out_dims_logical = &space.out_dims_logical;
        let mut m0: Maps = smallvec::smallvec![DimMap::Full; outputs.main_arr.rank()];
        for (k, &l) in out_phys.iter().enumerate() {
            m0[l] = DimMap::Iter(k);
        }
        tr.push(main, m0.clone(), out_dims_logical);
        tr.run();
        // other outputs of a multi-output fusion read inputs too
        if !r.single && r.opcode(r.root) == Opcode::Tuple {
            for &o in r.operands(r.root).iter() {
                if o != main {
                    tr.push(o, m0.clone(), out_dims_logical);
                    tr.run();
                }
            }
        }
    }
    tr
}

/// The kernel's inputs, with the operand number and leaf each one reads.
struct Inputs {
    inputs: Vec<InputDesc>,
    operand_of_input: Vec<usize>,
    leaf_of_input: SmallVec<[InstrId; 8]>,
}

impl Inputs {
    /// Moves input `p` to the front.
    fn move_to_front(&mut self, p: usize) {
        let i = self.inputs.remove(p);
        self.inputs.insert(0, i);
        let o = self.operand_of_input.remove(p);
        self.operand_of_input.insert(0, o);
        let lf = self.leaf_of_input.remove(p);
        self.leaf_of_input.insert(0, lf);
    }
}

/// One input per leaf read from HBM (not aliased, array data of rank ≥ 1), with the
/// traced maps in the leaf's physical order (positional maps when the trace did not
/// reach it).
fn kernel_inputs(r: &Region, tr: &Tracer, space: &IterationSpace) -> Inputs {
    let n = r.leaves.len();
    let mut res = Inputs {
        inputs: Vec::with_capacity(n),
        operand_of_input: Vec::with_capacity(n),
        leaf_of_input: SmallVec::with_capacity(n),
    };
    let out_phys_dims = &space.out_desc.dims;
    let out_iter_maps: Maps = (0..space.rank()).map(DimMap::Iter).collect();
    for &leaf in &r.leaves {
        if tr.aliased.contains(&leaf) {
            continue;
        }
        let Some(a) = elem_shape(r.ins(leaf).shape) else {
            continue;
        };
        // scalars travel as kernel arguments (SMEM), not as HBM tiles
        if !is_data(a) || r.ins(leaf).shape.is_tuple() || a.rank() == 0 {
            continue;
        }
        let t = tensor(a);
        let dims = match tr.bufs.leaf_maps.get(&leaf) {
            Some(lm) => to_physical(a, lm),
            None => positional(&t.dims, out_phys_dims, &out_iter_maps).into_vec(),
        };
        res.operand_of_input.push(r.leaf_operand(leaf).unwrap_or(0));
        res.leaf_of_input.push(leaf);
        res.inputs.push(InputDesc { tensor: t, dims });
    }
    res
}

/// The leaf `from` reads through its largest operands.
fn walk_to_leaf(r: &Region, from: Option<InstrId>) -> Option<InstrId> {
    let mut cur = from?;
    for _ in 0..64 {
        if r.is_leaf(cur) {
            return Some(cur);
        }
        let ops = r.operands(cur);
        // Follow the largest operand; of equal ones, the first by operand slot (as
        // layout assignment prefers an element-wise op's first operand): a fact of
        // the program, not of the order its instructions are listed in, so a module
        // rebuilt from TpuGraphs features costs what the original does.
        cur = *ops
            .iter()
            .enumerate()
            .max_by(|&(i, &x), &(j, &y)| {
                let ex = r.arr(x).map(elements).unwrap_or(0.0);
                let ey = r.arr(y).map(elements).unwrap_or(0.0);
                ex.total_cmp(&ey).then(j.cmp(&i))
            })?
            .1;
    }
    None
}

/// Puts a reduction's reduced operand first (it decides the work layout); the input
/// that is the MXU kernel operand (the weights), if any.
fn order_inputs(r: &Region, hero: &Hero, inputs: &mut Inputs) -> Option<usize> {
    if hero.class == HeroClass::Reduction {
        if let Some(l) = walk_to_leaf(r, hero.operands.first().copied()) {
            if let Some(p) = inputs.leaf_of_input.iter().position(|&x| x == l) {
                if p > 0 {
                    inputs.move_to_front(p);
                }
            }
        }
    }
    if hero.class == HeroClass::Mxu {
        walk_to_leaf(r, hero.operands.get(1).copied())
            .and_then(|l| inputs.leaf_of_input.iter().position(|&x| x == l))
    } else {
        None
    }
}

/// The kernel kind; for an MXU kernel, the role (batch, M, N) of each output dim from
/// the hero's traced maps.
fn kernel_kind(r: &Region, hero: &Hero, tr: &Tracer, rank_out: usize) -> KernelKind {
    match hero.class {
        HeroClass::Mxu => KernelKind::Mxu(MxuSpec {
            roles: mxu_roles(r, hero, tr, rank_out),
            precision: precision_of(r, hero.id),
        }),
        HeroClass::Reduction => KernelKind::Reduction,
        HeroClass::Other => KernelKind::Other,
        HeroClass::CopyTranspose => KernelKind::CopyTranspose,
        HeroClass::Elementwise => KernelKind::Elementwise,
    }
}

/// The MXU role of each output iteration dim.
#[inline(never)]
fn mxu_roles(r: &Region, hero: &Hero, tr: &Tracer, rank_out: usize) -> Vec<MxuRole> {
    let mut roles = vec![MxuRole::M; rank_out];
    let hm = &tr.hero_maps;
    let role_of_out: Vec<MxuRole> = if hero.op == Opcode::Dot {
        let hi = r.ins(hero.id);
        let nb = hi
            .attrs
            .dot_dims
            .as_ref()
            .map(|d| d.lhs_batch.len())
            .unwrap_or(0);
        let nl = hero
            .operands
            .first()
            .map(|&o| r.rank(o))
            .unwrap_or(0)
            .saturating_sub(
                nb + hi
                    .attrs
                    .dot_dims
                    .as_ref()
                    .map(|d| d.lhs_contracting.len())
                    .unwrap_or(0),
            );
        (0..r.rank(hero.id))
            .map(|j| {
                if j < nb {
                    MxuRole::Batch
                } else if j < nb + nl {
                    MxuRole::M
                } else {
                    MxuRole::N
                }
            })
            .collect()
    } else {
        let cd = r.ins(hero.id).attrs.conv_dims.as_deref();
        (0..r.rank(hero.id))
            .map(|j| match cd {
                Some(cd) if cd.output_feature == j as i64 => MxuRole::N,
                _ => MxuRole::M,
            })
            .collect()
    };
    for (j, m) in hm.iter().enumerate() {
        let role = role_of_out.get(j).copied().unwrap_or(MxuRole::M);
        match *m {
            DimMap::Iter(d) if d < rank_out => roles[d] = role,
            DimMap::Window { out, win, .. } => {
                if out < rank_out {
                    roles[out] = role;
                }
                if win < rank_out {
                    roles[win] = role;
                }
            }
            _ => {}
        }
    }
    roles
}

/// The vector work of a kernel and its flop counts.
struct Work {
    vpu: VpuWork,
    flops: f64,
    transcendentals: f64,
}

/// VPU work per output element (per reduction point for the reduction's operand cone)
/// and the kernel's flops and transcendentals, summed over the region's instructions.
fn vpu_work(r: &Region, hero: &Hero, red: &[ReductionDim], out_arr: &ArrayShape) -> Work {
    let class = hero.class;
    let hops = &hero.operands;
    let out_elems = elements(out_arr).max(1.0);
    let cone = if class == HeroClass::Reduction {
        cone_of(r, &hops[..hops.len() / 2])
    } else {
        Vec::new()
    };
    let point_elems = match (class, hero.op) {
        (HeroClass::Reduction, Opcode::Reduce) => hops
            .first()
            .and_then(|&o| r.arr(o))
            .map(elements)
            .unwrap_or(1.0)
            .max(1.0),
        (HeroClass::Reduction, _) => out_elems * red.iter().map(|x| x.size as f64).product::<f64>(),
        _ => 1.0,
    };
    let mut w = Work {
        vpu: VpuWork::default(),
        flops: 0.0,
        transcendentals: 0.0,
    };
    for id in r.members() {
        let op = r.opcode(id);
        if matches!(op, Opcode::Dot | Opcode::Convolution) {
            let f = mxu_flops(r, id);
            w.flops += f;
            if id != hero.id {
                // a second matmul runs on the MXU too; count it as VPU
                // multiply-adds (documented approximation)
                add_scaled(
                    &mut w.vpu.per_output_element,
                    OpCounts::cheap(f / 2.0),
                    1.0 / out_elems,
                );
            }
            continue;
        }
        let (ops, amount) = vector_ops(r, id, op);
        if total_ops(&ops) == 0.0 {
            continue;
        }
        if op.is_transcendental() {
            w.transcendentals += amount * total_ops(&ops);
        } else {
            w.flops += amount * total_ops(&ops);
        }
        if class == HeroClass::Reduction && (id == hero.id || cone.contains(&id)) {
            add_scaled(&mut w.vpu.per_reduction_point, ops, amount / point_elems);
        } else {
            add_scaled(&mut w.vpu.per_output_element, ops, amount / out_elems);
        }
    }
    w
}

/// The vector ops of one application of instruction `id` (not a dot or convolution)
/// and how many times it is applied.
fn vector_ops(r: &Region, id: InstrId, op: Opcode) -> (OpCounts, f64) {
    let ins = r.ins(id);
    let n = r.arr(id).map(elements).unwrap_or(1.0).max(1.0);
    let mut ops = OpCounts::default();
    let mut applications = n;
    match op {
        Opcode::Reduce
        | Opcode::ReduceWindow
        | Opcode::Map
        | Opcode::Scatter
        | Opcode::SelectAndScatter => {
            let callee = r
                .called(id, CallRole::ToApply)
                .or_else(|| r.called(id, CallRole::Scatter));
            if let Some(c) = callee {
                ops = computation_ops(r.module, c, 0);
            }
            let operand = r.operands(id);
            applications = match op {
                Opcode::Reduce => operand
                    .first()
                    .and_then(|&o| r.arr(o))
                    .map(elements)
                    .unwrap_or(n),
                Opcode::ReduceWindow => {
                    n * ins
                        .attrs
                        .window
                        .as_ref()
                        .map(|w| w.dims.iter().map(|d| d.size.max(1) as f64).product())
                        .unwrap_or(1.0)
                }
                Opcode::Scatter => operand
                    .last()
                    .and_then(|&o| r.arr(o))
                    .map(elements)
                    .unwrap_or(n),
                _ => n,
            };
            if op == Opcode::SelectAndScatter {
                if let Some(c) = r.called(id, CallRole::Select) {
                    add_scaled(&mut ops, computation_ops(r.module, c, 0), 1.0);
                }
            }
        }
        Opcode::Sort | Opcode::TopK => {
            let dims = r.dims(id);
            let sd = ins
                .attrs
                .dimensions
                .as_ref()
                .and_then(|d| d.first())
                .and_then(|&d| usize::try_from(d).ok())
                .unwrap_or(dims.len().saturating_sub(1));
            let len = dims.get(sd).copied().unwrap_or(1).max(2) as f64;
            let stages = len.log2().ceil();
            let per = stages * (stages + 1.0) / 2.0;
            let cmp = r
                .called(id, CallRole::ToApply)
                .map(|c| computation_ops(r.module, c, 0))
                .unwrap_or(OpCounts::cheap(1.0));
            let operands = r.operands(id).len().max(1) as f64;
            add_scaled(&mut ops, cmp, per);
            ops.cheap += per * operands; // selects moving the keys/values
        }
        Opcode::Fft => {
            let len = r.dims(id).last().copied().unwrap_or(2).max(2) as f64;
            ops = OpCounts::cheap(5.0 * len.log2());
        }
        Opcode::TriangularSolve | Opcode::Cholesky => {
            let len = r.dims(id).last().copied().unwrap_or(1).max(1) as f64;
            ops = OpCounts::cheap(len);
        }
        Opcode::CustomCall | Opcode::Gather => ops = OpCounts::cheap(1.0),
        Opcode::AllReduce | Opcode::AllReduceStart | Opcode::ReduceScatter => {
            ops = OpCounts::cheap(1.0)
        }
        _ => ops = op_class(op),
    }
    (ops, applications)
}

/// The description, or its flattened approximation (and true) when the model rejects
/// it.
fn validated(desc: KernelDesc, name: &str) -> Result<(KernelDesc, bool), LowerError> {
    if desc.validate().is_ok() {
        return Ok((desc, false));
    }
    let flat = flatten(&desc);
    flat.validate().map_err(|source| LowerError::Model {
        kernel: name.to_string(),
        source,
    })?;
    Ok((flat, true))
}

/// Instructions in the operand cone of `roots` inside the region.
fn cone_of(r: &Region, roots: &[InstrId]) -> Vec<InstrId> {
    let mut seen: Vec<InstrId> = Vec::new();
    let mut stack: Vec<InstrId> = roots.to_vec();
    while let Some(id) = stack.pop() {
        if r.is_leaf(id) || seen.contains(&id) {
            continue;
        }
        seen.push(id);
        if r.single {
            continue;
        }
        stack.extend_from_slice(&r.operands(id));
    }
    seen
}

/// 2-D approximation of a description the model rejects (rank > MAX_DIMS,
/// bad dims): output `[Π major, minor]`, reduction work folded into the
/// per-output-element ops, inputs `[Π major, minor]` streamed along the rows.
#[cold]
#[inline(never)]
fn flatten(d: &KernelDesc) -> KernelDesc {
    let two = |dims: &[i64]| -> Vec<i64> {
        let dims: Vec<i64> = dims.iter().map(|&x| x.max(1)).collect();
        match dims.len() {
            0 => vec![1, 1],
            1 => vec![1, dims[0]],
            n => vec![
                dims[..n - 1].iter().fold(1i64, |a, &b| a.saturating_mul(b)),
                dims[n - 1],
            ],
        }
    };
    let out = two(&d.output.dims);
    let red: f64 = d
        .reduction_dims
        .iter()
        .map(|x| x.size.max(1) as f64)
        .product();
    let mut per_out = d.vpu.per_output_element;
    add_scaled(&mut per_out, d.vpu.per_reduction_point, red);
    let inputs = d
        .inputs
        .iter()
        .map(|i| {
            let t = two(&i.tensor.dims);
            let minor = if t[1] == out[1] {
                DimMap::Iter(1)
            } else {
                DimMap::Full
            };
            InputDesc {
                tensor: TensorDesc::typed(t, i.tensor.elem, i.tensor.elem_bits.clamp(1, 64)),
                dims: vec![DimMap::Iter(0), minor],
            }
        })
        .collect();
    KernelDesc {
        name: d.name.clone(),
        kind: KernelKind::Other,
        output: TensorDesc::typed(out, d.output.elem, d.output.elem_bits.clamp(1, 64)),
        reduction_dims: vec![],
        inputs,
        kernel_operand: None,
        vpu: VpuWork {
            per_output_element: per_out,
            per_reduction_point: OpCounts::default(),
        },
        transcendentals: d.transcendentals,
        flops: d.flops,
    }
}

/// Human-readable summary of a lowered kernel: kind, iteration space and the
/// dim map of every input (used by `explain_kernel`), one line each; the FLOPs line
/// names its formula.
pub fn describe(k: &LoweredKernel) -> Vec<Figure> {
    let d = &k.desc;
    let mut v = Vec::new();
    let kind = match &d.kind {
        KernelKind::Mxu(spec) => format!(
            "Mxu (roles {:?}, precision {:?})",
            spec.roles, spec.precision
        ),
        other => format!("{other:?}"),
    };
    v.push(Figure::plain(format!(
        "Lowering of `{}`: kind {kind}, hero `{}` ({})",
        d.name,
        k.hero_name,
        k.hero.name()
    )));
    if k.flattened {
        v.push(Figure::plain(
            "  (flattened 2-D approximation: the traced description was rejected)",
        ));
    }
    v.push(Figure::plain(format!(
        "  output {:?} ({} bit) = iteration dims 0..{}",
        d.output.dims,
        d.output.elem_bits,
        d.output.dims.len()
    )));
    for (i, q) in d.reduction_dims.iter().enumerate() {
        v.push(Figure::plain(format!(
            "  iteration dim {}: reduction {:?}, extent {}",
            d.output.dims.len() + i,
            q.kind,
            q.size
        )));
    }
    for (i, inp) in d.inputs.iter().enumerate() {
        let tag = if d.kernel_operand == Some(i) {
            " [kernel operand]"
        } else {
            ""
        };
        v.push(Figure::plain(format!(
            "  input {i} (operand {}){tag}: {:?} ({} bit), dims → {:?}",
            k.operand_of_input.get(i).copied().unwrap_or(i),
            inp.tensor.dims,
            inp.tensor.elem_bits,
            inp.dims
        )));
    }
    for t in &k.side_outputs {
        v.push(Figure::plain(format!(
            "  side output {:?} ({} bit): extra write",
            t.dims, t.elem_bits
        )));
    }
    v.push(Figure::new(
        format!(
            "  VPU ops per output element {:?}; per reduction point {:?}; flops {:.4e}",
            d.vpu.per_output_element, d.vpu.per_reduction_point, d.flops
        ),
        &[Formula::KernelFlops],
    ));
    v
}

/// Upper bound on iteration dims, re-exported for docs/tests.
pub const MAX_ITER_DIMS: usize = MAX_DIMS;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_maps_split_merge_and_identity() {
        let m = [DimMap::Iter(0), DimMap::Iter(1), DimMap::Iter(2)];
        // split: [1024, 768] read by an [8,128,768] consumer
        assert_eq!(
            reshape_maps(&[1024, 768], &[8, 128, 768], &m).into_vec(),
            vec![
                DimMap::Window {
                    out: 0,
                    win: 1,
                    stride: 128,
                    dilation: 1
                },
                DimMap::Iter(2)
            ]
        );
        // merge: [8,128,768] read by a [1024,768] consumer
        assert_eq!(
            reshape_maps(&[8, 128, 768], &[1024, 768], &m[..2]).into_vec(),
            vec![
                DimMap::Outer {
                    iter: 0,
                    inner: 128
                },
                DimMap::Iter(0),
                DimMap::Iter(1)
            ]
        );
        // size-1 dims are Full (extent 1 either way), inside a group too
        assert_eq!(
            reshape_maps(&[1, 64], &[64], &m[..1]).into_vec(),
            vec![DimMap::Full, DimMap::Iter(0)]
        );
        assert_eq!(
            reshape_maps(&[2, 1, 3], &[2, 3], &m[..2]).into_vec(),
            vec![DimMap::Iter(0), DimMap::Full, DimMap::Iter(1)]
        );
        // no grouping (an empty dim, or other element counts): positional maps
        assert_eq!(
            reshape_maps(&[0, 3], &[3], &m[..1]).into_vec(),
            vec![DimMap::Full, DimMap::Iter(0)]
        );
        assert_eq!(
            reshape_maps(&[6], &[7], &m[..1]).into_vec(),
            vec![DimMap::Full]
        );
    }

    #[test]
    fn positional_matches_from_the_minor_end() {
        let m = [DimMap::Iter(0), DimMap::Iter(1), DimMap::Iter(2)];
        assert_eq!(
            positional(&[5, 7], &[3, 5, 7], &m).into_vec(),
            vec![DimMap::Iter(1), DimMap::Iter(2)]
        );
        assert_eq!(
            positional(&[9, 1, 7], &[3, 5, 7], &m).into_vec(),
            vec![DimMap::Full, DimMap::Full, DimMap::Iter(2)]
        );
    }
}
