//! Kernels of a compiled module: what the cost model consumes.

use petgraph::stable_graph::NodeIndex;
use serde::{Deserialize, Serialize};

use super::config::TileBounds;
use super::tiling;
use smallvec::SmallVec;
use std::sync::Arc;

use crate::ir::{ArrayShape, CompId, Dims, FusionKind, InstrId, Name, Opcode, PrimitiveType};

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
        let bits = match a.element_type {
            PrimitiveType::Pred => 8,
            t => t.bit_width(),
        };
        PhysicalShape {
            element_type: a.element_type,
            element_bits: bits,
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
        let bits = match a.element_type {
            PrimitiveType::Pred => 8,
            t => t.bit_width(),
        };
        PhysicalShape {
            element_type: a.element_type,
            element_bits: bits,
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

/// Where a non-entry computation is called from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSite {
    /// Calling computation.
    pub computation: String,
    /// The `while` / `conditional` instruction.
    pub instruction: String,
    /// `body`, `condition` or `branch N`.
    pub role: String,
    /// Known trip count of the while loop (`body` and `condition`; the condition runs
    /// once more), if the loop has the canonical counted form.
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
