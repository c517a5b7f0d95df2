//! The checks every module passes before anything else sees it, whichever front end read
//! it (HLO text, `HloModuleProto`): the front ends share this one set of rules.
//!
//! * Every array dimension is ≥ 0, or `?` ([`UNBOUNDED_DIM`]) on a dynamic dimension.
//! * No array holds more than [`MAX_ARRAY_ELEMENTS`] elements or [`MAX_ARRAY_BYTES`]
//!   bytes (tiled padding included): far beyond any TPU's memory, and small enough that
//!   every size, flop count and runtime derived from it stays exact and finite.
//! * Computation and instruction names are HLO names (what the text grammar reads), and
//!   an opcode of fixed arity has that many operands.
//! * Computations do not call themselves, directly or through others, and calls nest at
//!   most [`MAX_CALL_DEPTH`] deep (what every recursive walk of a module relies on).

use super::module::{Computation, Instruction, Module};
use super::shape::{ArrayShape, Shape, UNBOUNDED_DIM};

/// Deepest chain of called computations accepted (entry → call → fusion → … counts each
/// computation once). Real HLO nests under 20 deep.
pub const MAX_CALL_DEPTH: usize = 64;

/// Most elements of one array (2^40).
pub const MAX_ARRAY_ELEMENTS: u64 = 1 << 40;

/// Most bytes of one array (1 TiB), tiled padding included.
pub const MAX_ARRAY_BYTES: u64 = 1 << 40;

/// A module that breaks a rule of [`check_module`], with where: the computation, the
/// instruction (if any) and its source position (0 when unknown, e.g. from a proto).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CheckError {
    pub computation: String,
    pub instruction: Option<String>,
    pub line: u32,
    pub col: u32,
    pub message: String,
}

/// Why an array shape is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeRefusal {
    #[error("dimension {dim} is negative ({size})")]
    NegativeDim { dim: usize, size: i64 },
    /// The shape (as `f32[8,?]`) holds more than [`MAX_ARRAY_ELEMENTS`] elements.
    #[error("shape {0} has more than 2^40 elements (the most one array may hold)")]
    TooManyElements(String),
    /// The shape needs more than [`MAX_ARRAY_BYTES`] bytes.
    #[error("shape {0} needs more than 1 TiB (the most one array may hold)")]
    TooManyBytes(String),
}

/// Why an array shape is refused, if it is: a negative dimension, or a size past the
/// limits.
pub fn check_array(a: &ArrayShape) -> Result<(), ShapeRefusal> {
    for (i, &d) in a.dims.iter().enumerate() {
        let unbounded = d == UNBOUNDED_DIM && a.is_dynamic_dim(i);
        if d < 0 && !unbounded {
            return Err(ShapeRefusal::NegativeDim { dim: i, size: d });
        }
    }
    let elements = a
        .dims
        .iter()
        .filter(|&&d| d >= 0)
        .try_fold(1u64, |n, &d| n.checked_mul(d as u64));
    match elements {
        Some(n) if n <= MAX_ARRAY_ELEMENTS => {}
        _ => return Err(ShapeRefusal::TooManyElements(text(a))),
    }
    // Sizes saturate at u64::MAX, which is past the limit too.
    let bytes = a.byte_size().max(a.padded_byte_size());
    if bytes > MAX_ARRAY_BYTES {
        return Err(ShapeRefusal::TooManyBytes(text(a)));
    }
    Ok(())
}

/// `f32[8,?]`: element type and dims, for messages.
fn text(a: &ArrayShape) -> String {
    let dims: Vec<String> = a
        .dims
        .iter()
        .map(|&d| {
            if d == UNBOUNDED_DIM {
                "?".to_string()
            } else {
                d.to_string()
            }
        })
        .collect();
    format!("{}[{}]", a.element_type, dims.join(","))
}

/// Why a shape (any array leaf of it) is refused, if it is.
pub fn check_shape(s: &Shape) -> Result<(), ShapeRefusal> {
    // Iterative: tuple nesting is bounded by the front ends, but a walk must not rely on it.
    let mut stack = vec![s];
    while let Some(s) = stack.pop() {
        match s {
            Shape::Array(a) => check_array(a)?,
            Shape::Tuple(v) => stack.extend(v.iter()),
            Shape::Buffer(b) => stack.push(b),
        }
    }
    Ok(())
}

fn at(c: &Computation, i: Option<&Instruction>, message: String) -> CheckError {
    CheckError {
        computation: c.name.clone(),
        instruction: i.map(|i| i.name.to_string()),
        line: i.map_or(c.line, |i| i.line),
        col: i.map_or(0, |i| i.col),
        message,
    }
}

/// Whether `name` is a name HLO text can hold (`%` + letters, digits, `_`, `.`, `-`):
/// a module read from a proto must print as text that parses.
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn not_a_name(what: &str, name: &str) -> String {
    format!("{what} name {name:?} is not an HLO name (letters, digits, '_', '.', '-')")
}

/// Checks `m` against the rules of this module (see the module documentation); the first
/// violation, in module order.
pub fn check_module(m: &Module) -> Result<(), CheckError> {
    let n = m.computations.len();
    if let Some((params, result)) = &m.attrs.entry_computation_layout {
        for s in params.iter().chain(std::iter::once(result)) {
            check_shape(s).map_err(|e| CheckError {
                computation: String::new(),
                instruction: None,
                line: 1,
                col: 1,
                message: format!("entry_computation_layout: {e}"),
            })?;
        }
    }
    for c in m.computations.values() {
        if !is_name(&c.name) {
            return Err(at(c, None, not_a_name("computation", &c.name)));
        }
        for &id in &c.order {
            let i = c.instr(id);
            if !is_name(&i.name) {
                return Err(at(c, Some(i), not_a_name("instruction", &i.name)));
            }
            check_shape(&i.shape).map_err(|e| at(c, Some(i), e.to_string()))?;
            if let (None, Some(n)) = (i.async_wrapped, i.opcode.arity()) {
                let found = c.operand_count(id);
                if found != n {
                    return Err(at(
                        c,
                        Some(i),
                        format!(
                            "'{}' takes {n} operand{}, found {found}",
                            i.opcode.name(),
                            if n == 1 { "" } else { "s" }
                        ),
                    ));
                }
            }
            for (_, callee) in i.attrs.called.iter() {
                if *callee >= n {
                    return Err(at(
                        c,
                        Some(i),
                        format!("calls computation #{callee}, which does not exist"),
                    ));
                }
            }
        }
    }
    check_calls(m)
}

/// Height of every computation in the call graph (1 = calls nothing), found without
/// recursion; a cycle or a chain deeper than [`MAX_CALL_DEPTH`] is an error at the
/// calling instruction.
fn check_calls(m: &Module) -> Result<(), CheckError> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        Open,
        Done(usize),
    }
    struct Frame {
        comp: usize,
        /// Position in `order` of the instruction being looked at, and its next callee.
        pos: usize,
        slot: usize,
        height: usize,
    }
    let comps: Vec<&Computation> = m.computations.values().collect();
    let n = comps.len();
    let mut state = vec![State::New; n];
    // The callee through which each finished computation reaches its height.
    let mut deepest: Vec<Option<usize>> = vec![None; n];
    let mut stack: Vec<Frame> = Vec::new();
    for root in 0..n {
        if state[root] != State::New {
            continue;
        }
        state[root] = State::Open;
        stack.push(Frame {
            comp: root,
            pos: 0,
            slot: 0,
            height: 1,
        });
        while let Some(top) = stack.last_mut() {
            let comp = comps[top.comp];
            let Some(ins) = comp.order.get(top.pos).map(|&id| comp.instr(id)) else {
                let (done, h) = (top.comp, top.height);
                state[done] = State::Done(h);
                stack.pop();
                if let Some(parent) = stack.last_mut() {
                    if h + 1 > parent.height {
                        parent.height = h + 1;
                        deepest[parent.comp] = Some(done);
                    }
                }
                continue;
            };
            let Some(&(_, callee)) = ins.attrs.called.get(top.slot) else {
                top.pos += 1;
                top.slot = 0;
                continue;
            };
            top.slot += 1;
            let h = match state[callee] {
                State::Done(h) => h,
                State::Open => {
                    let from = stack.iter().position(|f| f.comp == callee).unwrap_or(0);
                    let mut names: Vec<&str> = stack[from..]
                        .iter()
                        .map(|f| comps[f.comp].name.as_str())
                        .collect();
                    names.push(&comps[callee].name);
                    let msg = if names.len() == 2 {
                        format!("computation '{}' calls itself", comp.name)
                    } else {
                        format!(
                            "computations call each other in a cycle: {}",
                            names.join(" -> ")
                        )
                    };
                    return Err(at(comp, Some(ins), msg));
                }
                State::New => {
                    if stack.len() < MAX_CALL_DEPTH {
                        state[callee] = State::Open;
                        stack.push(Frame {
                            comp: callee,
                            pos: 0,
                            slot: 0,
                            height: 1,
                        });
                        continue;
                    }
                    // Deeper than allowed whatever the callee holds.
                    1
                }
            };
            let chain_len = stack.len() + h;
            if chain_len > MAX_CALL_DEPTH || h + 1 > MAX_CALL_DEPTH {
                let mut chain: Vec<&str> =
                    stack.iter().map(|f| comps[f.comp].name.as_str()).collect();
                let mut next = Some(callee);
                while let Some(c) = next {
                    chain.push(&comps[c].name);
                    next = deepest[c];
                }
                return Err(at(comp, Some(ins), too_deep(&chain)));
            }
            let top = stack.last_mut().expect("the frame looked at");
            if h + 1 > top.height {
                top.height = h + 1;
                deepest[top.comp] = Some(callee);
            }
        }
    }
    Ok(())
}

/// The message for a chain of calls past [`MAX_CALL_DEPTH`] (`chain`: outermost first).
fn too_deep(chain: &[&str]) -> String {
    let shown = if chain.len() > 6 {
        format!(
            "{} -> ... -> {}",
            chain[..3].join(" -> "),
            chain[chain.len() - 2..].join(" -> ")
        )
    } else {
        chain.join(" -> ")
    };
    format!(
        "computations nest more than {MAX_CALL_DEPTH} deep ({} or more: {shown}); \
         deeper nesting is refused",
        chain.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::PrimitiveType;

    #[test]
    fn arrays_within_and_past_the_limits() {
        let ok = ArrayShape::new(PrimitiveType::F32, &[1 << 20, 1 << 18]);
        assert_eq!(check_array(&ok), Ok(()));
        let too_many = ArrayShape::new(PrimitiveType::F32, &[1 << 20, 1 << 21]);
        assert_eq!(
            check_array(&too_many).unwrap_err().to_string(),
            "shape f32[1048576,2097152] has more than 2^40 elements (the most one array may hold)"
        );
        let too_big = ArrayShape::new(PrimitiveType::F32, &[1 << 20, 1 << 19]);
        assert_eq!(
            check_array(&too_big),
            Err(ShapeRefusal::TooManyBytes("f32[1048576,524288]".into()))
        );
        let wraps = ArrayShape::new(PrimitiveType::F32, &[i64::MAX, i64::MAX]);
        assert!(check_array(&wraps).is_err());
        let neg = ArrayShape::new(PrimitiveType::F32, &[4, -1000]);
        assert_eq!(
            check_array(&neg),
            Err(ShapeRefusal::NegativeDim {
                dim: 1,
                size: -1000
            })
        );
        let mut dynamic = ArrayShape::new(PrimitiveType::F32, &[UNBOUNDED_DIM, 8]);
        assert!(check_array(&dynamic).is_err(), "? needs the dynamic bit");
        dynamic.dynamic_mask = 1;
        assert_eq!(check_array(&dynamic), Ok(()));
    }
}
