//! Per-opcode facts the lowering needs: VPU cost class of each element-wise op, and the
//! shape/layout helpers shared by the lowering. (Which opcodes cost nothing at run time
//! and which only move data are classes of [`Opcode`].)

use crate::ir::{ArrayShape, Computation, Module, Opcode, PrimitiveType, Shape};
use crate::tpu::OpCounts;

/// VPU cost of one element of `op` by cost class (spec §5.1: add/mul/select/
/// compare cheap; divide, exp, log, tanh, rsqrt, sqrt, pow, logistic medium;
/// sin, cos, tan, erf, atan2 and other polynomial expansions expensive).
/// Data-movement ops and ops that are handled separately (dot, reduce, ...)
/// return zero.
pub fn op_class(op: Opcode) -> OpCounts {
    use Opcode::*;
    let (cheap, medium, expensive) = match op {
        Add | Subtract | Multiply | Maximum | Minimum | Select | Compare | And | Or | Xor | Not
        | Negate | Abs | Convert | Sign | Floor | Ceil | RoundNearestAfz | RoundNearestEven
        | ShiftLeft | ShiftRightArithmetic | ShiftRightLogical | PopulationCount | Clz
        | IsFinite | Real | Imag | Complex | ReducePrecision | StochasticConvert | Iota => {
            (1.0, 0.0, 0.0)
        }
        Clamp => (2.0, 0.0, 0.0),
        Divide | Remainder | Exp | Expm1 | Log | Log1p | Tanh | Rsqrt | Sqrt | Cbrt | Power
        | Logistic => (0.0, 1.0, 0.0),
        Sin | Cos | Tan | Erf | Atan2 | Acos | Asin | Acosh | Asinh | Atanh | Sinh | Cosh => {
            (0.0, 0.0, 1.0)
        }
        Rng => (8.0, 0.0, 0.0),
        RngBitGenerator => (20.0, 0.0, 0.0),
        _ => (0.0, 0.0, 0.0),
    };
    OpCounts {
        cheap,
        medium,
        expensive,
    }
}

/// Element width in bits of an array shape for the kernel model
/// ([`ArrayShape::element_bits`], clamped to the 1..=64 bits the model supports:
/// complex128 is counted as 64, a documented approximation).
pub fn elem_bits(a: &ArrayShape) -> u32 {
    a.element_bits().clamp(1, 64)
}

/// Size of a dim for the model: bounded dynamic dims use their bound,
/// unbounded ones count as 1.
pub fn dim_size(d: i64) -> i64 {
    if d < 0 {
        1
    } else {
        d
    }
}

/// A physical order ([`physical_order`]): inline for the ranks HLO programs use.
pub type PhysOrder = smallvec::SmallVec<[usize; 8]>;

/// The layout of an array as `physical_order` and `physical_dims` read it: its
/// `minor_to_major` when that is a permutation of its dims, else none (row-major).
fn valid_minor_to_major(a: &ArrayShape) -> Option<&[i64]> {
    a.explicit_minor_to_major()
        .filter(|m2m| crate::passes::tiling::is_permutation(m2m, a.rank()))
}

/// The layout the cost model reads of an array, handed to `f`: its `minor_to_major`
/// ([`valid_minor_to_major`]; none for row-major) with its size-1 dims numbered as
/// [`crate::passes::tiling::canonical_unit_order`] numbers them. Layouts that differ only
/// in which size-1 dim sits where lay out the same bytes and read the same here, so that
/// they cost the same and the kernel tables key them alike (`kernels::memo`).
pub(crate) fn with_model_minor_to_major<R>(
    a: &ArrayShape,
    f: impl FnOnce(Option<&[i64]>) -> R,
) -> R {
    let Some(m2m) = valid_minor_to_major(a) else {
        return f(None);
    };
    match crate::passes::tiling::canonical_unit_order(&a.dims, m2m) {
        Some(c) => f(Some(&c)),
        None => f(Some(m2m)),
    }
}

/// Logical dims → physical order: `phys[k]` = logical dim at physical
/// position `k` (major→minor = reverse of `minor_to_major`; a malformed layout reads
/// as row-major), as the cost model reads the layout ([`with_model_minor_to_major`]).
pub fn physical_order(a: &ArrayShape) -> PhysOrder {
    const INLINE: usize = 8;
    let rank = a.rank();
    with_model_minor_to_major(a, |m2m| {
        if rank > INLINE {
            return match m2m {
                // a permutation of 0..rank: every entry converts
                Some(m2m) => m2m.iter().rev().map(|&d| d as usize).collect(),
                None => (0..rank).collect(),
            };
        }
        // Written into the inline buffer whole (the common case, and most of the cost
        // of a collect was its pushes).
        let mut buf = [0usize; INLINE];
        match m2m {
            Some(m2m) => {
                for (b, &d) in buf.iter_mut().zip(m2m.iter().rev()) {
                    *b = d as usize;
                }
            }
            None => {
                for (k, b) in buf.iter_mut().enumerate() {
                    *b = k;
                }
            }
        }
        PhysOrder::from_buf_and_len(buf, rank)
    })
}

/// Physical dims (major→minor) of an array shape: [`crate::passes::tiling::physical_dims`]
/// over its layout (a malformed layout reads as row-major).
pub fn physical_dims(a: &ArrayShape) -> crate::ir::Dims {
    use crate::passes::tiling;
    match valid_minor_to_major(a) {
        Some(m2m) => tiling::physical_dims(&a.dims, m2m),
        None => tiling::physical_dims(&a.dims, &tiling::row_major(a.rank())),
    }
}

/// The array an instruction produces for dim-tracing purposes: the array
/// itself, or the first array leaf of a tuple (variadic reduce / sort
/// elements share their dims).
pub fn elem_shape(s: &Shape) -> Option<&ArrayShape> {
    match s {
        Shape::Array(a) => Some(a),
        Shape::Tuple(v) => v.iter().find_map(elem_shape),
        Shape::Buffer(b) => elem_shape(b),
    }
}

/// Number of elements of an array (dynamic dims at their bound), ≥ 1.
pub fn elements(a: &ArrayShape) -> f64 {
    a.dims.iter().map(|&d| dim_size(d) as f64).product::<f64>()
}

/// Whether an array shape holds data (not a token / opaque / empty array).
pub fn is_data(a: &ArrayShape) -> bool {
    a.element_type.is_array()
        && a.element_type != PrimitiveType::Invalid
        && a.dims.iter().all(|&d| d != 0)
}

/// VPU ops of one application of a reducer / comparator computation
/// (Σ cost classes of its instructions, nested calls included once).
pub fn computation_ops(module: &Module, comp: &Computation, depth: usize) -> OpCounts {
    let mut total = OpCounts::default();
    if depth > 8 {
        return total;
    }
    for &id in &comp.order {
        let ins = comp.instr(id);
        let c = op_class(ins.opcode);
        let n = ins.shape.as_array().map(elements).unwrap_or(1.0).max(1.0);
        total.cheap += c.cheap * n;
        total.medium += c.medium * n;
        total.expensive += c.expensive * n;
        for (_, callee) in &ins.attrs.called {
            if let Some(cc) = module.computations.get_index(*callee).map(|(_, c)| c) {
                let inner = computation_ops(module, cc, depth + 1);
                total.cheap += inner.cheap;
                total.medium += inner.medium;
                total.expensive += inner.expensive;
            }
        }
    }
    total
}

/// `a += b × w` for op counts.
pub fn add_scaled(a: &mut OpCounts, b: OpCounts, w: f64) {
    a.cheap += b.cheap * w;
    a.medium += b.medium * w;
    a.expensive += b.expensive * w;
}

/// Total op count (cheap + medium + expensive).
pub fn total_ops(c: &OpCounts) -> f64 {
    c.cheap + c.medium + c.expensive
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Layout;

    fn array(dims: &[i64], m2m: Option<&[i64]>) -> ArrayShape {
        ArrayShape {
            element_type: PrimitiveType::F32,
            dims: dims.iter().copied().collect(),
            dynamic_mask: 0,
            layout: m2m.map(|m| Layout {
                minor_to_major: m.iter().copied().collect(),
                ..Layout::default()
            }),
        }
    }

    /// The physical order and dims follow a valid layout; a missing, short or
    /// malformed one reads as row-major.
    #[test]
    fn physical_order_and_dims_follow_the_layout() {
        let order = |a: &ArrayShape| physical_order(a).to_vec();
        let dims = |a: &ArrayShape| physical_dims(a).to_vec();
        let nhwc = array(&[8, 32, 16, 3], Some(&[1, 2, 0, 3]));
        assert_eq!(order(&nhwc), [3, 0, 2, 1]);
        assert_eq!(dims(&nhwc), [3, 8, 16, 32]);
        for m2m in [
            None,
            Some(&[0, 1][..]),
            Some(&[1, 1, 0, 3]),
            Some(&[1, 4, 0, 3]),
        ] {
            let a = array(&[8, 32, 16, 3], m2m);
            assert_eq!(order(&a), [0, 1, 2, 3], "{m2m:?}");
            assert_eq!(dims(&a), [8, 32, 16, 3], "{m2m:?}");
        }
        // a dynamic dim without a bound counts as 1
        assert_eq!(dims(&array(&[4, -1], Some(&[0, 1]))), [1, 4]);
        assert!(order(&array(&[], None)).is_empty());
    }
}
