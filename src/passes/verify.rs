//! Structural self-check of a compiled module (cheap, linear): the invariants the passes
//! must keep so that the module prints, re-parses and means the same.

use petgraph::visit::NodeIndexable;
use std::collections::HashSet;

use super::error::CompileError;
use crate::ir::{Module, Opcode, Shape};

fn err(m: &Module, msg: String) -> CompileError {
    CompileError::Verify {
        module: m.name.clone(),
        message: msg,
    }
}

/// Check a compiled module:
/// * every computation only calls computations defined before it;
/// * program order is topological and the root is in it;
/// * instruction names are unique in the module;
/// * each fusion's operands match its fused computation's parameters (dims, type and
///   layout) and its shape is the fused root's;
/// * copies keep dims and type; bitcasts keep the element type and count;
/// * every array shape has a layout that is a permutation of its dims;
/// * the entry computation layout matches the entry parameters and root.
pub fn verify(m: &Module) -> Result<(), CompileError> {
    if m.entry >= m.computations.len() {
        return Err(err(m, "entry computation index out of range".into()));
    }
    let mut names: HashSet<&str, super::flat::FxBuild> =
        HashSet::with_capacity_and_hasher(m.instruction_count(), Default::default());
    for (ci, c) in m.computations.values().enumerate() {
        let mut seen = vec![false; c.graph.node_bound()];
        for &id in &c.order {
            let ins = c.graph.node_weight(id).ok_or_else(|| err(m, format!("{}: dangling instruction id", c.name)))?;
            if !names.insert(ins.name.as_str()) {
                return Err(err(m, format!("instruction name '{}' used twice", ins.name)));
            }
            for o in c.operands(id) {
                if !seen.get(o.index()).copied().unwrap_or(false) {
                    return Err(err(m, format!("{}: operand of '{}' is not defined before it", c.name, ins.name)));
                }
            }
            for &(_, callee) in &ins.attrs.called {
                if callee >= ci {
                    return Err(err(m, format!("'{}' calls a computation defined after its own", ins.name)));
                }
            }
            check_layouts(m, &ins.name, &ins.shape)?;
            match ins.opcode {
                Opcode::Fusion => {
                    let callee = ins
                        .attrs
                        .called
                        .first()
                        .map(|&(_, f)| m.comp(f))
                        .ok_or_else(|| err(m, format!("fusion '{}' calls nothing", ins.name)))?;
                    let ops = c.operands(id);
                    if ops.len() != callee.params.len() {
                        return Err(err(m, format!("fusion '{}': {} operands, {} parameters", ins.name, ops.len(), callee.params.len())));
                    }
                    for (k, (&o, &p)) in ops.iter().zip(&callee.params).enumerate() {
                        if c.instr(o).shape != callee.instr(p).shape {
                            return Err(err(m, format!("fusion '{}': operand {k} does not match its parameter", ins.name)));
                        }
                    }
                    if callee.instr(callee.root).shape != ins.shape {
                        return Err(err(m, format!("fusion '{}': shape differs from its fused root", ins.name)));
                    }
                }
                Opcode::Copy => {
                    let o = c.operand(id, 0).ok_or_else(|| err(m, format!("copy '{}' has no operand", ins.name)))?;
                    if !c.instr(o).shape.compatible(&ins.shape) {
                        return Err(err(m, format!("copy '{}' changes the shape", ins.name)));
                    }
                }
                Opcode::Bitcast => {
                    let o = c.operand(id, 0).ok_or_else(|| err(m, format!("bitcast '{}' has no operand", ins.name)))?;
                    let os = &c.instr(o).shape;
                    if os.element_type() != ins.shape.element_type() || os.element_count() != ins.shape.element_count() {
                        return Err(err(m, format!("bitcast '{}' changes the element type or count", ins.name)));
                    }
                }
                _ => {}
            }
            if let Some(s) = seen.get_mut(id.index()) {
                *s = true;
            }
        }
        if !seen.get(c.root.index()).copied().unwrap_or(false) {
            return Err(err(m, format!("computation '{}' has no root", c.name)));
        }
    }
    let e = m.entry();
    if let Some((params, result)) = &m.attrs.entry_computation_layout {
        if params.len() != e.params.len()
            || params.iter().zip(&e.params).any(|(s, &p)| *s != e.instr(p).shape)
            || *result != e.instr(e.root).shape
        {
            return Err(err(m, "entry_computation_layout does not match the entry computation".into()));
        }
    }
    Ok(())
}

fn check_layouts(m: &Module, name: &str, s: &Shape) -> Result<(), CompileError> {
    match s {
        Shape::Array(a) => {
            if let Some(l) = &a.layout {
                if !super::tiling::is_permutation(&l.minor_to_major, a.rank()) {
                    return Err(err(m, format!("'{name}': layout {:?} is not a permutation", l.minor_to_major)));
                }
            }
            Ok(())
        }
        Shape::Tuple(v) => v.iter().try_for_each(|e| check_layouts(m, name, e)),
        Shape::Buffer(b) => check_layouts(m, name, b),
    }
}
