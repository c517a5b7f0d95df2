//! Trip counts of `while` loops: the one analysis that the kernel list of a compiled
//! module (`compile --emit json`, [`crate::passes::CallSite::trip_count`]) and the
//! program estimate ([`crate::kernels::LoweredProgram`]) both ask, as XLA has one
//! (`while_loop_analysis`).
//!
//! A loop's count is, in this order:
//! 1. `backend_config={"known_trip_count":{"n":"N"}}` (what XLA writes once it knows);
//! 2. the counted form `i = C0; while (i <cmp> C1) { i = i + C2 }`: the condition's root
//!    compares element `k` of its parameter with a constant (either way round, any of
//!    `LT LE GT GE NE`), the body's root tuple sets element `k` to that element plus a
//!    constant (`add` either way round, or `subtract` of a constant), and element `k` of
//!    the `while`'s operand tuple is a constant. Converts, copies, bitcasts and reshapes
//!    of scalars are looked through.
//!
//! Anything else has no known count ([`TripSource::Default`]: the program estimate then
//! assumes [`DEFAULT_TRIP_COUNT`] and says so).

use serde::Serialize;

use crate::ir::{integer_literal, CallRole, Comparison, Computation, InstrId, Module, Opcode};

/// Trip count assumed for a loop whose count is not known.
pub const DEFAULT_TRIP_COUNT: u64 = 1;

/// Where a `while` trip count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TripSource {
    /// `backend_config={"known_trip_count":{"n":"N"}}`.
    BackendConfig,
    /// Constant induction variable: `i < C` in the condition, `i + s` in the body.
    Induction,
    /// Neither: [`DEFAULT_TRIP_COUNT`].
    Default,
}

/// The trip count of `while` instruction `w` of `parent`, and where it came from;
/// [`DEFAULT_TRIP_COUNT`] with [`TripSource::Default`] when it is not known.
pub fn trip_count(m: &Module, parent: &Computation, w: InstrId) -> (u64, TripSource) {
    known_trip_count(m, parent, w).unwrap_or((DEFAULT_TRIP_COUNT, TripSource::Default))
}

/// The trip count of `while` instruction `w` of `parent` when the module states it or
/// the loop has the counted form (module docs); `None` otherwise.
pub fn known_trip_count(m: &Module, parent: &Computation, w: InstrId) -> Option<(u64, TripSource)> {
    let ins = parent.instr(w);
    if ins.opcode != Opcode::While {
        return None;
    }
    if let Some(n) = ins
        .attrs
        .backend_config
        .as_deref()
        .and_then(backend_trip_count)
    {
        return Some((n, TripSource::BackendConfig));
    }
    induction_trip_count(m, parent, w).map(|n| (n, TripSource::Induction))
}

/// `known_trip_count.n` of a backend_config (JSON, possibly written as a JSON string).
fn backend_trip_count(bc: &str) -> Option<u64> {
    let text = bc.trim();
    let text = if text.starts_with('"') {
        serde_json::from_str::<String>(text).ok()?
    } else {
        text.to_string()
    };
    let v = serde_json::from_str::<serde_json::Value>(&text).ok()?;
    let n = v.get("known_trip_count")?.get("n")?;
    match n {
        serde_json::Value::String(s) => integer_literal(s),
        serde_json::Value::Number(x) => x.as_i64(),
        _ => None,
    }
    .and_then(|n| u64::try_from(n).ok())
}

/// `id`, looked through scalar converts, copies, bitcasts and reshapes.
fn through_unary(c: &Computation, mut id: InstrId) -> InstrId {
    for _ in 0..8 {
        match c.instr(id).opcode {
            Opcode::Convert | Opcode::Copy | Opcode::Bitcast | Opcode::Reshape => {
                match c.operand(id, 0) {
                    Some(o) => id = o,
                    None => break,
                }
            }
            _ => break,
        }
    }
    id
}

/// The value of a scalar integer constant.
fn constant(c: &Computation, id: InstrId) -> Option<i64> {
    c.instr(through_unary(c, id)).scalar_integer_constant()
}

/// `k` when `id` is `get-tuple-element(parameter(0)), index=k`.
fn parameter_element(c: &Computation, id: InstrId) -> Option<usize> {
    let id = through_unary(c, id);
    let ins = c.instr(id);
    (ins.opcode == Opcode::GetTupleElement).then_some(())?;
    (c.instr(c.operand(id, 0)?).opcode == Opcode::Parameter).then_some(())?;
    usize::try_from(ins.attrs.tuple_index?).ok()
}

fn induction_trip_count(m: &Module, parent: &Computation, w: InstrId) -> Option<u64> {
    let ins = parent.instr(w);
    let cond = m.comp(ins.attrs.called_with(CallRole::Condition)?);
    let body = m.comp(ins.attrs.called_with(CallRole::Body)?);
    // Condition: compare(element k, limit), either way round.
    let croot = cond.instr(cond.root);
    if croot.opcode != Opcode::Compare {
        return None;
    }
    let (a, b) = (cond.operand(cond.root, 0)?, cond.operand(cond.root, 1)?);
    let mut dir = croot.attrs.comparison?;
    let (k, limit) = match (parameter_element(cond, a), parameter_element(cond, b)) {
        (Some(k), None) => (k, constant(cond, b)?),
        (None, Some(k)) => {
            dir = match dir {
                Comparison::Lt => Comparison::Gt,
                Comparison::Le => Comparison::Ge,
                Comparison::Gt => Comparison::Lt,
                Comparison::Ge => Comparison::Le,
                d => d,
            };
            (k, constant(cond, a)?)
        }
        _ => return None,
    };
    // Body: element k of the root tuple is element k plus (or minus) a constant.
    if body.instr(body.root).opcode != Opcode::Tuple {
        return None;
    }
    let upd = through_unary(body, body.operand(body.root, k)?);
    let (x, y) = (body.operand(upd, 0)?, body.operand(upd, 1)?);
    let (px, py) = (parameter_element(body, x), parameter_element(body, y));
    let step = match (body.instr(upd).opcode, px, py) {
        (Opcode::Add, Some(j), None) if j == k => constant(body, y)?,
        (Opcode::Add, None, Some(j)) if j == k => constant(body, x)?,
        (Opcode::Subtract, Some(j), None) if j == k => constant(body, y)?.checked_neg()?,
        _ => return None,
    };
    // Init: element k of the while's operand tuple, a constant.
    let t = parent.operand(w, 0)?;
    if parent.instr(t).opcode != Opcode::Tuple {
        return None;
    }
    let init = constant(parent, parent.operand(t, k)?)?;
    iterations(init, limit, step, dir)
}

/// Iterations of `for (i = init; i <dir> limit; i += step)`; `None` when the loop does
/// not end (or is not a counted loop).
pub fn iterations(init: i64, limit: i64, step: i64, dir: Comparison) -> Option<u64> {
    let (span, s) = (limit as i128 - init as i128, step as i128);
    let ceil = |a: i128, b: i128| if a <= 0 { 0 } else { (a + b - 1) / b };
    let n = match dir {
        Comparison::Lt if s > 0 => ceil(span, s),
        Comparison::Le if s > 0 => ceil(span + 1, s),
        Comparison::Gt if s < 0 => ceil(-span, -s),
        Comparison::Ge if s < 0 => ceil(-span + 1, -s),
        Comparison::Ne if s != 0 && span % s == 0 && span / s >= 0 => span / s,
        _ => return None,
    };
    u64::try_from(n).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iterations_of_counted_loops() {
        use Comparison::*;
        assert_eq!(iterations(0, 10, 1, Lt), Some(10));
        assert_eq!(iterations(0, 10, 3, Lt), Some(4));
        assert_eq!(iterations(0, 10, 3, Le), Some(4));
        assert_eq!(iterations(0, 9, 3, Le), Some(4));
        assert_eq!(iterations(10, 0, -1, Gt), Some(10));
        assert_eq!(iterations(10, 0, -1, Ge), Some(11));
        assert_eq!(iterations(5, 5, 1, Lt), Some(0));
        assert_eq!(iterations(0, 12, 4, Ne), Some(3));
        assert_eq!(iterations(0, 13, 4, Ne), None);
        assert_eq!(iterations(0, 10, -1, Lt), None);
        assert_eq!(iterations(i64::MIN, i64::MAX, 1, Ne), Some(u64::MAX));
        assert_eq!(iterations(i64::MIN, i64::MAX, 1, Le), None);
    }

    #[test]
    fn backend_config_counts() {
        assert_eq!(
            backend_trip_count(r#"{"known_trip_count":{"n":"7"}}"#),
            Some(7)
        );
        assert_eq!(
            backend_trip_count(r#""{\"known_trip_count\":{\"n\":\"7\"}}""#),
            Some(7)
        );
        assert_eq!(
            backend_trip_count(r#"{"known_trip_count":{"n":3}}"#),
            Some(3)
        );
        assert_eq!(
            backend_trip_count(r#"{"known_trip_count":{"n":"-3"}}"#),
            None
        );
        assert_eq!(backend_trip_count("{}"), None);
    }
}
