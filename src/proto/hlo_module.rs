//! `xla.HloModuleProto` → IR ([`crate::ir::Module`]), the same IR the HLO
//! text front end builds.
//!
//! The module is decoded with the zero-copy [`ModuleView`]; operands are
//! resolved by instruction id through a hash map (ids are module-wide and
//! may be `(computation_id << 32) + local index`), called computations by
//! computation id. Attributes are typed exactly as the text front end types
//! them, and normalised to what XLA prints, so that the IR read from a proto
//! equals the IR parsed from the text XLA dumps for the same module:
//!
//! * an attribute XLA only prints when it differs from its default is set
//!   only then (`feature_group_count`/`batch_group_count` ≠ 1, compare
//!   `type=` ≠ the element type's default, `is_stable`/`indices_are_sorted`/
//!   `unique_indices` only when true, `channel_id` > 0, `window` only with
//!   dimensions, dot dimension numbers only when one list is non-empty);
//! * layouts: tail padding alignment 1 (what jaxlib writes) reads as 0 (XLA
//!   prints neither), the combine-tile value `INT64_MIN` reads as -1, a
//!   missing layout on an array is filled row-major (as the text front end
//!   fills it), token/opaque shapes have no layout;
//! * constants become the literal text XLA prints ([`super::literal`]),
//!   including `{...}` for arrays of more than 10 elements;
//! * `metadata`, `frontend_attributes`, `backend_config` become the raw text
//!   XLA prints (the text front end keeps them raw).
//!
//! Not converted (see `docs/binary-inputs.md`): `sharding`, dot `algorithm`,
//! `parameter_replication`, custom-call `literal=`, and async wrapper
//! computations are kept as `async-start(..), calls=` instead of being folded
//! into the `X-start` sugar the text printer uses.

use super::instr_fields as F;
use std::collections::{HashMap, HashSet};

use indexmap::IndexMap;
use smallvec::SmallVec;

use super::error::{ProtoError, Result};
use super::literal::literal_text;
use super::view::{ComputationView, InstructionView, LayoutView, ModuleView, ShapeView};
use super::wire::{as_int, as_msg, push_varints, Reader, WireError};
use super::xla;
use crate::hlo::attrs::escape;
use crate::ir::*;

/// Reads a serialized `HloModuleProto` into the IR.
pub fn module_from_proto_bytes(bytes: &[u8]) -> Result<Module> {
    module_from_view(&ModuleView::decode(bytes)?)
}

/// The module(s) a binary file holds, as IR, chosen by
/// [`detect`](super::detect::detect): an `HloModuleProto` gives one module,
/// a `ModuleTuningData` its module, a `TuningData` the module of every kernel
/// (kernels without a module are skipped). HLO text or unrecognised content
/// gives [`ProtoError::WrongKind`] (parse text with [`crate::hlo`]).
pub fn modules_from_binary(bytes: &[u8]) -> Result<Vec<Module>> {
    use super::detect::{detect, InputKind};
    match detect(bytes) {
        InputKind::HloModuleProto => Ok(vec![module_from_proto_bytes(bytes)?]),
        InputKind::ModuleTuningData | InputKind::TuningData => {
            let t = super::tuning::read_tuning(bytes)?;
            t.modules()
                .iter()
                .filter_map(|m| m.module.as_ref())
                .map(module_from_proto)
                .collect()
        }
        found => Err(ProtoError::WrongKind {
            expected: InputKind::HloModuleProto,
            found,
        }),
    }
}

/// Converts a decoded prost `HloModuleProto` (e.g. the module of a TpuGraphs
/// tuning file) into the IR.
pub fn module_from_proto(p: &xla::HloModuleProto) -> Result<Module> {
    let bytes = prost::Message::encode_to_vec(p);
    module_from_proto_bytes(&bytes)
}

/// Converts a decoded [`ModuleView`] into the IR.
pub fn module_from_view(v: &ModuleView<'_>) -> Result<Module> {
    let entry = v
        .entry_index()
        .ok_or_else(|| ProtoError::invalid(format!("module `{}`", v.name), "has no computation"))?;
    // Computation id → index (IndexMap position = file order).
    let mut comp_ids: FastMap<i64, CompId> = FastMap::default();
    comp_ids.reserve(v.computations.len());
    for (k, c) in v.computations.iter().enumerate() {
        if comp_ids.insert(c.id, k).is_some() {
            return Err(ProtoError::invalid(
                format!("computation `{}`", c.name),
                format!("computation id {} is used twice", c.id),
            ));
        }
    }
    let mut computations: IndexMap<String, Computation> =
        IndexMap::with_capacity(v.computations.len());
    let mut ids: FastMap<i64, InstrId> = FastMap::default();
    let mut opcodes = OpcodeCache::default();
    let mut names: FastSet<&str> = FastSet::default();
    for c in &v.computations {
        let comp = computation(c, &comp_ids, &mut ids, &mut names, &mut opcodes)?;
        match computations.entry(comp.name.clone()) {
            indexmap::map::Entry::Occupied(_) => {
                return Err(ProtoError::invalid(
                    format!("computation `{}`", comp.name),
                    "is defined twice",
                ))
            }
            indexmap::map::Entry::Vacant(e) => {
                e.insert(comp);
            }
        }
    }
    let entry_computation_layout = match &v.host_program_shape {
        Some(p) => {
            let ctx = || "host_program_shape".to_string();
            let params = p
                .parameters
                .iter()
                .map(|s| shape(s, &ctx))
                .collect::<Result<Vec<_>>>()?;
            let result = match &p.result {
                Some(r) => shape(r, &ctx)?,
                None => Shape::Tuple(vec![]),
            };
            Some((params, result))
        }
        None => None,
    };
    let m = Module {
        name: v.name.to_string(),
        attrs: ModuleAttrs {
            entry_computation_layout,
            is_scheduled: v.has_schedule,
            other: Vec::new(),
        },
        stack_frames: None,
        computations,
        entry,
    };
    // The rules the text front end applies too (shapes' sizes, call nesting and cycles).
    check_module(&m).map_err(|e| {
        let context = match &e.instruction {
            Some(i) => format!("computation `{}`, instruction `{i}`", e.computation),
            None if e.computation.is_empty() => "host_program_shape".to_string(),
            None => format!("computation `{}`", e.computation),
        };
        ProtoError::invalid(context, e.message)
    })?;
    Ok(m)
}

fn computation<'a>(
    c: &ComputationView<'a>,
    comp_ids: &FastMap<i64, CompId>,
    ids: &mut FastMap<i64, InstrId>,
    names: &mut FastSet<&'a str>,
    opcodes: &mut OpcodeCache<'a>,
) -> Result<Computation> {
    let mut comp = Computation::new(c.name);
    let n = c.instruction_count();
    comp.graph.reserve_nodes(n);
    comp.graph.reserve_edges(2 * n);
    comp.order.reserve(n);
    comp.execution_thread = match c.execution_thread {
        "" | "main" => None,
        t => Some(t.to_string()),
    };
    ids.clear();
    ids.reserve(n);
    names.clear();
    names.reserve(n);
    let mut params: Vec<(i64, InstrId)> = Vec::new();
    let mut root = None;
    let mut i = InstructionView::default();
    for k in 0..n {
        c.instruction_into(k, &mut i)?;
        let i = &i;
        let ctx = || format!("computation `{}`, instruction `{}`", c.name, i.name);
        let mut operands: SmallVec<[InstrId; 4]> = SmallVec::with_capacity(i.operand_ids.len());
        for &o in &i.operand_ids {
            match ids.get(&o) {
                Some(&id) => operands.push(id),
                None => {
                    return Err(ProtoError::invalid(
                        ctx(),
                        format!("operand id {o} is not an earlier instruction of this computation"),
                    ))
                }
            }
        }
        let opcode = match opcodes.get(i.opcode) {
            Some(&o) => o,
            None => {
                let o = Opcode::from_name(i.opcode)
                    .ok_or_else(|| bad(&ctx, format!("unknown opcode '{}'", i.opcode)))?;
                opcodes.insert(i.opcode, o);
                o
            }
        };
        if !names.insert(i.name) {
            return Err(ProtoError::invalid(ctx(), "instruction name is used twice"));
        }
        // What the attributes need from other instructions, read before the
        // new node is borrowed mutably.
        let operand_info = OperandInfo {
            type0: operands
                .first()
                .map(|&o| comp.graph[o].shape.element_type()),
            rank0: operands.first().map_or(0, |&o| comp.graph[o].shape.rank()),
            rank1: operands.get(1).map_or(0, |&o| comp.graph[o].shape.rank()),
        };
        let mut control_predecessors = Vec::new();
        for p in &i.control_predecessor_ids {
            let pid = ids.get(p).ok_or_else(|| {
                bad(
                    &ctx,
                    format!("control predecessor id {p} is not an earlier instruction"),
                )
            })?;
            control_predecessors.push(comp.graph[*pid].name.to_string());
        }
        // The node is created first and filled in place: an instruction is
        // ~900 bytes and every move of it showed in profiles.
        let id = comp
            .graph
            .add_node(Instruction::new(i.name, opcode, Shape::Tuple(Vec::new())));
        for (slot, &op) in operands.iter().enumerate() {
            comp.graph.add_edge(op, id, slot as u32);
        }
        comp.order.push(id);
        let ins = &mut comp.graph[id];
        if !control_predecessors.is_empty() {
            ins.attrs.control_predecessors = control_predecessors;
        }
        fill_instruction(i, ins, &operand_info, comp_ids, &ctx)?;
        if ids.insert(i.id, id).is_some() {
            return Err(ProtoError::invalid(
                ctx(),
                format!("instruction id {} is used twice", i.id),
            ));
        }
        if opcode == Opcode::Parameter {
            params.push((i.parameter_number, id));
        }
        if i.id == c.root_id {
            root = Some(id);
        }
    }
    comp.root = match root {
        Some(r) => r,
        None if n == 0 => {
            return Err(ProtoError::invalid(
                format!("computation `{}`", c.name),
                "has no instructions",
            ))
        }
        None => {
            return Err(ProtoError::invalid(
                format!("computation `{}`", c.name),
                format!("root id {} is not one of its instructions", c.root_id),
            ))
        }
    };
    params.sort_unstable_by_key(|(n, _)| *n);
    for (k, (n, _)) in params.iter().enumerate() {
        if *n != k as i64 {
            return Err(ProtoError::invalid(
                format!("computation `{}`", c.name),
                format!(
                    "parameter numbers must be 0..{} without gaps or repeats; found {n}",
                    params.len().saturating_sub(1)
                ),
            ));
        }
    }
    comp.params = params.into_iter().map(|(_, id)| id).collect();
    Ok(comp)
}

/// FNV-1a: a fast hasher for the short opcode strings.
#[derive(Default)]
struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write_i64(&mut self, x: i64) {
        // one multiply spreads the low bits (instruction indices) to the
        // high bits hashbrown uses for its control bytes
        self.0 = (self.0 ^ x as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// Hash map with the FNV hasher (ids and names are short keys).
type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fnv>>;
/// Hash set with the FNV hasher.
type FastSet<K> = HashSet<K, std::hash::BuildHasherDefault<Fnv>>;

/// Opcode text → [`Opcode`], memoised per module (a module has few distinct
/// opcodes; the binary search over 132 names showed up in profiles).
type OpcodeCache<'a> = HashMap<&'a str, Opcode, std::hash::BuildHasherDefault<Fnv>>;

fn bad(ctx: &dyn Fn() -> String, msg: impl Into<String>) -> ProtoError {
    ProtoError::invalid(ctx(), msg)
}

/// Shape proto → IR shape, normalised as the text front end builds it.
fn shape(s: &ShapeView, ctx: &dyn Fn() -> String) -> Result<Shape> {
    shape_at(s, ctx, 0)
}

fn shape_at(s: &ShapeView, ctx: &dyn Fn() -> String, depth: usize) -> Result<Shape> {
    if depth > super::view::MAX_SHAPE_DEPTH {
        return Err(bad(ctx, "shape nested too deeply"));
    }
    let ty = PrimitiveType::from_proto_number(s.element_type).ok_or_else(|| {
        bad(
            ctx,
            format!("unknown element type number {}", s.element_type),
        )
    })?;
    match ty {
        PrimitiveType::Tuple => Ok(Shape::Tuple(
            s.tuple_shapes
                .iter()
                .map(|t| shape_at(t, ctx, depth + 1))
                .collect::<Result<_>>()?,
        )),
        PrimitiveType::Buffer => match s.tuple_shapes.first() {
            Some(t) => Ok(Shape::Buffer(Box::new(shape_at(t, ctx, depth + 1)?))),
            None => Err(bad(ctx, "buffer shape without an element shape")),
        },
        PrimitiveType::Invalid => Err(bad(ctx, "shape has no element type")),
        _ => {
            let mut dynamic_mask = 0u64;
            for (k, &d) in s.is_dynamic_dimension.iter().enumerate() {
                if d && k < 64 {
                    dynamic_mask |= 1 << k;
                }
            }
            let rank = s.dimensions.len();
            let layout = if !ty.is_array() {
                None
            } else {
                match &s.layout {
                    Some(l) => Some(layout(l, rank, ctx)?),
                    None => Some(Layout::row_major(rank)),
                }
            };
            if !ty.is_array() && rank > 0 {
                return Err(bad(ctx, format!("'{ty}' shapes cannot have dimensions")));
            }
            Ok(Shape::Array(ArrayShape {
                element_type: ty,
                dims: s.dimensions.iter().copied().collect(),
                dynamic_mask,
                layout,
            }))
        }
    }
}

/// Shape bytes → IR shape directly (no intermediate [`ShapeView`]), with the
/// same normalisation as [`shape`].
fn shape_from_bytes(b: &[u8], ctx: &dyn Fn() -> String, depth: usize) -> Result<Shape> {
    let wire = |err: WireError| ProtoError::Malformed {
        what: "xla.HloModuleProto",
        context: format!("{} shape", ctx()),
        err,
    };
    if depth > super::view::MAX_SHAPE_DEPTH {
        return Err(bad(ctx, "shape nested too deeply"));
    }
    let mut ty = 0i32;
    let mut dims_v = Dims::new();
    let mut tuple: SmallVec<[&[u8]; 4]> = SmallVec::new();
    let mut layout_bytes: Option<&[u8]> = None;
    let mut flags: SmallVec<[i64; 6]> = SmallVec::new();
    let mut r = Reader::new(b);
    while let Some((n, v)) = r.next().map_err(wire)? {
        match n {
            2 => ty = as_int(v).map_err(wire)? as i32,
            3 => push_varints(v, &mut dims_v).map_err(wire)?,
            4 => tuple.push(as_msg(v).map_err(wire)?),
            5 => layout_bytes = Some(as_msg(v).map_err(wire)?),
            6 => push_varints(v, &mut flags).map_err(wire)?,
            _ => {}
        }
    }
    let ty = PrimitiveType::from_proto_number(ty)
        .ok_or_else(|| bad(ctx, format!("unknown element type number {ty}")))?;
    match ty {
        PrimitiveType::Tuple => Ok(Shape::Tuple(
            tuple
                .iter()
                .map(|t| shape_from_bytes(t, ctx, depth + 1))
                .collect::<Result<_>>()?,
        )),
        PrimitiveType::Buffer => match tuple.first() {
            Some(t) => Ok(Shape::Buffer(Box::new(shape_from_bytes(
                t,
                ctx,
                depth + 1,
            )?))),
            None => Err(bad(ctx, "buffer shape without an element shape")),
        },
        PrimitiveType::Invalid => Err(bad(ctx, "shape has no element type")),
        _ => {
            let rank = dims_v.len();
            if !ty.is_array() && rank > 0 {
                return Err(bad(ctx, format!("'{ty}' shapes cannot have dimensions")));
            }
            let mut dynamic_mask = 0u64;
            for (k, &d) in flags.iter().enumerate() {
                if d != 0 && k < 64 {
                    dynamic_mask |= 1 << k;
                }
            }
            let layout = if !ty.is_array() {
                None
            } else {
                match layout_bytes {
                    Some(lb) => Some(layout_from_bytes(lb, rank, ctx)?),
                    None => Some(Layout::row_major(rank)),
                }
            };
            Ok(Shape::Array(ArrayShape {
                element_type: ty,
                dims: dims_v,
                dynamic_mask,
                layout,
            }))
        }
    }
}

/// Layout bytes → IR layout directly, validated and normalised as [`layout`].
fn layout_from_bytes(b: &[u8], rank: usize, ctx: &dyn Fn() -> String) -> Result<Layout> {
    let wire = |err: WireError| ProtoError::Malformed {
        what: "xla.HloModuleProto",
        context: format!("{} layout", ctx()),
        err,
    };
    let mut l = Layout::default();
    let mut r = Reader::new(b);
    while let Some((n, v)) = r.next().map_err(wire)? {
        match n {
            1 => push_varints(v, &mut l.minor_to_major).map_err(wire)?,
            6 => {
                let mut t = Tile::default();
                let mut tr = Reader::new(as_msg(v).map_err(wire)?);
                while let Some((tn, tv)) = tr.next().map_err(wire)? {
                    if tn == 1 {
                        push_varints(tv, &mut t.dims).map_err(wire)?;
                    }
                }
                for d in t.dims.iter_mut() {
                    if *d == i64::MIN {
                        *d = -1;
                    }
                }
                l.tiles.push(t);
            }
            7 => l.element_size_in_bits = as_int(v).map_err(wire)?,
            8 => l.memory_space = as_int(v).map_err(wire)?,
            16 => l.tail_padding_alignment = as_int(v).map_err(wire)?,
            _ => {}
        }
    }
    if l.tail_padding_alignment == 1 {
        l.tail_padding_alignment = 0;
    }
    check_minor_to_major(&l.minor_to_major, rank, ctx)?;
    Ok(l)
}

fn check_minor_to_major(m2m: &[i64], rank: usize, ctx: &dyn Fn() -> String) -> Result<()> {
    if m2m.is_empty() && rank == 0 {
        return Ok(());
    }
    if m2m.len() != rank {
        return Err(bad(
            ctx,
            format!(
                "layout has {} dimensions but the shape has rank {rank}",
                m2m.len()
            ),
        ));
    }
    let mut seen: u64 = 0;
    let mut seen_big: Vec<bool> = if rank > 64 {
        vec![false; rank]
    } else {
        Vec::new()
    };
    for &d in m2m {
        let ok = match usize::try_from(d) {
            Ok(i) if i < rank && rank <= 64 => {
                let fresh = seen & (1 << i) == 0;
                seen |= 1 << i;
                fresh
            }
            Ok(i) if i < rank => match seen_big.get_mut(i) {
                Some(s) if !*s => {
                    *s = true;
                    true
                }
                _ => false,
            },
            _ => false,
        };
        if !ok {
            return Err(bad(
                ctx,
                "layout minor_to_major is not a permutation of the dimensions",
            ));
        }
    }
    Ok(())
}

fn layout(l: &LayoutView, rank: usize, ctx: &dyn Fn() -> String) -> Result<Layout> {
    let m2m = &l.minor_to_major;
    check_minor_to_major(m2m, rank, ctx)?;
    Ok(Layout {
        minor_to_major: m2m.iter().copied().collect(),
        tiles: l
            .tiles
            .iter()
            .map(|t| Tile {
                dims: t
                    .iter()
                    .map(|&d| if d == i64::MIN { -1 } else { d })
                    .collect(),
            })
            .collect(),
        tail_padding_alignment: match l.tail_padding_alignment_in_elements {
            1 => 0,
            n => n,
        },
        element_size_in_bits: l.element_size_in_bits,
        memory_space: l.memory_space,
        extra: Vec::new(),
    })
}

fn dims(v: &[i64]) -> Dims {
    v.iter().copied().collect()
}

fn int_list_text(v: &[i64]) -> String {
    let mut s = String::from("{");
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&x.to_string());
    }
    s.push('}');
    s
}

/// Default comparison type of an element type (XLA omits `type=` then).
fn default_comparison_type(t: PrimitiveType) -> &'static str {
    if t.is_floating() || t.is_complex() {
        "FLOAT"
    } else if t.is_signed_integral() {
        "SIGNED"
    } else {
        "UNSIGNED"
    }
}

/// Facts about the operands that some attributes depend on.
struct OperandInfo {
    /// Element type of operand 0 (compare type default, conditional form).
    type0: Option<PrimitiveType>,
    /// Rank of operand 0 (convolution dim_labels).
    rank0: usize,
    /// Rank of operand 1 (convolution dim_labels).
    rank1: usize,
}

/// Fills shape and attributes of a freshly added instruction node.
#[allow(clippy::too_many_lines)]
fn fill_instruction(
    i: &InstructionView<'_>,
    ins: &mut Instruction,
    operands: &OperandInfo,
    comp_ids: &FastMap<i64, CompId>,
    ctx: &dyn Fn() -> String,
) -> Result<()> {
    use Opcode as O;
    let opcode = ins.opcode;
    ins.shape = match i.shape_bytes {
        Some(b) => shape_from_bytes(b, ctx, 0)?.into(),
        None => return Err(bad(ctx, "instruction has no shape")),
    };
    let operand_type = |k: usize| if k == 0 { operands.type0 } else { None };
    let operand_rank = |k: usize| match k {
        0 => operands.rank0,
        _ => operands.rank1,
    };
    let shp = &ins.shape;
    // One copy-on-write check for all of the instruction's attributes.
    let a: &mut crate::ir::Attrs = &mut ins.attrs;

    match opcode {
        O::Parameter => a.parameter_number = Some(i.parameter_number),
        O::GetTupleElement => a.tuple_index = Some(i.tuple_index),
        O::Constant => {
            a.literal = Some(match i.message::<xla::LiteralProto>(F::LITERAL)? {
                Some(lit) => literal_text(&lit, shp).map_err(|m| bad(ctx, m))?,
                None => "{...}".to_string(),
            })
        }
        O::Iota => a.iota_dimension = Some(i.dimensions.first().copied().unwrap_or(0)),
        O::Broadcast
        | O::Transpose
        | O::Reduce
        | O::Reverse
        | O::Concatenate
        | O::Sort
        | O::Map
        | O::AllGather
        | O::AllGatherStart
        | O::ReduceScatter
        | O::GetDimensionSize
        | O::SetDimensionSize
        | O::Scan => a.dimensions = Some(dims(&i.dimensions)),
        O::AllToAll if !i.dimensions.is_empty() => a.dimensions = Some(dims(&i.dimensions)),
        _ => {}
    }

    // Window (convolution, reduce-window, select-and-scatter, custom-call).
    if let Some(w) = i.message::<xla::Window>(F::WINDOW)? {
        if !w.dimensions.is_empty() {
            a.window = Some(Box::new(Window {
                dims: w
                    .dimensions
                    .iter()
                    .map(|d| WindowDim {
                        size: d.size,
                        stride: d.stride,
                        pad_low: d.padding_low,
                        pad_high: d.padding_high,
                        window_dilation: if d.window_dilation == 0 {
                            1
                        } else {
                            d.window_dilation
                        },
                        base_dilation: if d.base_dilation == 0 {
                            1
                        } else {
                            d.base_dilation
                        },
                        window_reversal: d.window_reversal,
                    })
                    .collect(),
            }));
        }
    }
    if let Some(c) =
        i.message::<xla::ConvolutionDimensionNumbers>(F::CONVOLUTION_DIMENSION_NUMBERS)?
    {
        a.conv_dims = Some(Box::new(ConvDims {
            input_batch: c.input_batch_dimension,
            input_feature: c.input_feature_dimension,
            input_spatial: dims(&c.input_spatial_dimensions),
            kernel_input_feature: c.kernel_input_feature_dimension,
            kernel_output_feature: c.kernel_output_feature_dimension,
            kernel_spatial: dims(&c.kernel_spatial_dimensions),
            output_batch: c.output_batch_dimension,
            output_feature: c.output_feature_dimension,
            output_spatial: dims(&c.output_spatial_dimensions),
            ranks: [
                operand_rank(0) as u8,
                operand_rank(1) as u8,
                shp.rank() as u8,
            ],
        }));
    }
    if opcode == O::Slice {
        let s = i.messages::<xla::hlo_instruction_proto::SliceDimensions>(F::SLICE_DIMENSIONS)?;
        a.slice = Some(
            s.iter()
                .map(|d| SliceDim {
                    start: d.start,
                    limit: d.limit,
                    stride: d.stride,
                })
                .collect(),
        );
    }
    if opcode == O::ReducePrecision {
        a.exponent_bits = Some(i.int(F::EXPONENT_BITS)?);
        a.mantissa_bits = Some(i.int(F::MANTISSA_BITS)?);
    }
    if opcode == O::DynamicSlice {
        a.dynamic_slice_sizes = Some(i.ints(F::DYNAMIC_SLICE_SIZES)?.into_boxed_slice());
    }
    if opcode == O::Pad {
        let p = i
            .message::<xla::PaddingConfig>(F::PADDING_CONFIG)?
            .unwrap_or_default();
        a.padding = Some(
            p.dimensions
                .iter()
                .map(|d| PadDim {
                    low: d.edge_padding_low,
                    high: d.edge_padding_high,
                    interior: d.interior_padding,
                })
                .collect(),
        );
    }
    if opcode == O::Rng {
        a.distribution = Some(
            match i.int(F::DISTRIBUTION)? {
                1 => "rng_uniform",
                2 => "rng_normal",
                _ => "rng_invalid",
            }
            .to_string(),
        );
    }
    if matches!(
        opcode,
        O::BatchNormTraining | O::BatchNormInference | O::BatchNormGrad
    ) {
        a.epsilon = Some(i.float(F::EPSILON)?);
        a.feature_index = Some(i.int(F::FEATURE_INDEX)?);
    }
    let channel_id = i.int(F::CHANNEL_ID)?;
    if channel_id > 0 {
        a.channel_id = Some(channel_id);
    }
    if opcode == O::CustomCall {
        a.custom_call_target = Some(i.string(F::CUSTOM_CALL_TARGET)?.to_string());
    }
    if let Some(d) = i.message::<xla::DotDimensionNumbers>(F::DOT_DIMENSION_NUMBERS)? {
        let dd = DotDims {
            lhs_batch: dims(&d.lhs_batch_dimensions),
            lhs_contracting: dims(&d.lhs_contracting_dimensions),
            rhs_batch: dims(&d.rhs_batch_dimensions),
            rhs_contracting: dims(&d.rhs_contracting_dimensions),
        };
        if !(dd.lhs_batch.is_empty()
            && dd.lhs_contracting.is_empty()
            && dd.rhs_batch.is_empty()
            && dd.rhs_contracting.is_empty())
        {
            a.dot_dims = Some(Box::new(dd));
        }
    }
    if opcode == O::Fft {
        a.fft_type = Some(
            match i.int(F::FFT_TYPE)? {
                0 => "FFT",
                1 => "IFFT",
                2 => "RFFT",
                3 => "IRFFT",
                _ => "FFT",
            }
            .to_string(),
        );
        a.fft_length = Some(i.ints(F::FFT_LENGTH)?.into_boxed_slice());
    }
    if opcode == O::Gather {
        let g = i
            .message::<xla::GatherDimensionNumbers>(33)?
            .unwrap_or_default();
        a.gather = Some(Box::new(GatherDims {
            offset_dims: dims(&g.offset_dims),
            collapsed_slice_dims: dims(&g.collapsed_slice_dims),
            start_index_map: dims(&g.start_index_map),
            index_vector_dim: g.index_vector_dim,
            operand_batching_dims: dims(&g.operand_batching_dims),
            start_indices_batching_dims: dims(&g.start_indices_batching_dims),
            slice_sizes: dims(&i.ints(F::GATHER_SLICE_SIZES)?),
        }));
    }
    if opcode == O::Scatter {
        let s = i
            .message::<xla::ScatterDimensionNumbers>(48)?
            .unwrap_or_default();
        a.scatter = Some(Box::new(ScatterDims {
            update_window_dims: dims(&s.update_window_dims),
            inserted_window_dims: dims(&s.inserted_window_dims),
            scatter_dims_to_operand_dims: dims(&s.scatter_dims_to_operand_dims),
            index_vector_dim: s.index_vector_dim,
            input_batching_dims: dims(&s.input_batching_dims),
            scatter_indices_batching_dims: dims(&s.scatter_indices_batching_dims),
        }));
    }
    if matches!(opcode, O::Convolution | O::CustomCall) {
        let f = i.int(F::FEATURE_GROUP_COUNT)?;
        if f != 0 && f != 1 {
            a.feature_group_count = Some(f);
        }
        let b = i.int(F::BATCH_GROUP_COUNT)?;
        if b != 0 && b != 1 {
            a.batch_group_count = Some(b);
        }
    }
    if i.flag(F::IS_STABLE)? {
        a.is_stable = Some(true);
    }
    if opcode == O::CustomCall && i.flag(F::CUSTOM_CALL_HAS_SIDE_EFFECT)? {
        a.custom_call_has_side_effect = Some(true);
    }
    if opcode == O::Compare {
        let dir = i.string(F::COMPARISON_DIRECTION)?;
        a.comparison = Some(
            Comparison::from_name(dir)
                .ok_or_else(|| bad(ctx, format!("unknown comparison direction '{dir}'")))?,
        );
        let t = i.string(F::COMPARISON_TYPE)?;
        let default = operand_type(0).map_or("FLOAT", default_comparison_type);
        if !t.is_empty() && t != default {
            a.comparison_type = Some(t.to_string());
        }
    }
    if i.flag(F::INDICES_ARE_SORTED)? {
        a.indices_are_sorted = Some(true);
    }
    if i.flag(F::UNIQUE_INDICES)? {
        a.unique_indices = Some(true);
    }
    if opcode == O::TopK {
        a.k = Some(i.int(F::K)?);
        a.largest = Some(i.flag(F::LARGEST)?);
    }
    if opcode == O::Fusion {
        let k = i.string(F::FUSION_KIND)?;
        a.fusion_kind = Some(
            FusionKind::from_name(k)
                .ok_or_else(|| bad(ctx, format!("unknown fusion kind '{k}'")))?,
        );
    }

    // Called computations, with the role the text form uses.
    let called: SmallVec<[CompId; 2]> = i
        .called_computation_ids
        .iter()
        .map(|c| {
            comp_ids
                .get(c)
                .copied()
                .ok_or_else(|| bad(ctx, format!("called computation id {c} does not exist")))
        })
        .collect::<Result<_>>()?;
    let role_list = |role: CallRole| called.iter().map(move |&c| (role, c));
    a.called = match opcode {
        O::While => match called.as_slice() {
            [body, cond] => {
                smallvec::smallvec![(CallRole::Condition, *cond), (CallRole::Body, *body)]
            }
            _ => return Err(bad(ctx, "while needs [body, condition] computations")),
        },
        O::SelectAndScatter => match called.as_slice() {
            [select, scatter] => {
                smallvec::smallvec![(CallRole::Select, *select), (CallRole::Scatter, *scatter)]
            }
            _ => {
                return Err(bad(
                    ctx,
                    "select-and-scatter needs [select, scatter] computations",
                ))
            }
        },
        O::Conditional if operand_type(0) == Some(PrimitiveType::Pred) => match called.as_slice() {
            [t, f] => smallvec::smallvec![
                (CallRole::TrueComputation, *t),
                (CallRole::FalseComputation, *f)
            ],
            _ => return Err(bad(ctx, "a predicated conditional needs two branches")),
        },
        O::Conditional => role_list(CallRole::BranchComputations).collect(),
        O::Fusion | O::AsyncStart => role_list(CallRole::Calls).collect(),
        O::CustomCall => role_list(CallRole::CalledComputations).collect(),
        O::Call
        | O::Map
        | O::Reduce
        | O::ReduceWindow
        | O::ReduceScatter
        | O::AllReduce
        | O::AllReduceStart
        | O::Scatter
        | O::Sort
        | O::Scan => role_list(CallRole::ToApply).collect(),
        _ => role_list(CallRole::Calls).collect(),
    };

    other_attrs(i, opcode, a)?;

    if let Some(m) = i.message::<xla::OpMetadata>(F::METADATA)? {
        let t = metadata_text(&m);
        if t != "{}" {
            a.metadata = Some(t);
        }
    }
    if let Some(f) = i.message::<xla::FrontendAttributes>(F::FRONTEND_ATTRIBUTES)? {
        if !f.map.is_empty() {
            let items: Vec<String> = f
                .map
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            a.frontend_attributes = Some(format!("{{{}}}", items.join(",")));
        }
    }
    let bc = i.bytes(F::BACKEND_CONFIG)?;
    if !bc.is_empty() {
        a.backend_config = Some(match std::str::from_utf8(bc) {
            Ok(s) if s.trim_start().starts_with('{') => s.to_string(),
            Ok(s) => format!("\"{}\"", escape(s)),
            Err(_) => {
                let mut s = String::from("\"");
                for &b in bc {
                    if (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\' {
                        s.push(b as char);
                    } else {
                        s.push_str(&format!("\\x{b:02x}"));
                    }
                }
                s.push('"');
                s
            }
        });
    }
    Ok(())
}

/// Untyped attributes the text front end keeps verbatim in `Attrs::other`,
/// in the order XLA prints them.
fn other_attrs(i: &InstructionView<'_>, opcode: Opcode, a: &mut Attrs) -> Result<()> {
    use Opcode as O;
    if i.other.is_empty()
        && !matches!(
            opcode,
            O::RngBitGenerator
                | O::RngGetAndUpdateState
                | O::Scan
                | O::CollectivePermute
                | O::CollectivePermuteStart
        )
    {
        return Ok(());
    }
    let mut push = |k: &str, v: String| a.other.push((k.to_string(), v));
    // replica groups: legacy list (49), explicit list (87) or iota form (92)
    let groups = i.messages::<xla::ReplicaGroup>(F::REPLICA_GROUPS)?;
    if !groups.is_empty() {
        push("replica_groups", groups_text(&groups));
    } else if let Some(l) =
        i.message::<xla::CollectiveDeviceListProto>(F::COLLECTIVE_DEVICE_LIST)?
    {
        push("replica_groups", groups_text(&l.replica_groups));
    } else if let Some(g) =
        i.message::<xla::IotaReplicaGroupListProto>(F::IOTA_COLLECTIVE_DEVICE_LIST)?
    {
        let mut s = format!(
            "[{},{}]<={}",
            g.num_replica_groups,
            g.num_devices_per_group,
            brackets(&g.iota_reshape_dims)
        );
        let identity = g
            .iota_transpose_perm
            .iter()
            .enumerate()
            .all(|(k, &p)| p as usize == k);
        if !identity {
            let perm: Vec<i64> = g
                .iota_transpose_perm
                .iter()
                .map(|&p| i64::from(p))
                .collect();
            s.push_str(&format!("T({})", join(&perm)));
        }
        push("replica_groups", s);
    }
    if i.flag(F::CONSTRAIN_LAYOUT)? {
        push("constrain_layout", "true".into());
    }
    if i.flag(F::USE_GLOBAL_DEVICE_IDS)? {
        push("use_global_device_ids", "true".into());
    }
    let pairs = i.messages::<xla::SourceTarget>(F::SOURCE_TARGET_PAIRS)?;
    if !pairs.is_empty() || matches!(opcode, O::CollectivePermute | O::CollectivePermuteStart) {
        let v: Vec<String> = pairs
            .iter()
            .map(|p| format!("{{{},{}}}", p.source, p.target))
            .collect();
        push("source_target_pairs", format!("{{{}}}", v.join(",")));
    }
    if let Some(p) = i.message::<xla::PrecisionConfig>(F::PRECISION_CONFIG)? {
        if p.operand_precision.iter().any(|&x| x != 0) {
            let v: Vec<&str> = p
                .operand_precision
                .iter()
                .map(|&x| match x {
                    1 => "high",
                    2 => "highest",
                    _ => "default",
                })
                .collect();
            push("operand_precision", format!("{{{}}}", v.join(",")));
        }
    }
    if opcode == O::CustomCall {
        let aliasing = i.messages::<xla::OutputOperandAliasing>(F::OUTPUT_OPERAND_ALIASING)?;
        if !aliasing.is_empty() {
            let v: Vec<String> = aliasing
                .iter()
                .map(|x| {
                    format!(
                        "{}: ({}, {})",
                        int_list_text(&x.output_shape_index),
                        x.operand_index,
                        int_list_text(&x.operand_shape_index)
                    )
                })
                .collect();
            push(
                "output_to_operand_aliasing",
                format!("{{{}}}", v.join(", ")),
            );
        }
        match i.int(F::CUSTOM_CALL_SCHEDULE)? {
            1 => push("schedule", "SCHEDULE_LATEST".into()),
            2 => push("schedule", "SCHEDULE_EARLIEST".into()),
            _ => {}
        }
        match i.int(F::CUSTOM_CALL_API_VERSION)? {
            2 => push("api_version", "API_VERSION_STATUS_RETURNING".into()),
            3 => push("api_version", "API_VERSION_STATUS_RETURNING_UNIFIED".into()),
            4 => push("api_version", "API_VERSION_TYPED_FFI".into()),
            _ => {}
        }
    }
    if i.flag(F::IS_HOST_TRANSFER)? {
        push("is_host_transfer", "true".into());
    }
    if opcode == O::RngBitGenerator {
        let v = match i.int(F::RNG_ALGORITHM)? {
            1 => "rng_three_fry",
            2 => "rng_philox",
            _ => "rng_default",
        };
        push("algorithm", v.into());
    }
    if opcode == O::RngGetAndUpdateState {
        push("delta", i.int(F::DELTA)?.to_string());
    }
    let infeed = i.bytes(F::INFEED_CONFIG)?;
    if !infeed.is_empty() {
        push(
            "infeed_config",
            format!("\"{}\"", escape(&String::from_utf8_lossy(infeed))),
        );
    }
    let outfeed = i.bytes(F::OUTFEED_CONFIG)?;
    if !outfeed.is_empty() {
        push(
            "outfeed_config",
            format!("\"{}\"", escape(&String::from_utf8_lossy(outfeed))),
        );
    }
    let thread = i.string(F::ASYNC_EXECUTION_THREAD)?;
    if !thread.is_empty() && thread != "main" {
        push("async_execution_thread", format!("\"{}\"", escape(thread)));
    }
    if i.flag(F::IS_COMPOSITE)? {
        push("is_composite", "true".into());
    }
    if opcode == O::Scan {
        push("num_carries", i.int(F::NUM_CARRIES)?.to_string());
        if i.flag(F::IS_REVERSE)? {
            push("is_reverse", "true".into());
        }
    }
    if let Some(r) = i.message::<xla::RaggedDotDimensionNumbers>(F::RAGGED_DOT_DIMENSION_NUMBERS)? {
        if let Some(d) = &r.dot_dimension_numbers {
            for (k, v) in [
                ("lhs_batch_dims", &d.lhs_batch_dimensions),
                ("lhs_contracting_dims", &d.lhs_contracting_dimensions),
                ("rhs_batch_dims", &d.rhs_batch_dimensions),
                ("rhs_contracting_dims", &d.rhs_contracting_dimensions),
            ] {
                if !v.is_empty() {
                    push(k, int_list_text(v));
                }
            }
        }
        push("lhs_ragged_dims", int_list_text(&r.lhs_ragged_dimensions));
        push("rhs_group_dims", int_list_text(&r.rhs_group_dimensions));
    }
    Ok(())
}

fn join(v: &[i64]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn brackets(v: &[i64]) -> String {
    format!("[{}]", join(v))
}

fn groups_text(groups: &[xla::ReplicaGroup]) -> String {
    let v: Vec<String> = groups
        .iter()
        .map(|g| int_list_text(&g.replica_ids))
        .collect();
    format!("{{{}}}", v.join(","))
}

/// XLA's `OpMetadataToString`, wrapped in braces as the text form prints it.
fn metadata_text(m: &xla::OpMetadata) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !m.op_type.is_empty() {
        parts.push(format!("op_type=\"{}\"", escape(&m.op_type)));
    }
    if !m.op_name.is_empty() {
        parts.push(format!("op_name=\"{}\"", escape(&m.op_name)));
    }
    if !m.source_file.is_empty() {
        parts.push(format!("source_file=\"{}\"", escape(&m.source_file)));
    }
    if m.source_line != 0 {
        parts.push(format!("source_line={}", m.source_line));
    }
    if m.source_end_line != 0 {
        parts.push(format!("source_end_line={}", m.source_end_line));
    }
    if m.source_column != 0 {
        parts.push(format!("source_column={}", m.source_column));
    }
    if m.source_end_column != 0 {
        parts.push(format!("source_end_column={}", m.source_end_column));
    }
    if !m.deduplicated_name.is_empty() {
        parts.push(format!(
            "deduplicated_name=\"{}\"",
            escape(&m.deduplicated_name)
        ));
    }
    if !m.scheduling_name.is_empty() {
        parts.push(format!(
            "scheduling_name=\"{}\"",
            escape(&m.scheduling_name)
        ));
    }
    if m.stack_frame_id != 0 {
        parts.push(format!("stack_frame_id={}", m.stack_frame_id));
    }
    format!("{{{}}}", parts.join(" "))
}
