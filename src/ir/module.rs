//! Modules, computations and instructions.

use indexmap::IndexMap;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::collections::HashMap;

use super::attrs::{CompId, SharedAttrs};
use super::opcode::Opcode;
use super::shape::{Shape, SharedShape};

/// Node handle of an instruction inside its computation's graph.
pub type InstrId = NodeIndex<u32>;

/// An instruction name: a string stored inline up to 24 bytes.
pub type Name = compact_str::CompactString;

/// One HLO instruction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Instruction {
    /// Inline up to 24 bytes (almost every HLO name): the compiler writes ~20K names
    /// per configuration, and an inline name costs no allocation.
    pub name: Name,
    pub opcode: Opcode,
    /// For async sugar (`fusion-start`, `custom-call-done`, ...): the wrapped opcode,
    /// with `opcode` one of async-start / async-update / async-done.
    pub async_wrapped: Option<Opcode>,
    /// Shared copy-on-write, like the attributes: the compiler gives every clone of an
    /// instruction (and every compilation with the same layout) the same shape.
    pub shape: SharedShape,
    /// Shared copy-on-write: attributes are large (about 650 bytes); behind pointers an
    /// instruction is about 60 bytes, and a clone shares them instead of copying.
    pub attrs: SharedAttrs,
    /// Source position (1-based line and column; 0 = unknown). Not part of equality.
    pub line: u32,
    pub col: u32,
}

impl Instruction {
    pub fn new(name: impl Into<Name>, opcode: Opcode, shape: impl Into<SharedShape>) -> Self {
        Instruction {
            name: name.into(),
            opcode,
            async_wrapped: None,
            shape: shape.into(),
            attrs: SharedAttrs::default(),
            line: 0,
            col: 0,
        }
    }

    /// The opcode as written in text (`fusion-start` for async sugar).
    pub fn opcode_text(&self) -> String {
        match self.async_wrapped {
            Some(w) => {
                let suffix = match self.opcode {
                    Opcode::AsyncStart => "start",
                    Opcode::AsyncUpdate => "update",
                    _ => "done",
                };
                format!("{}-{}", w.name(), suffix)
            }
            None => self.opcode.name().to_string(),
        }
    }

    /// The value of a scalar (rank-0 array) `constant` whose literal is an integer,
    /// by [`integer_literal`]; `None` for any other instruction. The one place the
    /// text of a constant (kept verbatim in [`Attrs::literal`](super::Attrs::literal)
    /// for printing) is read as a number.
    pub fn scalar_integer_constant(&self) -> Option<i64> {
        let scalar = matches!(&*self.shape, Shape::Array(a) if a.dims.is_empty());
        if self.opcode != Opcode::Constant || !scalar {
            return None;
        }
        integer_literal(self.attrs.literal.as_deref()?)
    }
}

/// An integer as HLO text writes one in a literal or a backend config: `12`, `-3`, or a
/// float literal with an integral value (`12.0`, `1e3`); `None` for anything else (a
/// fraction, `inf`, `nan`, `true`, an array).
pub fn integer_literal(s: &str) -> Option<i64> {
    let t = s.trim();
    t.parse::<i64>().ok().or_else(|| {
        let x = t.parse::<f64>().ok()?;
        (x.is_finite() && x.fract() == 0.0 && x.abs() < 9.0e18).then_some(x as i64)
    })
}

impl PartialEq for Instruction {
    fn eq(&self, o: &Self) -> bool {
        self.name == o.name
            && self.opcode == o.opcode
            && self.async_wrapped == o.async_wrapped
            && self.shape == o.shape
            && self.attrs == o.attrs
    }
}

/// A computation: a graph of instructions. Edges run operand → user and carry the
/// operand slot index, one edge per slot (an operand used twice gives two edges).
#[derive(Debug, Clone)]
pub struct Computation {
    pub name: String,
    pub graph: StableDiGraph<Instruction, u32, u32>,
    /// Instructions in program order (operands before users).
    pub order: Vec<InstrId>,
    pub root: InstrId,
    /// Parameter instructions by parameter number.
    pub params: Vec<InstrId>,
    /// `execution_thread="..."` after the closing brace, if any.
    pub execution_thread: Option<String>,
    /// Source line of the computation header (0 = unknown).
    pub line: u32,
}

impl Computation {
    /// An empty computation (root is invalid until instructions are added).
    pub fn new(name: impl Into<String>) -> Self {
        Computation {
            name: name.into(),
            graph: StableDiGraph::default(),
            order: Vec::new(),
            root: NodeIndex::end(),
            params: Vec::new(),
            execution_thread: None,
            line: 0,
        }
    }

    /// Append an instruction with its operands (in slot order). Returns its id.
    pub fn add(&mut self, instr: Instruction, operands: &[InstrId]) -> InstrId {
        let id = self.graph.add_node(instr);
        for (slot, &op) in operands.iter().enumerate() {
            self.graph.add_edge(op, id, slot as u32);
        }
        self.order.push(id);
        id
    }

    pub fn instr(&self, id: InstrId) -> &Instruction {
        &self.graph[id]
    }

    pub fn instr_mut(&mut self, id: InstrId) -> &mut Instruction {
        &mut self.graph[id]
    }

    /// Operands in slot order.
    pub fn operands(&self, id: InstrId) -> SmallVec<[InstrId; 4]> {
        let mut v: SmallVec<[(u32, InstrId); 4]> = self
            .graph
            .edges_directed(id, Direction::Incoming)
            .map(|e| (*e.weight(), e.source()))
            .collect();
        v.sort_unstable_by_key(|(slot, _)| *slot);
        v.into_iter().map(|(_, n)| n).collect()
    }

    /// Operand in a slot.
    pub fn operand(&self, id: InstrId, slot: usize) -> Option<InstrId> {
        self.graph
            .edges_directed(id, Direction::Incoming)
            .find(|e| *e.weight() as usize == slot)
            .map(|e| e.source())
    }

    pub fn operand_count(&self, id: InstrId) -> usize {
        self.graph.edges_directed(id, Direction::Incoming).count()
    }

    /// Distinct users, in program order.
    pub fn users(&self, id: InstrId) -> SmallVec<[InstrId; 4]> {
        let mut v: SmallVec<[InstrId; 4]> = self
            .graph
            .edges_directed(id, Direction::Outgoing)
            .map(|e| e.target())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Replace every use of `old` by `new` (edges keep their slots).
    pub fn replace_uses(&mut self, old: InstrId, new: InstrId) {
        let edges: Vec<_> = self
            .graph
            .edges_directed(old, Direction::Outgoing)
            .map(|e| (e.id(), e.target(), *e.weight()))
            .collect();
        for (e, target, slot) in edges {
            if target == new {
                continue;
            }
            self.graph.remove_edge(e);
            self.graph.add_edge(new, target, slot);
        }
        if self.root == old {
            self.root = new;
        }
    }

    /// Map instruction name → id (built on demand).
    pub fn name_index(&self) -> HashMap<&str, InstrId> {
        self.order
            .iter()
            .map(|&id| (self.graph[id].name.as_str(), id))
            .collect()
    }

    /// Find an instruction by name (linear scan).
    pub fn find(&self, name: &str) -> Option<InstrId> {
        self.order
            .iter()
            .copied()
            .find(|&id| self.graph[id].name == name)
    }

    /// Number of instructions.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Position of each instruction in `order`.
    pub fn positions(&self) -> HashMap<InstrId, usize> {
        self.order
            .iter()
            .enumerate()
            .map(|(i, &n)| (n, i))
            .collect()
    }

    /// Computations called by instruction `id`.
    pub fn callees(&self, id: InstrId) -> impl Iterator<Item = CompId> + '_ {
        self.graph[id].attrs.called.iter().map(|(_, c)| *c)
    }
}

impl PartialEq for Computation {
    fn eq(&self, o: &Self) -> bool {
        if self.name != o.name
            || self.order.len() != o.order.len()
            || self.execution_thread != o.execution_thread
        {
            return false;
        }
        let pa = self.positions();
        let pb = o.positions();
        let pos = |p: &HashMap<InstrId, usize>, id: InstrId| p.get(&id).copied();
        if pos(&pa, self.root) != pos(&pb, o.root) {
            return false;
        }
        for (&a, &b) in self.order.iter().zip(&o.order) {
            if self.graph[a] != o.graph[b] {
                return false;
            }
            let oa: SmallVec<[Option<usize>; 4]> =
                self.operands(a).iter().map(|&x| pos(&pa, x)).collect();
            let ob: SmallVec<[Option<usize>; 4]> =
                o.operands(b).iter().map(|&x| pos(&pb, x)).collect();
            if oa != ob {
                return false;
            }
        }
        true
    }
}

/// Module header attributes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModuleAttrs {
    /// `entry_computation_layout={(params)->result}`: parameter shapes and result shape.
    pub entry_computation_layout: Option<(Vec<Shape>, Shape)>,
    pub is_scheduled: bool,
    /// Other header attributes `(name, raw value)` in written order.
    pub other: Vec<(String, String)>,
}

/// An HLO module.
#[derive(Debug, Clone, PartialEq)]
pub struct Module {
    pub name: String,
    pub attrs: ModuleAttrs,
    /// The 2026 stack-frame index section, verbatim (it has no meaning for us).
    pub stack_frames: Option<String>,
    /// Computations in definition order (callees before callers).
    pub computations: IndexMap<String, Computation>,
    /// Index of the entry computation.
    pub entry: CompId,
}

impl Module {
    pub fn entry(&self) -> &Computation {
        &self.computations[self.entry]
    }

    pub fn entry_mut(&mut self) -> &mut Computation {
        &mut self.computations[self.entry]
    }

    pub fn comp(&self, id: CompId) -> &Computation {
        &self.computations[id]
    }

    pub fn comp_id(&self, name: &str) -> Option<CompId> {
        self.computations.get_index_of(name)
    }

    /// Total number of instructions over all computations.
    pub fn instruction_count(&self) -> usize {
        self.computations.values().map(|c| c.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::PrimitiveType;

    #[test]
    fn scalar_integer_constants_are_read_from_their_literal() {
        let constant = |shape: Shape, literal: &str| {
            let mut c = Instruction::new("c", Opcode::Constant, shape);
            c.attrs.literal = Some(literal.into());
            c
        };
        let s32 = || Shape::scalar(PrimitiveType::S32);
        let f32 = || Shape::scalar(PrimitiveType::F32);
        assert_eq!(constant(s32(), "12").scalar_integer_constant(), Some(12));
        assert_eq!(constant(s32(), " -3 ").scalar_integer_constant(), Some(-3));
        assert_eq!(constant(f32(), "12.0").scalar_integer_constant(), Some(12));
        assert_eq!(constant(f32(), "1e3").scalar_integer_constant(), Some(1000));
        for not_integral in ["0.5", "inf", "nan", "true", "{...}"] {
            assert_eq!(
                constant(f32(), not_integral).scalar_integer_constant(),
                None
            );
        }
        let array = Shape::array(PrimitiveType::S32, &[2]);
        assert_eq!(constant(array, "{1, 2}").scalar_integer_constant(), None);
        let mut p = Instruction::new("p", Opcode::Parameter, s32());
        p.attrs.literal = Some("12".into());
        assert_eq!(p.scalar_integer_constant(), None);
        assert_eq!(integer_literal("9e18"), None);
    }
}
