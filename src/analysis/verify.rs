//! The verifier: every instruction's declared shape must equal the inferred one
//! (layouts and dynamic-dimension flags ignored), plus a few structural checks.

use super::error::{VerifyError, VerifyErrorKind};
use super::infer::infer_shape;
use crate::ir::{Computation, InstrId, Module, Opcode, Shape};

fn err(comp: &Computation, id: InstrId, kind: VerifyErrorKind) -> VerifyError {
    let (instruction, opcode, line) = match comp.graph.node_weight(id) {
        Some(i) => (i.name.to_string(), i.opcode_text(), i.line),
        None => (String::new(), String::new(), comp.line),
    };
    VerifyError {
        computation: comp.name.clone(),
        instruction,
        opcode,
        line,
        kind,
    }
}

/// Verify every computation of `m`. Returns all findings (in computation and
/// program order), or `Ok(())` when the module is well formed.
pub fn verify_module(m: &Module) -> Result<(), Vec<VerifyError>> {
    let mut errors = Vec::new();
    for comp in m.computations.values() {
        verify_computation(m, comp, &mut errors);
    }
    // The entry computation's parameters and root against entry_computation_layout.
    if let (Some((params, result)), Some(entry)) = (
        m.attrs.entry_computation_layout.as_ref(),
        m.computations.get_index(m.entry).map(|(_, c)| c),
    ) {
        if params.len() == entry.params.len() {
            for (i, (&p, s)) in entry.params.iter().zip(params).enumerate() {
                let ps = &entry.instr(p).shape;
                if !ps.compatible(s) {
                    errors.push(err(
                        entry,
                        p,
                        VerifyErrorKind::Structure(format!(
                            "parameter {i} has shape {} but entry_computation_layout says {}",
                            super::error::shape_text(ps),
                            super::error::shape_text(s)
                        )),
                    ));
                }
            }
        } else if !entry.order.is_empty() {
            errors.push(err(
                entry,
                entry.root,
                VerifyErrorKind::Structure(format!(
                    "entry computation has {} parameters but entry_computation_layout lists {}",
                    entry.params.len(),
                    params.len()
                )),
            ));
        }
        if entry.graph.contains_node(entry.root) {
            let rs = &entry.instr(entry.root).shape;
            if !rs.compatible(result) {
                errors.push(err(
                    entry,
                    entry.root,
                    VerifyErrorKind::Structure(format!(
                        "root shape {} differs from the entry_computation_layout result {}",
                        super::error::shape_text(rs),
                        super::error::shape_text(result)
                    )),
                ));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Verify one computation of `m`, appending findings to `errors`.
pub fn verify_computation(m: &Module, comp: &Computation, errors: &mut Vec<VerifyError>) {
    if !comp.graph.contains_node(comp.root) {
        errors.push(VerifyError {
            computation: comp.name.clone(),
            instruction: String::new(),
            opcode: String::new(),
            line: comp.line,
            kind: VerifyErrorKind::Structure("the computation has no root".into()),
        });
        return;
    }
    for (n, &p) in comp.params.iter().enumerate() {
        let i = comp.instr(p);
        if i.opcode != Opcode::Parameter || i.attrs.parameter_number != Some(n as i64) {
            errors.push(err(
                comp,
                p,
                VerifyErrorKind::Structure(format!("parameter slot {n} is not parameter({n})")),
            ));
        }
    }
    for &id in &comp.order {
        let instr = comp.instr(id);
        if let Some(n) = instr.opcode.arity() {
            let found = comp.operand_count(id);
            if instr.async_wrapped.is_none() && found != n {
                errors.push(err(
                    comp,
                    id,
                    VerifyErrorKind::Malformed(super::error::ShapeError::OperandCount {
                        expected: n.to_string(),
                        found,
                    }),
                ));
                continue;
            }
        }
        match infer_shape(m, comp, id) {
            Ok(Some(inferred)) => {
                if !shapes_match(&instr.shape, &inferred) {
                    errors.push(err(
                        comp,
                        id,
                        VerifyErrorKind::ShapeMismatch {
                            declared: Box::new((*instr.shape).clone()),
                            inferred: Box::new(inferred),
                        },
                    ));
                }
            }
            Ok(None) => {}
            Err(e) => errors.push(err(comp, id, VerifyErrorKind::Malformed(e))),
        }
    }
}

/// Declared vs inferred, ignoring layouts and dynamic-dimension flags.
fn shapes_match(declared: &Shape, inferred: &Shape) -> bool {
    declared.compatible(inferred)
}
