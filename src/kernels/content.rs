//! Content ids of the shapes and attributes a kernel body points to in the input module.
//!
//! A kernel body names its instructions' shapes and attributes by address in the input
//! module ([`crate::passes::kernel::BodyNode`]): the same address is the same value.
//! Across the layers of a model, many instructions have equal shapes and attributes at
//! different addresses, for example the same convolution, or the same reduction each
//! with its own equal reducer computation. [`ContentIds`] numbers each distinct value
//! once, so that the key [`super::KernelTimes`] makes of a body is the same for equal
//! bodies of different layers, and the time of a kernel lowered in one layer serves
//! the others.
//!
//! Equal means equal for lowering:
//! - a shape is its whole value;
//! - attributes are their whole value except what no cost reads: `metadata`,
//!   `frontend_attributes`, `sharding` and `control_predecessors` (names and
//!   annotations);
//! - each computation they call stands for its content (see below), not its name or
//!   index.
//!
//! A computation's content is, for each of its instructions in order, the opcode, the
//! wrapped opcode, the shape and the attributes (so numbered), and the operands as
//! positions; then its root and its parameters. Values are compared by their `Debug`
//! text, which the derived impls write field by field (strings quoted, floats in a form
//! that reads back to the same number), so equal texts are equal values.

use std::collections::HashMap;
use std::fmt::Write;

use foldhash::fast::FixedState;

use crate::ir::{Attrs, CompId, InstrId, Module, Shape};

/// Computations nested deeper than this are not compared by content: each gets an id of
/// its own (lowering rejects such nesting anyway).
const MAX_DEPTH: usize = 64;

/// The content ids of an input module's shapes and attributes, by address (see the
/// module documentation).
#[derive(Debug)]
pub(crate) struct ContentIds {
    shapes: AddrMap,
    attrs: AddrMap,
}

/// Ids by address, for the keys' lookups (two an instruction of every body keyed): an
/// open-addressing table at most a quarter full (linear probing; 0, which no address
/// is, marks an empty slot), so that a lookup is a multiply and one or two reads.
#[derive(Debug)]
struct AddrMap {
    slots: Vec<(usize, u32)>,
    mask: usize,
}

impl AddrMap {
    fn new(ids: &HashMap<usize, u32, FixedState>) -> Self {
        let n = (ids.len() * 4).next_power_of_two().max(16);
        let mut map = AddrMap {
            slots: vec![(0, 0); n],
            mask: n - 1,
        };
        for (&at, &id) in ids {
            let mut i = map.home(at);
            while map.slots[i].0 != 0 {
                i = (i + 1) & map.mask;
            }
            map.slots[i] = (at, id);
        }
        map
    }

    /// Where the search for `at` starts (allocations are 8-byte aligned: the low bits
    /// say nothing).
    fn home(&self, at: usize) -> usize {
        ((at as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & self.mask
    }

    #[inline]
    fn get(&self, at: usize) -> Option<u32> {
        if at == 0 {
            return None;
        }
        let mut i = self.home(at);
        loop {
            let (k, id) = self.slots[i];
            if k == at {
                return Some(id);
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }
}

impl ContentIds {
    /// The ids of every instruction's shape and attributes in `m`.
    pub(crate) fn of(m: &Module) -> Self {
        let mut b = Builder {
            m,
            comps: vec![None; m.computations.len()],
            visiting: vec![false; m.computations.len()],
            texts: HashMap::new(),
            shape_ids: HashMap::new(),
            next: 0,
            shapes: HashMap::default(),
            attrs: HashMap::default(),
        };
        for ci in 0..m.computations.len() {
            b.comp(ci, 0);
        }
        ContentIds {
            shapes: AddrMap::new(&b.shapes),
            attrs: AddrMap::new(&b.attrs),
        }
    }

    /// The id of the shape at `at` (the address of an input instruction's shape), if
    /// it is one.
    #[inline]
    pub(crate) fn shape(&self, at: usize) -> Option<u32> {
        self.shapes.get(at)
    }

    /// The id of `a`, if they are an input instruction's attributes.
    #[inline]
    pub(crate) fn attrs(&self, a: &Attrs) -> Option<u32> {
        self.attrs.get(a as *const Attrs as usize)
    }

    /// Distinct shapes and distinct attributes numbered.
    #[cfg(test)]
    fn distinct(&self) -> (usize, usize) {
        let count = |m: &AddrMap| {
            m.slots
                .iter()
                .filter(|s| s.0 != 0)
                .map(|s| s.1)
                .collect::<std::collections::HashSet<_>>()
                .len()
        };
        (count(&self.shapes), count(&self.attrs))
    }
}

/// Numbers the values of one module; attributes and computations share one id space.
struct Builder<'m> {
    m: &'m Module,
    /// Each computation's id, once numbered.
    comps: Vec<Option<u32>>,
    /// The computations being numbered (a computation that calls itself gets an id of
    /// its own).
    visiting: Vec<bool>,
    /// Ids of attribute and computation texts (distinct prefixes keep the two apart).
    texts: HashMap<String, u32>,
    shape_ids: HashMap<&'m Shape, u32>,
    /// The next id.
    next: u32,
    /// Ids of the shapes and of the attributes numbered, by address.
    shapes: HashMap<usize, u32, FixedState>,
    attrs: HashMap<usize, u32, FixedState>,
}

impl<'m> Builder<'m> {
    /// An id that no other value has.
    fn fresh(&mut self) -> u32 {
        self.next += 1;
        self.next - 1
    }

    /// The id of `text`.
    fn text_id(&mut self, text: String) -> u32 {
        if let Some(&id) = self.texts.get(&text) {
            return id;
        }
        let id = self.fresh();
        self.texts.insert(text, id);
        id
    }

    fn shape(&mut self, s: &'m Shape) -> u32 {
        let n = self.shape_ids.len() as u32;
        let id = *self.shape_ids.entry(s).or_insert(n);
        self.shapes.insert(s as *const Shape as usize, id);
        id
    }

    fn attrs(&mut self, a: &'m Attrs, depth: usize) -> u32 {
        let at = a as *const Attrs as usize;
        if let Some(&id) = self.attrs.get(&at) {
            return id;
        }
        let mut c = a.clone();
        c.metadata = None;
        c.frontend_attributes = None;
        c.sharding = None;
        c.control_predecessors.clear();
        for (_, callee) in c.called.iter_mut() {
            *callee = self.comp(*callee, depth + 1) as CompId;
        }
        let id = self.text_id(format!("a{c:?}"));
        self.attrs.insert(at, id);
        id
    }

    /// Writes where `i` is in its computation's order, and a comma, to `text`; an
    /// instruction that is not there yet (a malformed module) is written as a fresh id,
    /// equal to nothing else.
    fn write_position(&mut self, text: &mut String, pos: &HashMap<InstrId, usize>, i: InstrId) {
        let _ = match pos.get(&i) {
            Some(p) => write!(text, "{p},"),
            None => write!(text, "?{},", self.fresh()),
        };
    }

    fn comp(&mut self, ci: CompId, depth: usize) -> u32 {
        if let Some(id) = self.comps.get(ci).copied().flatten() {
            return id;
        }
        if ci >= self.comps.len() || self.visiting[ci] || depth > MAX_DEPTH {
            return self.fresh();
        }
        self.visiting[ci] = true;
        let c = self.m.comp(ci);
        let mut pos: HashMap<InstrId, usize> = HashMap::with_capacity(c.order.len());
        let mut text = String::from("c");
        for (k, &i) in c.order.iter().enumerate() {
            pos.insert(i, k);
            let ins = c.instr(i);
            let shape = self.shape(&ins.shape);
            let attrs = self.attrs(&ins.attrs, depth);
            let _ = write!(
                text,
                "{:?} {:?} {shape} {attrs} (",
                ins.opcode, ins.async_wrapped
            );
            for o in c.operands(i) {
                self.write_position(&mut text, &pos, o);
            }
            text.push_str(");");
        }
        text.push_str("root ");
        self.write_position(&mut text, &pos, c.root);
        text.push_str(" params ");
        for &p in &c.params {
            self.write_position(&mut text, &pos, p);
        }
        let id = self.text_id(text);
        self.visiting[ci] = false;
        self.comps[ci] = Some(id);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(text: &str) -> (Module, ContentIds) {
        let m = crate::hlo::parse_module("test.hlo", text).expect("parses");
        let ids = ContentIds::of(&m);
        (m, ids)
    }

    fn instr<'m>(m: &'m Module, name: &str) -> &'m crate::ir::Instruction {
        m.computations
            .values()
            .flat_map(|c| c.order.iter().map(move |&i| c.instr(i)))
            .find(|i| &*i.name == name)
            .expect("instruction")
    }

    const TWO_REDUCES: &str = r#"HloModule m

add_a {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

add_b {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT t = f32[] add(p, q)
}

max_c {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] maximum(x, y)
}

ENTRY e {
  a = f32[8,128]{1,0} parameter(0), metadata={op_name="first"}
  b = f32[8,128]{1,0} parameter(1), metadata={op_name="second"}
  z = f32[] constant(0)
  r1 = f32[8]{0} reduce(a, z), dimensions={1}, to_apply=add_a, metadata={op_name="r1"}
  r2 = f32[8]{0} reduce(b, z), dimensions={1}, to_apply=add_b, metadata={op_name="r2"}
  r3 = f32[8]{0} reduce(b, z), dimensions={1}, to_apply=max_c
  r4 = f32[8]{0} reduce(b, z), dimensions={0}, to_apply=add_a
  ROOT t = (f32[8]{0}, f32[8]{0}, f32[8]{0}, f32[8]{0}) tuple(r1, r2, r3, r4)
}
"#;

    #[test]
    fn equal_reductions_of_different_layers_share_an_id() {
        let (m, ids) = ids(TWO_REDUCES);
        let a = |n: &str| ids.attrs(&instr(&m, n).attrs).expect("numbered");
        // the reducers differ in name only; the metadata is not read
        assert_eq!(a("r1"), a("r2"));
        // another reducer, another dimension
        assert_ne!(a("r1"), a("r3"));
        assert_ne!(a("r1"), a("r4"));
        assert_ne!(a("r3"), a("r4"));
        // parameters: their numbers differ
        assert_ne!(a("a"), a("b"));
        let s = |n: &str| ids.shape(&*instr(&m, n).shape as *const Shape as usize);
        assert_eq!(s("a"), s("b"));
        assert_ne!(s("a"), s("r1"));
        assert_eq!(s("r1"), s("r4"));
        // not an input shape
        assert_eq!(ids.shape(0), None);
        // a, b and z; the four reductions' and the tuple's shapes: four distinct shapes
        assert_eq!(ids.distinct().0, 4);
    }

    /// The parser wants computations defined before use, but a module read from a
    /// proto, or built by hand, can hold a computation that calls itself.
    #[test]
    fn a_computation_that_calls_itself_is_equal_to_no_other() {
        let text = r#"HloModule m

leaf {
  x = f32[] parameter(0)
  ROOT n = f32[] negate(x)
}

loop_a {
  x = f32[] parameter(0)
  ROOT c = f32[] call(x), to_apply=leaf
}

loop_b {
  x = f32[] parameter(0)
  ROOT c = f32[] call(x), to_apply=leaf
}

ENTRY e {
  p = f32[] parameter(0)
  a = f32[] call(p), to_apply=loop_a
  ROOT b = f32[] call(p), to_apply=loop_b
}
"#;
        let mut m = crate::hlo::parse_module("test.hlo", text).expect("parses");
        {
            let ids = ContentIds::of(&m);
            let a = |n: &str| ids.attrs(&instr(&m, n).attrs).expect("numbered");
            assert_eq!(a("a"), a("b"), "loop_a and loop_b differ in name only");
        }
        // each loop now calls itself
        for name in ["loop_a", "loop_b"] {
            let ci = m.comp_id(name).expect("computation");
            let c = &mut m.computations[ci];
            let root = c.root;
            c.instr_mut(root).attrs.called[0].1 = ci;
        }
        let ids = ContentIds::of(&m);
        let a = |n: &str| ids.attrs(&instr(&m, n).attrs).expect("numbered");
        assert_ne!(a("a"), a("b"));
    }
}
