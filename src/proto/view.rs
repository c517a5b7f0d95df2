//! Fast, zero-copy decoding of `xla.HloModuleProto` for building the IR.
//!
//! The prost messages in [`super::xla`] allocate every string and list of
//! every instruction (decoding a 1 MB module costs ~10 ms, dominated by
//! malloc/free). This view borrows names from the input, keeps small integer
//! lists in `SmallVec`s, and decodes only what every instruction needs:
//! name, opcode, shape (with layout and tiles), id, operands, called
//! computations, control predecessors, parameter number, tuple index and
//! dimensions. Every other field is kept as its raw wire value
//! ([`InstructionView::other`]) and decoded on demand — attribute messages
//! through the prost types (`inst.message::<xla::Window>(15)`), scalars and
//! strings by the typed accessors.
//!
//! Semantics follow protobuf: absent scalars are 0/false/"", the last
//! occurrence of a scalar wins, packed and unpacked repeated numbers are both
//! accepted, unknown fields are skipped. (A singular sub-message written
//! twice is merged by protobuf; this view keeps the last occurrence of
//! `shape`/`layout`/`program_shape` — no writer emits them twice.)

use smallvec::SmallVec;

use super::error::{ProtoError, Result};
use super::wire::{as_int, as_msg, as_str, push_varints, Reader, WireError, WireValue};
use super::xla;

/// Deepest tuple nesting accepted in a shape.
pub const MAX_SHAPE_DEPTH: usize = 64;

/// Decoded `xla.HloModuleProto` (fields the IR needs), borrowing `bytes`.
#[derive(Debug, Clone, Default)]
pub struct ModuleView<'a> {
    /// Module name (field 1).
    pub name: &'a str,
    /// Entry computation name (field 2).
    pub entry_computation_name: &'a str,
    /// Computations in file order, callees first (field 3).
    pub computations: Vec<ComputationView<'a>>,
    /// Entry signature with layouts (field 4).
    pub host_program_shape: Option<ProgramShapeView<'a>>,
    /// Module id (field 5).
    pub id: i64,
    /// Entry computation id (field 6; absent = 0).
    pub entry_computation_id: i64,
    /// A schedule is present (field 7; text form `is_scheduled=true`).
    pub has_schedule: bool,
}

/// Decoded `xla.HloComputationProto`; instructions are decoded on demand.
#[derive(Debug, Clone, Default)]
pub struct ComputationView<'a> {
    /// Position in the module.
    pub index: usize,
    /// Computation name (field 1).
    pub name: &'a str,
    /// Raw instruction payloads, operands first (field 2).
    pub instruction_bytes: Vec<&'a [u8]>,
    /// Raw parameter and result shapes (field 4).
    pub program_shape_bytes: Option<&'a [u8]>,
    /// Computation id (field 5).
    pub id: i64,
    /// Id of the root instruction (field 6).
    pub root_id: i64,
    /// Body of a fusion instruction (field 7).
    pub is_fusion_computation: bool,
    /// Async execution thread name (field 8).
    pub execution_thread: &'a str,
}

/// Decoded `xla.ProgramShapeProto`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProgramShapeView<'a> {
    /// Parameter shapes (field 1).
    pub parameters: Vec<ShapeView>,
    /// Result shape (field 2).
    pub result: Option<ShapeView>,
    /// Parameter names (field 3).
    pub parameter_names: Vec<&'a str>,
}

/// Decoded `xla.ShapeProto`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShapeView {
    /// `PrimitiveType` number (field 2; unknown numbers kept).
    pub element_type: i32,
    /// Dimension sizes, major-to-minor logical order (field 3).
    pub dimensions: SmallVec<[i64; 6]>,
    /// Element shapes of a tuple (field 4).
    pub tuple_shapes: Vec<ShapeView>,
    /// Layout (field 5); `None` on tuples and layout-less shapes.
    pub layout: Option<LayoutView>,
    /// Per-dimension dynamic flags (field 6; may be empty).
    pub is_dynamic_dimension: SmallVec<[bool; 6]>,
}

/// Decoded `xla.LayoutProto` (dense layouts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LayoutView {
    /// Minor-to-major dimension order (field 1).
    pub minor_to_major: SmallVec<[i64; 6]>,
    /// Tiles, first applied first (field 6; `TileProto.dimensions`).
    pub tiles: SmallVec<[SmallVec<[i64; 2]>; 2]>,
    /// Packed element width, 0 = natural (field 7).
    pub element_size_in_bits: i64,
    /// Memory space, 0 = default (field 8).
    pub memory_space: i64,
    /// Tail padding alignment, 0/1 = none (field 16).
    pub tail_padding_alignment_in_elements: i64,
}

/// Decoded `xla.HloInstructionProto`: hot fields plus the raw rest.
#[derive(Debug, Clone, Default)]
pub struct InstructionView<'a> {
    /// Instruction name (field 1).
    pub name: &'a str,
    /// Opcode text (field 2).
    pub opcode: &'a str,
    /// Raw result shape (field 3); see [`InstructionView::shape`].
    pub shape_bytes: Option<&'a [u8]>,
    /// Parameter number (field 9).
    pub parameter_number: i64,
    /// Tuple index of get-tuple-element (field 13).
    pub tuple_index: i64,
    /// Op-dependent dimension list (field 14).
    pub dimensions: SmallVec<[i64; 4]>,
    /// Module-wide id (field 35; absent = 0).
    pub id: i64,
    /// Operand ids in operand order (field 36).
    pub operand_ids: SmallVec<[i64; 4]>,
    /// Control predecessor ids (field 37).
    pub control_predecessor_ids: SmallVec<[i64; 2]>,
    /// Called computation ids (field 38).
    pub called_computation_ids: SmallVec<[i64; 2]>,
    /// Every other field in wire order, except the debug-only
    /// `statistics_viz` (82) and empty `metadata` (7) / `frontend_attributes`
    /// (68) / `sparsity_config` (98) messages.
    pub other: SmallVec<[(u32, WireValue<'a>); 4]>,
}

fn wire_err(
    what: &'static str,
    context: impl FnOnce() -> String,
) -> impl FnOnce(WireError) -> ProtoError {
    move |err| ProtoError::Malformed {
        what,
        context: context(),
        err,
    }
}

impl<'a> ModuleView<'a> {
    /// Decodes a serialized `HloModuleProto`. Malformed input gives
    /// [`ProtoError::Malformed`] naming the computation and instruction.
    pub fn decode(bytes: &'a [u8]) -> Result<Self> {
        const WHAT: &str = "xla.HloModuleProto";
        let mut m = ModuleView::default();
        let mut r = Reader::new(bytes);
        let top = || "module".to_string();
        while let Some((n, v)) = r.next().map_err(wire_err(WHAT, top))? {
            let ctx = || format!("module field {n}");
            match n {
                1 => m.name = as_str(v).map_err(wire_err(WHAT, ctx))?,
                2 => m.entry_computation_name = as_str(v).map_err(wire_err(WHAT, ctx))?,
                3 => {
                    let k = m.computations.len();
                    let payload = as_msg(v).map_err(wire_err(WHAT, ctx))?;
                    m.computations.push(ComputationView::decode(payload, k)?);
                }
                4 => {
                    let payload = as_msg(v).map_err(wire_err(WHAT, ctx))?;
                    m.host_program_shape = Some(
                        ProgramShapeView::decode(payload)
                            .map_err(wire_err(WHAT, || "host_program_shape".to_string()))?,
                    );
                }
                5 => m.id = as_int(v).map_err(wire_err(WHAT, ctx))?,
                6 => m.entry_computation_id = as_int(v).map_err(wire_err(WHAT, ctx))?,
                7 => m.has_schedule = true,
                _ => {}
            }
        }
        Ok(m)
    }

    /// Index of the entry computation: the one whose id is
    /// `entry_computation_id` (if its name agrees with
    /// `entry_computation_name` or that is empty), else the one named
    /// `entry_computation_name`, else the id match, else the last one (spec
    /// section 2; `entry_computation_id` 0 is absent on the wire, so an old
    /// writer that never set it must not select callee 0). `None` if there
    /// are no computations.
    pub fn entry_index(&self) -> Option<usize> {
        let by_id = self
            .computations
            .iter()
            .position(|c| c.id == self.entry_computation_id);
        let by_name = || {
            self.computations
                .iter()
                .position(|c| c.name == self.entry_computation_name)
        };
        match by_id {
            Some(i)
                if self.entry_computation_name.is_empty()
                    || self.computations.get(i).map(|c| c.name)
                        == Some(self.entry_computation_name) =>
            {
                Some(i)
            }
            _ => by_name()
                .or(by_id)
                .or_else(|| self.computations.len().checked_sub(1)),
        }
    }

    /// Number of instructions over all computations.
    pub fn instruction_count(&self) -> usize {
        self.computations
            .iter()
            .map(|c| c.instruction_bytes.len())
            .sum()
    }
}

impl<'a> ComputationView<'a> {
    fn decode(bytes: &'a [u8], index: usize) -> Result<Self> {
        const WHAT: &str = "xla.HloModuleProto";
        let mut c = ComputationView {
            index,
            ..ComputationView::default()
        };
        let mut r = Reader::new(bytes);
        loop {
            let next = r.next().map_err(|err| ProtoError::Malformed {
                what: WHAT,
                context: c.here(),
                err,
            })?;
            let Some((n, v)) = next else { break };
            let res: std::result::Result<(), WireError> = (|| {
                match n {
                    1 => c.name = as_str(v)?,
                    2 => c.instruction_bytes.push(as_msg(v)?),
                    4 => c.program_shape_bytes = Some(as_msg(v)?),
                    5 => c.id = as_int(v)?,
                    6 => c.root_id = as_int(v)?,
                    7 => c.is_fusion_computation = as_int(v)? != 0,
                    8 => c.execution_thread = as_str(v)?,
                    _ => {}
                }
                Ok(())
            })();
            res.map_err(|err| ProtoError::Malformed {
                what: WHAT,
                context: format!("{} field {n}", c.here()),
                err,
            })?;
        }
        Ok(c)
    }

    fn here(&self) -> String {
        if self.name.is_empty() {
            format!("computation #{}", self.index)
        } else {
            format!("computation #{} `{}`", self.index, self.name)
        }
    }

    /// Number of instructions.
    pub fn instruction_count(&self) -> usize {
        self.instruction_bytes.len()
    }

    /// Decodes instruction `k` (errors name the computation and instruction).
    pub fn instruction(&self, k: usize) -> Result<InstructionView<'a>> {
        let Some(b) = self.instruction_bytes.get(k) else {
            return Err(ProtoError::invalid(
                self.here(),
                format!("has no instruction #{k}"),
            ));
        };
        let mut i = InstructionView::default();
        i.decode_into(b).map_err(|err| ProtoError::Malformed {
            what: "xla.HloModuleProto",
            context: if i.name.is_empty() {
                format!("{}, instruction #{k}", self.here())
            } else {
                format!("{}, instruction #{k} `{}`", self.here(), i.name)
            },
            err,
        })?;
        Ok(i)
    }

    /// Decodes instruction `k` into `out`, reusing its buffers.
    pub fn instruction_into(&self, k: usize, out: &mut InstructionView<'a>) -> Result<()> {
        let Some(b) = self.instruction_bytes.get(k) else {
            return Err(ProtoError::invalid(
                self.here(),
                format!("has no instruction #{k}"),
            ));
        };
        out.clear();
        out.decode_into(b).map_err(|err| ProtoError::Malformed {
            what: "xla.HloModuleProto",
            context: if out.name.is_empty() {
                format!("{}, instruction #{k}", self.here())
            } else {
                format!("{}, instruction #{k} `{}`", self.here(), out.name)
            },
            err,
        })
    }

    /// Decodes every instruction, in order.
    pub fn instructions(&self) -> impl Iterator<Item = Result<InstructionView<'a>>> + '_ {
        (0..self.instruction_bytes.len()).map(move |k| self.instruction(k))
    }

    /// Decodes the computation's program shape (`None` if absent).
    pub fn program_shape(&self) -> Result<Option<ProgramShapeView<'a>>> {
        self.program_shape_bytes
            .map(ProgramShapeView::decode)
            .transpose()
            .map_err(|err| ProtoError::Malformed {
                what: "xla.HloModuleProto",
                context: format!("{} program_shape", self.here()),
                err,
            })
    }
}

impl<'a> ProgramShapeView<'a> {
    fn decode(bytes: &'a [u8]) -> std::result::Result<Self, WireError> {
        let mut p = ProgramShapeView::default();
        let mut r = Reader::new(bytes);
        while let Some((n, v)) = r.next()? {
            match n {
                1 => p.parameters.push(ShapeView::decode_at(as_msg(v)?, 0)?),
                2 => p.result = Some(ShapeView::decode_at(as_msg(v)?, 0)?),
                3 => p.parameter_names.push(as_str(v)?),
                _ => {}
            }
        }
        Ok(p)
    }
}

impl ShapeView {
    /// Decodes a serialized `xla.ShapeProto`.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Self, WireError> {
        Self::decode_at(bytes, 0)
    }

    fn decode_at(bytes: &[u8], depth: usize) -> std::result::Result<Self, WireError> {
        let mut s = ShapeView::default();
        s.decode_into(bytes, depth)?;
        Ok(s)
    }

    fn decode_into(&mut self, bytes: &[u8], depth: usize) -> std::result::Result<(), WireError> {
        if depth > MAX_SHAPE_DEPTH {
            return Err(WireError {
                offset: 0,
                msg: "tuple shapes nested too deeply",
            });
        }
        let s = self;
        let mut r = Reader::new(bytes);
        while let Some((n, v)) = r.next()? {
            match n {
                2 => s.element_type = as_int(v)? as i32,
                3 => push_varints(v, &mut s.dimensions)?,
                4 => {
                    s.tuple_shapes.push(ShapeView::default());
                    if let Some(t) = s.tuple_shapes.last_mut() {
                        t.decode_into(as_msg(v)?, depth + 1)?;
                    }
                }
                5 => {
                    let l = s.layout.insert(LayoutView::default());
                    l.decode_into(as_msg(v)?)?;
                }
                6 => {
                    let mut flags: SmallVec<[i64; 6]> = SmallVec::new();
                    push_varints(v, &mut flags)?;
                    s.is_dynamic_dimension
                        .extend(flags.into_iter().map(|f| f != 0));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl From<&xla::ShapeProto> for ShapeView {
    fn from(p: &xla::ShapeProto) -> Self {
        ShapeView {
            element_type: p.element_type,
            dimensions: p.dimensions.iter().copied().collect(),
            tuple_shapes: p.tuple_shapes.iter().map(ShapeView::from).collect(),
            layout: p.layout.as_ref().map(|l| LayoutView {
                minor_to_major: l.minor_to_major.iter().copied().collect(),
                tiles: l
                    .tiles
                    .iter()
                    .map(|t| t.dimensions.iter().copied().collect())
                    .collect(),
                element_size_in_bits: l.element_size_in_bits,
                memory_space: l.memory_space,
                tail_padding_alignment_in_elements: l.tail_padding_alignment_in_elements,
            }),
            is_dynamic_dimension: p.is_dynamic_dimension.iter().copied().collect(),
        }
    }
}

impl LayoutView {
    /// Decodes a serialized `xla.LayoutProto`.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Self, WireError> {
        let mut l = LayoutView::default();
        l.decode_into(bytes)?;
        Ok(l)
    }

    fn decode_into(&mut self, bytes: &[u8]) -> std::result::Result<(), WireError> {
        let l = self;
        let mut r = Reader::new(bytes);
        while let Some((n, v)) = r.next()? {
            match n {
                1 => push_varints(v, &mut l.minor_to_major)?,
                6 => {
                    let mut tile: SmallVec<[i64; 2]> = SmallVec::new();
                    let mut tr = Reader::new(as_msg(v)?);
                    while let Some((tn, tv)) = tr.next()? {
                        if tn == 1 {
                            push_varints(tv, &mut tile)?;
                        }
                    }
                    l.tiles.push(tile);
                }
                7 => l.element_size_in_bits = as_int(v)?,
                8 => l.memory_space = as_int(v)?,
                16 => l.tail_padding_alignment_in_elements = as_int(v)?,
                _ => {}
            }
        }
        Ok(())
    }
}

impl<'a> InstructionView<'a> {
    /// Decodes a serialized `HloInstructionProto`.
    pub fn decode(bytes: &'a [u8]) -> std::result::Result<Self, WireError> {
        let mut i = InstructionView::default();
        i.decode_into(bytes)?;
        Ok(i)
    }

    /// The decoded result shape (`None` if absent).
    pub fn shape(&self) -> Result<Option<ShapeView>> {
        self.shape_bytes
            .map(ShapeView::decode)
            .transpose()
            .map_err(|e| self.bad(3, e))
    }

    /// Resets to the default value, keeping allocated buffers.
    fn clear(&mut self) {
        self.name = "";
        self.opcode = "";
        self.shape_bytes = None;
        self.parameter_number = 0;
        self.tuple_index = 0;
        self.dimensions.clear();
        self.id = 0;
        self.operand_ids.clear();
        self.control_predecessor_ids.clear();
        self.called_computation_ids.clear();
        self.other.clear();
    }

    /// Decodes one instruction into `self` (a default value).
    fn decode_into(&mut self, bytes: &'a [u8]) -> std::result::Result<(), WireError> {
        let i = self;
        let mut r = Reader::new(bytes);
        while let Some((n, v)) = r.next()? {
            match n {
                1 => i.name = as_str(v)?,
                2 => i.opcode = as_str(v)?,
                3 => i.shape_bytes = Some(as_msg(v)?),
                9 => i.parameter_number = as_int(v)?,
                13 => i.tuple_index = as_int(v)?,
                14 => push_varints(v, &mut i.dimensions)?,
                35 => i.id = as_int(v)?,
                36 => push_varints(v, &mut i.operand_ids)?,
                37 => push_varints(v, &mut i.control_predecessor_ids)?,
                38 => push_varints(v, &mut i.called_computation_ids)?,
                82 => {}
                7 | 68 | 98 if v == WireValue::Len(&[]) => {}
                _ => i.other.push((n, v)),
            }
        }
        Ok(())
    }

    /// Last occurrence of field `n` among [`InstructionView::other`].
    pub fn last(&self, n: u32) -> Option<WireValue<'a>> {
        self.other
            .iter()
            .rev()
            .find(|(k, _)| *k == n)
            .map(|(_, v)| *v)
    }

    /// All occurrences of field `n` (repeated fields), in wire order.
    pub fn all(&self, n: u32) -> impl Iterator<Item = WireValue<'a>> + '_ {
        self.other
            .iter()
            .filter(move |(k, _)| *k == n)
            .map(|(_, v)| *v)
    }

    fn bad(&self, n: u32, err: WireError) -> ProtoError {
        ProtoError::Malformed {
            what: "xla.HloInstructionProto",
            context: format!("instruction `{}` field {n}", self.name),
            err,
        }
    }

    /// Integer / enum field `n` (absent = 0).
    pub fn int(&self, n: u32) -> Result<i64> {
        self.last(n)
            .map_or(Ok(0), as_int)
            .map_err(|e| self.bad(n, e))
    }

    /// Bool field `n` (absent = false).
    pub fn flag(&self, n: u32) -> Result<bool> {
        Ok(self.int(n)? != 0)
    }

    /// String field `n` (absent = "").
    pub fn string(&self, n: u32) -> Result<&'a str> {
        self.last(n)
            .map_or(Ok(""), as_str)
            .map_err(|e| self.bad(n, e))
    }

    /// Bytes field `n` (absent = empty).
    pub fn bytes(&self, n: u32) -> Result<&'a [u8]> {
        self.last(n)
            .map_or(Ok(&[][..]), as_msg)
            .map_err(|e| self.bad(n, e))
    }

    /// `float` (fixed32) field `n` (absent = 0.0).
    pub fn float(&self, n: u32) -> Result<f32> {
        match self.last(n) {
            None => Ok(0.0),
            Some(WireValue::Fixed32(b)) => Ok(f32::from_bits(b)),
            Some(_) => Err(self.bad(
                n,
                WireError {
                    offset: 0,
                    msg: "wrong wire type for a float",
                },
            )),
        }
    }

    /// Repeated integer field `n` (packed or not).
    pub fn ints(&self, n: u32) -> Result<Vec<i64>> {
        let mut out = Vec::new();
        for v in self.all(n) {
            push_varints(v, &mut out).map_err(|e| self.bad(n, e))?;
        }
        Ok(out)
    }

    /// Singular message field `n`, decoded with its prost type (all
    /// occurrences merged, as protobuf requires); `None` if absent.
    pub fn message<M: prost::Message + Default>(&self, n: u32) -> Result<Option<M>> {
        let mut out: Option<M> = None;
        for v in self.all(n) {
            let b = as_msg(v).map_err(|e| self.bad(n, e))?;
            out.get_or_insert_with(M::default)
                .merge(b)
                .map_err(|err| self.decode_err(n, err))?;
        }
        Ok(out)
    }

    /// Repeated message field `n`, each decoded with its prost type.
    pub fn messages<M: prost::Message + Default>(&self, n: u32) -> Result<Vec<M>> {
        self.all(n)
            .map(|v| {
                let b = as_msg(v).map_err(|e| self.bad(n, e))?;
                M::decode(b).map_err(|err| self.decode_err(n, err))
            })
            .collect()
    }

    /// Repeated `ShapeProto` field `n` (e.g. 57 `operand_shapes_with_layout`).
    pub fn shapes(&self, n: u32) -> Result<Vec<ShapeView>> {
        self.all(n)
            .map(|v| {
                as_msg(v)
                    .and_then(ShapeView::decode)
                    .map_err(|e| self.bad(n, e))
            })
            .collect()
    }

    fn decode_err(&self, n: u32, err: prost::DecodeError) -> ProtoError {
        ProtoError::invalid(
            format!("instruction `{}` field {n}", self.name),
            format!("not a valid message (truncated or corrupt file?): {err}"),
        )
    }
}
