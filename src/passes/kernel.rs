//! Kernels of a compiled module: what the cost model consumes.

use petgraph::stable_graph::NodeIndex;
use serde::{Deserialize, Serialize};

use super::config::TileBounds;
use super::tiling;
use smallvec::SmallVec;
use std::sync::Arc;

use crate::ir::{
    ArrayShape, Attrs, CompId, Dims, FusionKind, InstrId, Name, Opcode, PrimitiveType, SharedAttrs,
    SharedShape,
};

/// A tensor as stored: logical dims plus physical layout.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhysicalShape {
    /// Element type (serialized by name: `f32`, `bf16`, ...).
    #[serde(with = "type_name")]
    pub element_type: PrimitiveType,
    /// Bits per element (pred = 8).
    pub element_bits: u32,
    /// Logical dims.
    pub dims: Dims,
    pub minor_to_major: Dims,
    /// Tiles, outermost first (`T(8,128)(2,1)` = `[[8,128],[2,1]]`).
    pub tiles: SmallVec<[SmallVec<[i64; 2]>; 2]>,
    /// Dims in physical order, major → minor.
    pub physical_dims: Dims,
    /// Bytes including tile padding (XLA `ArraySize`).
    pub bytes: u64,
}

impl Clone for PhysicalShape {
    /// Copies the dim lists with `from_slice` (a `SmallVec`'s own `clone` goes element by
    /// element; kernels clone many shapes).
    fn clone(&self) -> Self {
        PhysicalShape {
            element_type: self.element_type,
            element_bits: self.element_bits,
            dims: SmallVec::from_slice(&self.dims),
            minor_to_major: SmallVec::from_slice(&self.minor_to_major),
            tiles: self.tiles.iter().map(|t| SmallVec::from_slice(t)).collect(),
            physical_dims: SmallVec::from_slice(&self.physical_dims),
            bytes: self.bytes,
        }
    }
}

impl PhysicalShape {
    /// From an array shape with a layout (row-major if none).
    pub fn of(a: &ArrayShape) -> Self {
        let m2m = a.minor_to_major();
        PhysicalShape {
            element_type: a.element_type,
            element_bits: a.element_bits(),
            dims: a.dims.clone(),
            physical_dims: tiling::physical_dims(&a.dims, &m2m),
            minor_to_major: m2m,
            tiles: a
                .layout
                .as_ref()
                .map(|l| {
                    l.tiles
                        .iter()
                        .map(|t| t.dims.iter().copied().collect())
                        .collect()
                })
                .unwrap_or_default(),
            bytes: a.padded_byte_size(),
        }
    }

    /// An array shape laid out with `m2m` (and TPU tiles when `tiles`).
    pub fn laid_out(a: &ArrayShape, m2m: &[i64], tiles: bool) -> Self {
        let t = if tiles {
            tiling::tpu_tiles(a.element_type, &a.dims, m2m)
        } else {
            SmallVec::new()
        };
        PhysicalShape {
            element_type: a.element_type,
            element_bits: a.element_bits(),
            dims: SmallVec::from_slice(&a.dims),
            physical_dims: tiling::physical_dims(&a.dims, m2m),
            minor_to_major: SmallVec::from_slice(m2m),
            bytes: tiling::padded_elements(&a.dims, m2m, &t)
                .saturating_mul(a.element_type.byte_size()),
            tiles: t.iter().map(|t| SmallVec::from_slice(&t.dims)).collect(),
        }
    }

    /// Text form, e.g. `f32[8,128]{1,0:T(8,128)}`.
    pub fn text(&self) -> String {
        let dims: Vec<String> = self.dims.iter().map(|d| d.to_string()).collect();
        let m2m: Vec<String> = self.minor_to_major.iter().map(|d| d.to_string()).collect();
        let mut s = format!(
            "{}[{}]{{{}",
            self.element_type,
            dims.join(","),
            m2m.join(",")
        );
        if !self.tiles.is_empty() {
            s.push_str(":T");
            for t in &self.tiles {
                let t: Vec<String> = t.iter().map(|d| d.to_string()).collect();
                s.push_str(&format!("({})", t.join(",")));
            }
        }
        s.push('}');
        s
    }
}

/// What kind of kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KernelKind {
    #[serde(rename = "kLoop")]
    Loop,
    #[serde(rename = "kInput")]
    Input,
    #[serde(rename = "kOutput")]
    Output,
    #[serde(rename = "kCustom")]
    Custom,
    /// A single instruction that is not inside a fusion.
    #[serde(rename = "unfused")]
    Unfused,
}

impl KernelKind {
    /// From a fusion kind.
    pub fn from_fusion(k: FusionKind) -> Self {
        match k {
            FusionKind::Loop => KernelKind::Loop,
            FusionKind::Input => KernelKind::Input,
            FusionKind::Output => KernelKind::Output,
            FusionKind::Custom => KernelKind::Custom,
        }
    }

    /// `kLoop`, `kInput`, `kOutput`, `kCustom` or `unfused`.
    pub fn name(self) -> &'static str {
        match self {
            KernelKind::Loop => "kLoop",
            KernelKind::Input => "kInput",
            KernelKind::Output => "kOutput",
            KernelKind::Custom => "kCustom",
            KernelKind::Unfused => "unfused",
        }
    }
}

/// What a called computation is to its caller; written `body`, `condition` or
/// `branch N` (JSON included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum SiteRole {
    /// The body of a `while`.
    Body,
    /// The condition of a `while` (runs once more than the body).
    Condition,
    /// Branch `N` of a `conditional`.
    Branch(usize),
}

impl std::fmt::Display for SiteRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SiteRole::Body => f.write_str("body"),
            SiteRole::Condition => f.write_str("condition"),
            SiteRole::Branch(k) => write!(f, "branch {k}"),
        }
    }
}

impl From<SiteRole> for String {
    fn from(r: SiteRole) -> String {
        r.to_string()
    }
}

/// A role that is none of `body`, `condition`, `branch N`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a call-site role (body, condition, branch N)")]
pub struct BadSiteRole(pub String);

impl TryFrom<String> for SiteRole {
    type Error = BadSiteRole;
    fn try_from(s: String) -> Result<Self, BadSiteRole> {
        match s.as_str() {
            "body" => Ok(SiteRole::Body),
            "condition" => Ok(SiteRole::Condition),
            _ => s
                .strip_prefix("branch ")
                .and_then(|k| k.parse().ok())
                .map(SiteRole::Branch)
                .ok_or(BadSiteRole(s)),
        }
    }
}

/// Where a non-entry computation is called from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSite {
    /// Calling computation.
    pub computation: String,
    /// The `while` / `conditional` instruction.
    pub instruction: String,
    pub role: SiteRole,
    /// Known trip count of the while loop (`body` and `condition`; the condition runs
    /// once more): [`crate::analysis::while_loop::known_trip_count`] of the input loop.
    pub trip_count: Option<u64>,
}

/// One kernel (a fusion or an unfused instruction) of the compiled module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    /// Position in [`super::CompiledModule::kernels`] (execution order).
    pub index: usize,
    /// Instruction name (the fusion's, or the unfused instruction's).
    pub name: Name,
    pub kind: KernelKind,
    /// Opcode of the hero (dot/convolution of a kOutput, reduce of a kInput, the root
    /// of a kLoop, the instruction itself when unfused).
    #[serde(with = "opcode_name")]
    pub hero: Opcode,
    /// Name of the hero instruction.
    pub hero_name: Name,
    /// Computation that holds the kernel (index in the compiled module and name).
    pub computation: CompId,
    pub computation_name: Name,
    /// Graph index of the kernel's instruction in that computation.
    pub instruction: u32,
    /// The fused computation (fusions only).
    pub fused_computation: Option<CompId>,
    /// Operands in order. (Shared: every kernel that reads a value points at the same
    /// shape, and so do later compilations that give it the same layout.)
    pub parameters: Vec<Arc<PhysicalShape>>,
    /// Array outputs (one unless the result is a tuple).
    pub outputs: Vec<Arc<PhysicalShape>>,
    /// Operands of the hero instruction (for dot/convolution: input, kernel).
    pub hero_operands: Vec<Arc<PhysicalShape>>,
    /// Tile bounds from the configuration (None = compiler default).
    pub tile: Option<TileBounds>,
    /// Instructions in the kernel, parameters excluded (1 for an unfused op).
    pub instruction_count: usize,
    /// Set for kernels of while bodies/conditions and conditional branches.
    pub call_site: Option<CallSite>,
}

impl Kernel {
    /// The kernel's instruction id in `computation`.
    pub fn instr_id(&self) -> InstrId {
        NodeIndex::new(self.instruction as usize)
    }
}

/// Attributes of a [`BodyNode`]: its input instruction's, or its own when the compiler
/// made or changed the instruction.
#[derive(Debug, Clone)]
pub enum BodyAttrs<'m> {
    /// The input instruction's attributes.
    Input(&'m Attrs),
    /// The input instruction's attributes without `dimensions` (the first), for an
    /// instruction the compiler gave another opcode (the second).
    Stripped(&'m Attrs, SharedAttrs),
    /// Attributes of an instruction the compiler made.
    Own(SharedAttrs),
}

impl std::ops::Deref for BodyAttrs<'_> {
    type Target = Attrs;
    fn deref(&self) -> &Attrs {
        match self {
            BodyAttrs::Input(a) => a,
            BodyAttrs::Stripped(_, a) | BodyAttrs::Own(a) => a,
        }
    }
}

/// A node of the compiled program as kernel bodies read it: listed once per
/// compilation in [`KernelBodies`], however many kernels read or hold it.
#[derive(Debug, Clone)]
pub struct BodyNode<'m> {
    /// Name in the output module (of its first copy; see [`BodyInstr::clone_number`]).
    pub name: NodeName<'m>,
    pub opcode: Opcode,
    pub async_wrapped: Option<Opcode>,
    /// Laid-out shape (TPU tiles attached), shared with the compiler's caches.
    pub shape: SharedShape,
    /// What `shape` is made of, when that fits two words (`emit::shape_id`: the address
    /// of the input shape and the packed layout): equal ids are equal shapes while the
    /// input module is borrowed.
    pub shape_id: Option<(usize, u64)>,
    /// With a `shape_id`, its packed layout as the cost model reads it
    /// ([`super::tiling::model_layout_key`]: the size-1 dims numbered in the model's
    /// order), which the kernel tables' keys name: shapes of one input shape and one
    /// model layout cost alike. 0 without.
    pub model_layout: u64,
    /// Attributes as in the *input* module: called computations keep their input ids.
    pub attrs: BodyAttrs<'m>,
}

/// The parameter number of a fusion parameter among a kernel's [`BodyInstr`]s, or none:
/// a `u32` with `u32::MAX` for none, so that a [`BodyInstr`] stays small.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct ParameterNumber(u32);

impl ParameterNumber {
    /// Not a fusion parameter.
    pub const NONE: ParameterNumber = ParameterNumber(u32::MAX);

    /// Fusion parameter `n` (below `u32::MAX`).
    pub(crate) fn new(n: u32) -> Self {
        debug_assert_ne!(n, u32::MAX, "parameter number out of range");
        ParameterNumber(n)
    }

    /// The number, for a fusion parameter.
    pub fn get(self) -> Option<u32> {
        (self != Self::NONE).then_some(self.0)
    }
}

/// One instruction of a [`KernelBody`]: what the instruction of the output module would
/// be, without a graph around it.
#[derive(Debug, Clone)]
pub struct BodyInstr {
    /// The node (index in [`KernelBody::nodes`]): the instruction itself, or for a
    /// fusion parameter the value it stands for.
    pub node: u32,
    /// Fusion parameters: the parameter number.
    pub parameter: ParameterNumber,
    /// 0: the instruction is called as its node; else it is a further copy (an
    /// instruction fused into several kernels) named `{name}.{clone_number}`.
    pub clone_number: u64,
    /// Operands, as positions in the kernel's [`KernelBody::instrs`]: the ids the
    /// kernel's instructions have within it ([`InstrId::index`] is the position).
    pub operands: SmallVec<[InstrId; 4]>,
}

impl BodyInstr {
    /// An instruction that is node `node` (not a fusion parameter).
    pub(crate) fn of(node: u32, clone_number: u64, operands: SmallVec<[InstrId; 4]>) -> Self {
        BodyInstr {
            node,
            parameter: ParameterNumber::NONE,
            clone_number,
            operands,
        }
    }
}

/// The instructions of one kernel, as the cost model reads them
/// (`kernels::lower_body`): a view into [`KernelBodies`].
///
/// * A fusion: its fused computation — the fusion parameters (`leaves` of them, in
///   parameter order) and then the fused instructions, in the order and with the ids of
///   the fused computation of the output module.
/// * An unfused instruction: its distinct operands (in first-use order, the `leaves`)
///   and then the instruction itself.
#[derive(Debug, Clone, Copy)]
pub struct KernelBody<'a> {
    pub instrs: &'a [BodyInstr],
    /// The nodes of the compilation (shared by all kernels).
    pub nodes: &'a [BodyNode<'a>],
    /// Attributes of fusion parameters, by parameter number.
    pub parameter_attrs: &'a [SharedAttrs],
    /// Position of the root (the fusion's root, or the unfused instruction).
    pub root: u32,
    /// The first `leaves` instructions are the kernel's inputs.
    pub leaves: u32,
    /// An unfused instruction rather than a fusion.
    pub single: bool,
}

impl<'a> KernelBody<'a> {
    fn node(&self, i: usize) -> &'a BodyNode<'a> {
        &self.nodes[self.instrs[i].node as usize]
    }

    fn parameter(&self, i: usize) -> Option<u32> {
        self.instrs[i].parameter.get()
    }

    /// Opcode, wrapped opcode (async sugar), laid-out shape and attributes of
    /// instruction `i`, read at once.
    pub fn get(&self, i: usize) -> (Opcode, Option<Opcode>, &'a crate::ir::Shape, &'a Attrs) {
        let b = &self.instrs[i];
        let n = &self.nodes[b.node as usize];
        match b.parameter.get() {
            None => (n.opcode, n.async_wrapped, &n.shape, &n.attrs),
            Some(p) => (
                Opcode::Parameter,
                None,
                &n.shape,
                &self.parameter_attrs[p as usize],
            ),
        }
    }

    pub fn opcode(&self, i: usize) -> Opcode {
        self.get(i).0
    }

    /// The laid-out shape of instruction `i`.
    pub fn shape(&self, i: usize) -> &'a crate::ir::Shape {
        &self.node(i).shape
    }

    pub fn attrs(&self, i: usize) -> &'a Attrs {
        self.get(i).3
    }

    /// The name instruction `i` has in the output module (empty for fusion parameters;
    /// for the leaves of an unfused instruction, their node's).
    pub fn name(&self, i: usize) -> Name {
        let b = &self.instrs[i];
        if self.parameter(i).is_some() {
            Name::default()
        } else if b.clone_number == 0 {
            Name::from(self.node(i).name.as_str())
        } else {
            super::flat::numbered(self.node(i).name.as_str(), None, b.clone_number)
        }
    }
}

/// A [`BodyNode`]'s name: borrowed from the input instruction, or shared with the
/// compiler's node (an inlined copy's, an instruction the compiler made); made into a
/// [`Name`] only when asked for.
#[derive(Debug, Clone)]
pub enum NodeName<'m> {
    Input(&'m str),
    Made(std::sync::Arc<str>),
}

impl NodeName<'_> {
    pub fn as_str(&self) -> &str {
        match self {
            NodeName::Input(s) => s,
            NodeName::Made(s) => s,
        }
    }
}

impl std::fmt::Display for NodeName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a kernel's instructions are in [`KernelBodies`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodySpan {
    pub start: u32,
    pub len: u32,
    pub root: u32,
    pub leaves: u32,
    pub single: bool,
}

/// The instructions of every kernel of a compilation, listed by
/// [`super::PreparedModule::compile_bodies`] instead of building the output module:
/// [`KernelBodies::get`]`(i)` is kernel `i`'s (in the order of the kernel list).
/// The attributes of input instructions are borrowed from the input module (`'m`).
#[derive(Debug, Clone, Default)]
pub struct KernelBodies<'m> {
    /// All kernels' instructions, kernel after kernel.
    pub(crate) instrs: Vec<BodyInstr>,
    pub(crate) nodes: Vec<BodyNode<'m>>,
    pub(crate) parameter_attrs: Vec<SharedAttrs>,
    pub(crate) spans: Vec<BodySpan>,
}

impl<'m> KernelBodies<'m> {
    /// Number of kernels.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Kernel `i`'s instructions.
    pub fn get(&self, i: usize) -> Option<KernelBody<'_>> {
        let s = self.spans.get(i)?;
        Some(KernelBody {
            instrs: &self.instrs[s.start as usize..(s.start + s.len) as usize],
            nodes: &self.nodes,
            parameter_attrs: &self.parameter_attrs,
            root: s.root,
            leaves: s.leaves,
            single: s.single,
        })
    }

    /// Every kernel's instructions, in order.
    pub fn iter(&self) -> impl Iterator<Item = KernelBody<'_>> {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

mod type_name {
    use crate::ir::PrimitiveType;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &PrimitiveType, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(t.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PrimitiveType, D::Error> {
        let s = String::deserialize(d)?;
        PrimitiveType::from_name(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown element type '{s}'")))
    }
}

mod opcode_name {
    use crate::ir::Opcode;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(op: &Opcode, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(op.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Opcode, D::Error> {
        let s = String::deserialize(d)?;
        Opcode::from_name(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown opcode '{s}'")))
    }
}
