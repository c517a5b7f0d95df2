//! Shape inference: the result shape of an instruction from its operand shapes,
//! attributes and called computations, following XLA's `ShapeInference` rules.
//!
//! Where XLA takes part of the result from the instruction itself (the element type
//! of `convert` and of `dot`/`convolution` with a preferred type, the dimensions of
//! `broadcast`, `reshape`, `iota`, `dynamic-slice` sizes, ...), the inferred shape
//! takes that part from the declared shape after checking every constraint the
//! operands impose. Opcodes whose shape XLA does not infer (`custom-call`,
//! `bitcast`, `rng`, async wrappers, most collectives, ...) give `None`.
//!
//! [`infer_omitted_shape`] is the same inference for an instruction whose text has no
//! result shape, as XLA's parser does it (the text front end calls it).

use indexmap::IndexMap;
use smallvec::SmallVec;

use super::error::{shape_text, ShapeError};
use crate::ir::{
    ArrayShape, CallRole, CompId, Computation, Dims, InstrId, Instruction, Module, Opcode,
    PrimitiveType, Shape, Window, WindowDim,
};

type R<T> = Result<T, ShapeError>;

/// Whether XLA's text parser accepts `opcode` without a result shape and infers it
/// (hlo_parser.cc `CanInferShape`). Async wrappers and collectives are not among them:
/// XLA always writes their shapes.
pub fn infers_omitted_shape(op: Opcode) -> bool {
    use Opcode as O;
    matches!(
        op,
        O::Abs
            | O::Acos
            | O::Acosh
            | O::Asin
            | O::Asinh
            | O::Add
            | O::AddDependency
            | O::AfterAll
            | O::Atan2
            | O::Atanh
            | O::BatchNormGrad
            | O::BatchNormInference
            | O::BatchNormTraining
            | O::Broadcast
            | O::Call
            | O::Ceil
            | O::Cholesky
            | O::Clamp
            | O::Clz
            | O::Compare
            | O::Complex
            | O::Concatenate
            | O::Conditional
            | O::Convolution
            | O::Copy
            | O::Cos
            | O::Cosh
            | O::OptimizationBarrier
            | O::Divide
            | O::Domain
            | O::Dot
            | O::Erf
            | O::Exp
            | O::Expm1
            | O::Fft
            | O::Floor
            | O::Gather
            | O::GetDimensionSize
            | O::SetDimensionSize
            | O::GetTupleElement
            | O::Imag
            | O::IsFinite
            | O::Log
            | O::Log1p
            | O::Logistic
            | O::And
            | O::Not
            | O::Or
            | O::Xor
            | O::Map
            | O::Maximum
            | O::Minimum
            | O::Multiply
            | O::Negate
            | O::Pad
            | O::PartitionId
            | O::PopulationCount
            | O::Power
            | O::RaggedDot
            | O::Real
            | O::Reduce
            | O::Remainder
            | O::ReplicaId
            | O::Reverse
            | O::RoundNearestAfz
            | O::RoundNearestEven
            | O::Rsqrt
            | O::Scan
            | O::ScaledDot
            | O::Scatter
            | O::Select
            | O::ShiftLeft
            | O::ShiftRightArithmetic
            | O::ShiftRightLogical
            | O::Sign
            | O::Sin
            | O::Sinh
            | O::Sqrt
            | O::Cbrt
            | O::ReduceWindow
            | O::SelectAndScatter
            | O::Sort
            | O::Subtract
            | O::Tan
            | O::Tanh
            | O::Transpose
            | O::TriangularSolve
            | O::Tuple
            | O::While
            | O::TopK
    )
}

/// The result shape XLA's parser gives `instr` when its text has none: `instr.shape`
/// is not read; `ops` are the operand shapes and `comps` the computations defined so
/// far (for called computations). The same rules as [`infer_shape`], with the parts
/// that [`infer_shape`] takes from a declared shape inferred as XLA's parser does:
/// `broadcast` prepends its `dimensions` to the operand's (as
/// `ShapeInference::InferBroadcastShape(operand, sizes)`), `dot` and `convolution`
/// take the higher-precision element type of their operands. Element-wise results
/// keep the layout of the operand XLA copies them from; other results have none (the
/// parser gives them the default).
pub fn infer_omitted_shape(
    comps: &IndexMap<String, Computation>,
    instr: &Instruction,
    ops: &[&Shape],
) -> R<Shape> {
    if !infers_omitted_shape(instr.opcode) || instr.async_wrapped.is_some() {
        return invalid(format!(
            "{} needs an explicit result shape",
            instr.opcode.name()
        ));
    }
    let cx = Cx {
        comps,
        instr,
        declared: None,
        ops: ops.iter().copied().collect(),
    };
    if instr.opcode == Opcode::Broadcast {
        cx.count(1)?;
        let a = cx.arr(0)?;
        let empty = Dims::new();
        let sizes = match &instr.attrs.dimensions {
            Some(v) => v,
            None if a.rank() == 0 => &empty,
            None => return Err(ShapeError::MissingAttribute("dimensions")),
        };
        if let Some(&d) = sizes.iter().find(|&&d| d < 0) {
            return invalid(format!("broadcast with negative dimension size {d}"));
        }
        let mut dims = sizes.clone();
        dims.extend_from_slice(&a.dims);
        return Ok(array(a.element_type, &dims));
    }
    match cx.infer()? {
        Some(s) => Ok(s),
        None => invalid(format!(
            "the shape of {} cannot be inferred",
            instr.opcode.name()
        )),
    }
}

/// Infer the result shape of instruction `id` of `comp` (a computation of `m`).
///
/// `Ok(None)` means the shape is taken as declared (XLA does not infer it);
/// `Err` means the instruction is malformed.
pub fn infer_shape(m: &Module, comp: &Computation, id: InstrId) -> R<Option<Shape>> {
    let instr = comp.instr(id);
    let ops: SmallVec<[&Shape; 4]> = comp
        .operands(id)
        .iter()
        .map(|&o| &*comp.instr(o).shape)
        .collect();
    let cx = Cx {
        comps: &m.computations,
        instr,
        declared: Some(&instr.shape),
        ops,
    };
    cx.infer()
}

struct Cx<'a> {
    comps: &'a IndexMap<String, Computation>,
    instr: &'a Instruction,
    /// The declared result shape (`None`: the text has none, see [`infer_omitted_shape`]).
    declared: Option<&'a Shape>,
    ops: SmallVec<[&'a Shape; 4]>,
}

/// `s` with element type `et`, keeping its dims, dynamic flags and layout (XLA's
/// `ShapeUtil::ChangeElementType`): the result of an element-wise op.
fn like(s: &Shape, et: PrimitiveType) -> Shape {
    let mut s = s.clone();
    if let Shape::Array(a) = &mut s {
        a.element_type = et;
    }
    s
}

/// The element type of a `dot` or `convolution` written without a result shape (XLA's
/// `ShapeUtil::HigherPrecisionElementType`: complex over real, floating point over
/// integer, wider over narrower, signed over unsigned; ties keep the lhs type).
fn higher_precision(a: PrimitiveType, b: PrimitiveType) -> PrimitiveType {
    let key = |t: PrimitiveType| {
        (
            t.is_complex(),
            t.is_floating(),
            t.bit_width(),
            t.is_signed_integral(),
        )
    };
    if key(b) > key(a) {
        b
    } else {
        a
    }
}

/// A per-dimension attribute (`slice`, `padding`): present, with one entry per
/// dimension of an operand of rank `rank`.
fn per_dimension<'a, T>(v: Option<&'a [T]>, name: &'static str, rank: usize) -> R<&'a [T]> {
    let v = v.ok_or(ShapeError::MissingAttribute(name))?;
    if v.len() != rank {
        return invalid(format!(
            "{name} has {} dimensions, operand has rank {rank}",
            v.len()
        ));
    }
    Ok(v)
}

fn invalid<T>(msg: impl Into<String>) -> R<T> {
    Err(ShapeError::Invalid(msg.into()))
}

fn array(et: PrimitiveType, dims: &[i64]) -> Shape {
    Shape::Array(ArrayShape::new(et, dims))
}

/// Output size of one window dimension (XLA `InferWindowOutputShape`).
pub fn window_output_size(input: i64, w: &WindowDim) -> R<i64> {
    if w.size <= 0 || w.stride <= 0 || w.window_dilation <= 0 || w.base_dilation <= 0 {
        return Err(ShapeError::Window(format!(
            "size {}, stride {}, dilations {}/{} must be positive",
            w.size, w.stride, w.base_dilation, w.window_dilation
        )));
    }
    let overflow = || ShapeError::Window("window arithmetic overflows".into());
    let dilated_base = if input == 0 {
        0
    } else {
        (input - 1)
            .checked_mul(w.base_dilation)
            .and_then(|x| x.checked_add(1))
            .ok_or_else(overflow)?
    };
    let padded = dilated_base
        .checked_add(w.pad_low)
        .and_then(|x| x.checked_add(w.pad_high))
        .ok_or_else(overflow)?;
    let dilated_window = (w.size - 1)
        .checked_mul(w.window_dilation)
        .and_then(|x| x.checked_add(1))
        .ok_or_else(overflow)?;
    if padded < 0 {
        return Err(ShapeError::Window(format!(
            "padding {}_{} makes dimension of size {input} negative",
            w.pad_low, w.pad_high
        )));
    }
    if dilated_window > padded {
        return Ok(0);
    }
    Ok((padded - dilated_window) / w.stride + 1)
}

/// Result dims of applying `window` to `dims` (ranks must agree).
fn windowed_dims(dims: &[i64], window: &Window) -> R<Dims> {
    if window.dims.len() != dims.len() {
        return Err(ShapeError::Window(format!(
            "window has {} dimensions, operand has rank {}",
            window.dims.len(),
            dims.len()
        )));
    }
    dims.iter()
        .zip(window.dims.iter())
        .map(|(&d, w)| window_output_size(d, w))
        .collect()
}

fn real_type(t: PrimitiveType) -> PrimitiveType {
    match t {
        PrimitiveType::C64 => PrimitiveType::F32,
        PrimitiveType::C128 => PrimitiveType::F64,
        t => t,
    }
}

fn complex_type(t: PrimitiveType) -> Option<PrimitiveType> {
    match t {
        PrimitiveType::F32 => Some(PrimitiveType::C64),
        PrimitiveType::F64 => Some(PrimitiveType::C128),
        _ => None,
    }
}

fn check_dim(what: &'static str, d: i64, rank: usize) -> R<usize> {
    if d < 0 || d as usize >= rank {
        Err(ShapeError::DimensionOutOfRange { what, dim: d, rank })
    } else {
        Ok(d as usize)
    }
}

fn check_unique(what: &'static str, dims: &[i64], rank: usize) -> R<()> {
    let mut seen = vec![false; rank];
    for &d in dims {
        let i = check_dim(what, d, rank)?;
        if seen[i] {
            return invalid(format!("{what}: dimension {d} is listed twice"));
        }
        seen[i] = true;
    }
    Ok(())
}

/// The root shape of a called computation.
fn root_shape(f: &Computation) -> R<&Shape> {
    if f.graph.contains_node(f.root) {
        Ok(&f.instr(f.root).shape)
    } else {
        Err(ShapeError::Signature {
            computation: f.name.clone(),
            message: "the computation has no root".into(),
        })
    }
}

/// Shapes equal ignoring layouts and dynamic flags.
fn same(a: &Shape, b: &Shape) -> bool {
    a.compatible(b)
}

fn tuple_or_single(mut v: Vec<Shape>) -> Shape {
    if v.len() == 1 {
        v.pop().unwrap_or(Shape::Tuple(vec![]))
    } else {
        Shape::Tuple(v)
    }
}

impl<'a> Cx<'a> {
    fn op(&self, i: usize) -> R<&'a Shape> {
        self.ops.get(i).copied().ok_or(ShapeError::OperandCount {
            expected: format!("at least {}", i + 1),
            found: self.ops.len(),
        })
    }

    fn arr(&self, i: usize) -> R<&'a ArrayShape> {
        let s = self.op(i)?;
        s.as_array().ok_or_else(|| ShapeError::NotArray {
            operand: i,
            shape: shape_text(s),
        })
    }

    fn declared(&self) -> R<&'a Shape> {
        self.declared.ok_or_else(|| {
            ShapeError::Invalid(format!(
                "{} needs an explicit result shape",
                self.instr.opcode.name()
            ))
        })
    }

    fn declared_arr(&self) -> R<&'a ArrayShape> {
        self.declared()?
            .as_array()
            .ok_or_else(|| ShapeError::Invalid("the result must be an array".into()))
    }

    /// The element type of a `dot`/`convolution` result: declared, or inferred.
    fn contraction_type(&self, l: &ArrayShape, r: &ArrayShape) -> R<PrimitiveType> {
        match self.declared {
            Some(_) => Ok(self.declared_arr()?.element_type),
            None => Ok(higher_precision(l.element_type, r.element_type)),
        }
    }

    fn count(&self, n: usize) -> R<()> {
        if self.ops.len() != n {
            return Err(ShapeError::OperandCount {
                expected: n.to_string(),
                found: self.ops.len(),
            });
        }
        Ok(())
    }

    fn at_least(&self, n: usize) -> R<()> {
        if self.ops.len() < n {
            return Err(ShapeError::OperandCount {
                expected: format!("at least {n}"),
                found: self.ops.len(),
            });
        }
        Ok(())
    }

    fn dims_attr(&self) -> R<&'a Dims> {
        self.instr
            .attrs
            .dimensions
            .as_ref()
            .ok_or(ShapeError::MissingAttribute("dimensions"))
    }

    fn called(&self, role: CallRole, name: &'static str) -> R<&'a Computation> {
        let id = self
            .instr
            .attrs
            .called_with(role)
            .ok_or(ShapeError::MissingComputation(name))?;
        self.comp(id)
    }

    fn comp(&self, id: CompId) -> R<&'a Computation> {
        self.comps
            .get_index(id)
            .map(|(_, c)| c)
            .ok_or_else(|| ShapeError::Invalid(format!("called computation #{id} does not exist")))
    }

    fn same_type(&self, what: &str, expected: PrimitiveType, found: PrimitiveType) -> R<()> {
        if expected != found {
            return Err(ShapeError::ElementType {
                what: what.to_string(),
                expected,
                found,
            });
        }
        Ok(())
    }

    fn infer(&self) -> R<Option<Shape>> {
        use Opcode as O;
        let op = self.instr.opcode;
        if self.instr.async_wrapped.is_some() {
            return Ok(None);
        }
        let s = match op {
            // ---- elementwise -------------------------------------------------
            O::Abs | O::Real | O::Imag => {
                let a = self.unary()?;
                like(self.op(0)?, real_type(a.element_type))
            }
            O::IsFinite => {
                let a = self.unary()?;
                if !a.element_type.is_floating() {
                    return invalid(format!(
                        "is-finite needs a floating-point operand, found {}",
                        a.element_type
                    ));
                }
                like(self.op(0)?, PrimitiveType::Pred)
            }
            O::Convert | O::StochasticConvert => {
                if op == O::StochasticConvert {
                    self.count(2)?;
                } else {
                    self.count(1)?;
                }
                let a = self.arr(0)?;
                let d = self.declared_arr()?;
                array(d.element_type, &a.dims)
            }
            O::BitcastConvert => return self.bitcast_convert().map(Some),
            O::Acos
            | O::Acosh
            | O::Asin
            | O::Asinh
            | O::Atanh
            | O::Cbrt
            | O::Ceil
            | O::Clz
            | O::Copy
            | O::Cos
            | O::Cosh
            | O::Erf
            | O::Exp
            | O::Expm1
            | O::Floor
            | O::Log
            | O::Log1p
            | O::Logistic
            | O::Negate
            | O::Not
            | O::PopulationCount
            | O::ReducePrecision
            | O::RoundNearestAfz
            | O::RoundNearestEven
            | O::Rsqrt
            | O::Sign
            | O::Sin
            | O::Sinh
            | O::Sqrt
            | O::Tan
            | O::Tanh => {
                self.count(1)?;
                let s = self.op(0)?;
                if op == O::Copy {
                    // copy of a tuple is allowed
                    return Ok(Some(s.clone()));
                }
                self.arr(0)?;
                s.clone()
            }
            O::Add
            | O::Subtract
            | O::Multiply
            | O::Divide
            | O::Remainder
            | O::Power
            | O::Atan2
            | O::Maximum
            | O::Minimum
            | O::And
            | O::Or
            | O::Xor
            | O::ShiftLeft
            | O::ShiftRightArithmetic
            | O::ShiftRightLogical => {
                let (a, _) = self.binary()?;
                like(self.op(0)?, a.element_type)
            }
            O::Complex => {
                let (a, _) = self.binary()?;
                let t = complex_type(a.element_type).ok_or_else(|| {
                    ShapeError::Invalid(format!(
                        "complex needs f32 or f64 operands, found {}",
                        a.element_type
                    ))
                })?;
                like(self.op(0)?, t)
            }
            O::Compare => {
                self.binary()?;
                like(self.op(0)?, PrimitiveType::Pred)
            }
            O::Select => {
                self.count(3)?;
                let p = self.arr(0)?;
                let t = self.op(1)?;
                let f = self.op(2)?;
                self.same_type("select predicate", PrimitiveType::Pred, p.element_type)?;
                if !same(t, f) {
                    return Err(ShapeError::OperandDims {
                        lhs: shape_text(t),
                        rhs: shape_text(f),
                    });
                }
                let ta = self.arr(1)?;
                if !p.dims.is_empty() && p.dims != ta.dims {
                    return Err(ShapeError::OperandDims {
                        lhs: shape_text(self.op(0)?),
                        rhs: shape_text(t),
                    });
                }
                // XLA copies the layout of a full-rank predicate.
                if p.dims.is_empty() {
                    t.clone()
                } else {
                    like(self.op(0)?, ta.element_type)
                }
            }
            O::Clamp => {
                self.count(3)?;
                let lo = self.arr(0)?;
                let x = self.arr(1)?;
                let hi = self.arr(2)?;
                for (k, b) in [(0usize, lo), (2, hi)] {
                    self.same_type("clamp bound", x.element_type, b.element_type)?;
                    if !b.dims.is_empty() && b.dims != x.dims {
                        return Err(ShapeError::OperandDims {
                            lhs: shape_text(self.op(k)?),
                            rhs: shape_text(self.op(1)?),
                        });
                    }
                }
                self.op(1)?.clone()
            }

            // ---- data movement ----------------------------------------------
            O::Broadcast => return self.broadcast().map(Some),
            O::Reshape => {
                self.count(1)?;
                let a = self.arr(0)?;
                let d = self.declared_arr()?;
                if a.element_count() != d.element_count() {
                    return Err(ShapeError::ReshapeElementCount {
                        operand: a.element_count(),
                        result: d.element_count(),
                    });
                }
                array(a.element_type, &d.dims)
            }
            O::DynamicReshape => {
                self.at_least(1)?;
                let a = self.arr(0)?;
                let d = self.declared_arr()?;
                array(a.element_type, &d.dims)
            }
            O::Transpose => {
                self.count(1)?;
                let a = self.arr(0)?;
                let p = self.dims_attr()?;
                if p.len() != a.rank() || check_unique("transpose", p, a.rank()).is_err() {
                    return Err(ShapeError::NotPermutation {
                        what: "transpose",
                        dims: p.to_vec(),
                        rank: a.rank(),
                    });
                }
                let dims: Dims = p.iter().map(|&i| a.dims[i as usize]).collect();
                array(a.element_type, &dims)
            }
            O::Reverse => {
                self.count(1)?;
                let a = self.arr(0)?;
                check_unique("reverse", self.dims_attr()?, a.rank())?;
                self.op(0)?.clone()
            }
            O::Slice => return self.slice().map(Some),
            O::DynamicSlice => return self.dynamic_slice().map(Some),
            O::DynamicUpdateSlice => return self.dynamic_update_slice().map(Some),
            O::Pad => return self.pad().map(Some),
            O::Concatenate => return self.concatenate().map(Some),
            O::Gather => return self.gather().map(Some),
            O::Scatter => return self.scatter().map(Some),
            O::Iota => {
                self.count(0)?;
                let d = self.declared_arr()?;
                let dim = self
                    .instr
                    .attrs
                    .iota_dimension
                    .ok_or(ShapeError::MissingAttribute("iota_dimension"))?;
                check_dim("iota_dimension", dim, d.rank())?;
                array(d.element_type, &d.dims)
            }

            // ---- reductions and windows -------------------------------------
            O::Reduce => return self.reduce().map(Some),
            O::ReduceWindow => return self.reduce_window().map(Some),
            O::SelectAndScatter => return self.select_and_scatter().map(Some),
            O::Map => {
                self.at_least(1)?;
                let a = self.arr(0)?;
                for i in 1..self.ops.len() {
                    let b = self.arr(i)?;
                    if b.dims != a.dims {
                        return Err(ShapeError::OperandDims {
                            lhs: shape_text(self.op(0)?),
                            rhs: shape_text(self.op(i)?),
                        });
                    }
                }
                let f = self.called(CallRole::ToApply, "to_apply")?;
                self.check_params(f, &self.scalar_params()?)?;
                let rs = root_shape(f)?;
                match rs.as_array() {
                    Some(r) if r.rank() == 0 => array(r.element_type, &a.dims),
                    _ => {
                        return Err(ShapeError::Signature {
                            computation: f.name.clone(),
                            message: format!(
                                "a mapped computation must return a scalar, this one returns {}",
                                shape_text(rs)
                            ),
                        })
                    }
                }
            }
            O::Sort => {
                self.at_least(1)?;
                let a = self.arr(0)?;
                let dims = self.dims_attr()?;
                if dims.len() != 1 {
                    return invalid("sort takes exactly one dimension");
                }
                check_dim("sort", dims[0], a.rank())?;
                let mut out = Vec::with_capacity(self.ops.len());
                for i in 0..self.ops.len() {
                    let b = self.arr(i)?;
                    if b.dims != a.dims {
                        return Err(ShapeError::OperandDims {
                            lhs: shape_text(self.op(0)?),
                            rhs: shape_text(self.op(i)?),
                        });
                    }
                    out.push(self.op(i)?.clone());
                }
                let f = self.called(CallRole::ToApply, "to_apply")?;
                let mut params = Vec::new();
                for i in 0..self.ops.len() {
                    let t = self.arr(i)?.element_type;
                    params.push(array(t, &[]));
                    params.push(array(t, &[]));
                }
                self.check_params(f, &params)?;
                self.check_root(f, &array(PrimitiveType::Pred, &[]))?;
                tuple_or_single(out)
            }
            O::TopK => {
                self.count(1)?;
                let a = self.arr(0)?;
                let k = self
                    .instr
                    .attrs
                    .k
                    .ok_or(ShapeError::MissingAttribute("k"))?;
                if a.rank() == 0 {
                    return invalid("topk needs an operand of rank >= 1");
                }
                let mut dims = a.dims.clone();
                let last = dims.len() - 1;
                if k < 0 || k > dims[last] {
                    return invalid(format!(
                        "topk: k={k} exceeds the last dimension {}",
                        dims[last]
                    ));
                }
                dims[last] = k;
                Shape::Tuple(vec![
                    array(a.element_type, &dims),
                    array(PrimitiveType::S32, &dims),
                ])
            }

            // ---- contractions -----------------------------------------------
            O::Dot => return self.dot().map(Some),
            O::Convolution => return self.convolution().map(Some),
            O::RaggedDot | O::ScaledDot => return Ok(None),
            O::Fft => return self.fft().map(Some),
            O::TriangularSolve => {
                self.count(2)?;
                let a = self.arr(0)?;
                let b = self.arr(1)?;
                self.same_type("triangular-solve b", a.element_type, b.element_type)?;
                if a.rank() < 2 || a.rank() != b.rank() {
                    return invalid("triangular-solve: a and b must have the same rank >= 2");
                }
                array(b.element_type, &b.dims)
            }
            O::Cholesky => {
                self.count(1)?;
                let a = self.arr(0)?;
                if a.rank() < 2 {
                    return invalid("cholesky needs rank >= 2");
                }
                array(a.element_type, &a.dims)
            }
            O::BatchNormTraining | O::BatchNormInference | O::BatchNormGrad => {
                return self.batch_norm().map(Some)
            }

            // ---- tuples and control flow ------------------------------------
            O::Tuple => Shape::Tuple(self.ops.iter().map(|s| (*s).clone()).collect()),
            O::GetTupleElement => {
                self.count(1)?;
                let t = self.op(0)?;
                let elems = match t {
                    Shape::Tuple(v) => v,
                    _ => {
                        return Err(ShapeError::NotTuple {
                            operand: 0,
                            shape: shape_text(t),
                        })
                    }
                };
                let index = self
                    .instr
                    .attrs
                    .tuple_index
                    .ok_or(ShapeError::MissingAttribute("index"))?;
                match usize::try_from(index).ok().and_then(|i| elems.get(i)) {
                    Some(s) => s.clone(),
                    None => {
                        return Err(ShapeError::TupleIndex {
                            index,
                            len: elems.len(),
                        })
                    }
                }
            }
            O::Call => {
                let f = self.called(CallRole::ToApply, "to_apply")?;
                self.check_params(f, &self.owned_ops())?;
                root_shape(f)?.clone()
            }
            O::Fusion => {
                let f = self.called(CallRole::Calls, "calls")?;
                self.check_params(f, &self.owned_ops())?;
                root_shape(f)?.clone()
            }
            O::While => {
                self.count(1)?;
                let s = self.op(0)?;
                let body = self.called(CallRole::Body, "body")?;
                let cond = self.called(CallRole::Condition, "condition")?;
                self.check_params(body, std::slice::from_ref(s))?;
                self.check_params(cond, std::slice::from_ref(s))?;
                self.check_root(body, s)?;
                self.check_root(cond, &array(PrimitiveType::Pred, &[]))?;
                s.clone()
            }
            O::Conditional => return self.conditional().map(Some),
            O::OptimizationBarrier | O::Domain => {
                self.count(1)?;
                self.op(0)?.clone()
            }
            O::AddDependency => {
                self.count(2)?;
                self.op(0)?.clone()
            }
            O::AfterAll => array(PrimitiveType::Token, &[]),
            O::Parameter | O::Constant => {
                self.count(0)?;
                return Ok(None);
            }
            O::GetDimensionSize => {
                self.count(1)?;
                let a = self.arr(0)?;
                let d = self.dims_attr()?;
                if d.len() != 1 {
                    return invalid("get-dimension-size takes one dimension");
                }
                check_dim("get-dimension-size", d[0], a.rank())?;
                array(PrimitiveType::S32, &[])
            }
            O::SetDimensionSize => {
                self.count(2)?;
                let a = self.arr(0)?;
                let d = self.dims_attr()?;
                if d.len() != 1 {
                    return invalid("set-dimension-size takes one dimension");
                }
                check_dim("set-dimension-size", d[0], a.rank())?;
                array(a.element_type, &a.dims)
            }
            O::ReplicaId | O::PartitionId => {
                self.count(0)?;
                array(PrimitiveType::U32, &[])
            }
            O::RngGetAndUpdateState => {
                self.count(0)?;
                array(PrimitiveType::U64, &[2])
            }

            // ---- collectives ------------------------------------------------
            O::AllReduce | O::CollectiveBroadcast => {
                self.at_least(1)?;
                tuple_or_single(self.owned_ops())
            }
            O::AllReduceStart => {
                self.at_least(1)?;
                let ops = self.owned_ops();
                // Older dumps wrap the result in a tuple; accept both forms.
                if let Shape::Tuple(v) = self.declared()? {
                    if ops.len() == 1 && v.len() == 1 {
                        return Ok(Some(Shape::Tuple(ops)));
                    }
                }
                tuple_or_single(ops)
            }
            O::AllToAll => {
                self.at_least(1)?;
                if self.ops.len() == 1 && self.instr.attrs.dimensions.is_none() {
                    // A single-operand all-to-all without split dimension is a tuple op.
                    if self.declared()?.is_tuple() {
                        return Ok(Some(Shape::Tuple(self.owned_ops())));
                    }
                }
                tuple_or_single(self.owned_ops())
            }
            O::CollectivePermute => {
                self.at_least(1)?;
                if self.ops.len() == 1 {
                    self.op(0)?.clone()
                } else {
                    // combined / in-place forms: declared
                    return Ok(None);
                }
            }
            O::AllGather | O::ReduceScatter => {
                self.at_least(1)?;
                return self.gather_scatter_collective().map(|_| None);
            }
            O::AllGatherStart
            | O::AllGatherDone
            | O::AllReduceDone
            | O::CollectivePermuteStart
            | O::CollectivePermuteDone
            | O::RaggedAllToAll
            | O::AsyncStart
            | O::AsyncUpdate
            | O::AsyncDone
            | O::CopyStart
            | O::CopyDone
            | O::Send
            | O::SendDone
            | O::Recv
            | O::RecvDone
            | O::Infeed
            | O::Outfeed
            | O::CustomCall
            | O::Bitcast
            | O::Rng
            | O::RngBitGenerator
            | O::Scan => return Ok(None),
        };
        Ok(Some(s))
    }

    fn owned_ops(&self) -> Vec<Shape> {
        self.ops.iter().map(|s| (*s).clone()).collect()
    }

    fn scalar_params(&self) -> R<Vec<Shape>> {
        (0..self.ops.len())
            .map(|i| Ok(array(self.arr(i)?.element_type, &[])))
            .collect()
    }

    /// The called computation's parameters must match `expected` (layouts ignored).
    fn check_params(&self, f: &Computation, expected: &[Shape]) -> R<()> {
        if f.params.len() != expected.len() {
            return Err(ShapeError::Signature {
                computation: f.name.clone(),
                message: format!(
                    "takes {} parameters, the caller passes {}",
                    f.params.len(),
                    expected.len()
                ),
            });
        }
        for (i, (&p, e)) in f.params.iter().zip(expected).enumerate() {
            let ps = &f.instr(p).shape;
            if !same(ps, e) {
                return Err(ShapeError::Signature {
                    computation: f.name.clone(),
                    message: format!(
                        "parameter {i} has shape {}, the caller passes {}",
                        shape_text(ps),
                        shape_text(e)
                    ),
                });
            }
        }
        Ok(())
    }

    fn check_root(&self, f: &Computation, expected: &Shape) -> R<()> {
        let rs = root_shape(f)?;
        if !same(rs, expected) {
            return Err(ShapeError::Signature {
                computation: f.name.clone(),
                message: format!(
                    "root has shape {}, expected {}",
                    shape_text(rs),
                    shape_text(expected)
                ),
            });
        }
        Ok(())
    }

    fn unary(&self) -> R<&'a ArrayShape> {
        self.count(1)?;
        self.arr(0)
    }

    fn binary(&self) -> R<(&'a ArrayShape, &'a ArrayShape)> {
        self.count(2)?;
        let a = self.arr(0)?;
        let b = self.arr(1)?;
        if a.dims != b.dims {
            return Err(ShapeError::OperandDims {
                lhs: shape_text(self.op(0)?),
                rhs: shape_text(self.op(1)?),
            });
        }
        self.same_type("operand 1", a.element_type, b.element_type)?;
        Ok((a, b))
    }

    fn bitcast_convert(&self) -> R<Shape> {
        self.count(1)?;
        let a = self.arr(0)?;
        let d = self.declared_arr()?;
        let (wi, wo) = (a.element_type.bit_width(), d.element_type.bit_width());
        if wi == wo {
            return Ok(array(d.element_type, &a.dims));
        }
        if wo == 0 || wi == 0 {
            return invalid("bitcast-convert between types without a bit width");
        }
        if wi > wo {
            if wi % wo != 0 {
                return invalid(format!("bitcast-convert from {wi} to {wo} bits"));
            }
            let mut dims = a.dims.clone();
            dims.push((wi / wo) as i64);
            Ok(array(d.element_type, &dims))
        } else {
            if wo % wi != 0 {
                return invalid(format!("bitcast-convert from {wi} to {wo} bits"));
            }
            let ratio = (wo / wi) as i64;
            match a.dims.last() {
                Some(&l) if l == ratio => Ok(array(d.element_type, &a.dims[..a.dims.len() - 1])),
                _ => invalid(format!(
                    "bitcast-convert to a {wo}-bit type needs a minor dimension of size {ratio}"
                )),
            }
        }
    }

    fn broadcast(&self) -> R<Shape> {
        self.count(1)?;
        let a = self.arr(0)?;
        let d = self.declared_arr()?;
        let empty = Dims::new();
        let bd = match &self.instr.attrs.dimensions {
            Some(v) => v,
            None if a.rank() == 0 => &empty,
            None => return Err(ShapeError::MissingAttribute("dimensions")),
        };
        if bd.len() != a.rank() {
            return Err(ShapeError::BroadcastRank {
                dims: bd.len(),
                rank: a.rank(),
            });
        }
        for (i, &od) in bd.iter().enumerate() {
            let o = check_dim("broadcast", od, d.rank())?;
            if d.dims[o] != a.dims[i] {
                return Err(ShapeError::BroadcastDim {
                    operand_dim: i,
                    operand_size: a.dims[i],
                    result_dim: od,
                    result_size: d.dims[o],
                });
            }
        }
        check_unique("broadcast", bd, d.rank())?;
        Ok(array(a.element_type, &d.dims))
    }

    fn slice(&self) -> R<Shape> {
        self.count(1)?;
        let a = self.arr(0)?;
        let sl = per_dimension(self.instr.attrs.slice.as_deref(), "slice", a.rank())?;
        let mut dims = Dims::new();
        for (i, s) in sl.iter().enumerate() {
            let size = a.dims[i];
            if s.start < 0 || s.limit < s.start || s.limit > size || s.stride < 1 {
                return Err(ShapeError::SliceBounds {
                    dim: i,
                    start: s.start,
                    limit: s.limit,
                    stride: s.stride,
                    size,
                });
            }
            dims.push((s.limit - s.start + s.stride - 1) / s.stride);
        }
        Ok(array(a.element_type, &dims))
    }

    fn check_indices(&self, first: usize, rank: usize, what: &str) -> R<()> {
        let n = self.ops.len() - first;
        if n == 1 && rank != 1 {
            // legacy form: one index vector
            let v = self.arr(first)?;
            if v.rank() != 1 || v.dims[0] != rank as i64 {
                return invalid(format!(
                    "{what}: the index vector must be rank 1 with {rank} elements"
                ));
            }
            return Ok(());
        }
        if n != rank {
            return Err(ShapeError::OperandCount {
                expected: format!("{} ({} indices)", first + rank, rank),
                found: self.ops.len(),
            });
        }
        for i in first..self.ops.len() {
            let x = self.arr(i)?;
            if !x.element_type.is_integral() || (x.rank() != 0 && !(n == 1 && x.rank() == 1)) {
                return invalid(format!(
                    "{what}: index operand {i} must be an integer scalar, found {}",
                    shape_text(self.op(i)?)
                ));
            }
        }
        Ok(())
    }

    fn dynamic_slice(&self) -> R<Shape> {
        self.at_least(2)?;
        let a = self.arr(0)?;
        self.check_indices(1, a.rank(), "dynamic-slice")?;
        let sizes = self
            .instr
            .attrs
            .dynamic_slice_sizes
            .as_ref()
            .ok_or(ShapeError::MissingAttribute("dynamic_slice_sizes"))?;
        if sizes.len() != a.rank() {
            return invalid(format!(
                "dynamic_slice_sizes has {} entries, operand has rank {}",
                sizes.len(),
                a.rank()
            ));
        }
        for (i, (&s, &d)) in sizes.iter().zip(a.dims.iter()).enumerate() {
            if s < 0 || s > d {
                return invalid(format!(
                    "dynamic-slice size {s} of dimension {i} exceeds the operand size {d}"
                ));
            }
        }
        Ok(array(a.element_type, sizes))
    }

    fn dynamic_update_slice(&self) -> R<Shape> {
        self.at_least(3)?;
        let a = self.arr(0)?;
        let u = self.arr(1)?;
        self.same_type(
            "dynamic-update-slice update",
            a.element_type,
            u.element_type,
        )?;
        if u.rank() != a.rank() {
            return invalid(format!(
                "update rank {} differs from operand rank {}",
                u.rank(),
                a.rank()
            ));
        }
        for (i, (&x, &y)) in u.dims.iter().zip(a.dims.iter()).enumerate() {
            if x > y {
                return invalid(format!(
                    "update dimension {i} (size {x}) exceeds the operand size {y}"
                ));
            }
        }
        self.check_indices(2, a.rank(), "dynamic-update-slice")?;
        Ok(array(a.element_type, &a.dims))
    }

    fn pad(&self) -> R<Shape> {
        self.count(2)?;
        let a = self.arr(0)?;
        let v = self.arr(1)?;
        self.same_type("pad value", a.element_type, v.element_type)?;
        if v.rank() != 0 {
            return invalid("the padding value must be a scalar");
        }
        let p = per_dimension(self.instr.attrs.padding.as_deref(), "padding", a.rank())?;
        let mut dims = Dims::new();
        for (i, (pd, &d)) in p.iter().zip(a.dims.iter()).enumerate() {
            if pd.interior < 0 {
                return invalid(format!("negative interior padding in dimension {i}"));
            }
            let n = (d - 1)
                .max(0)
                .checked_mul(pd.interior)
                .and_then(|x| x.checked_add(d))
                .and_then(|x| x.checked_add(pd.low))
                .and_then(|x| x.checked_add(pd.high))
                .ok_or_else(|| ShapeError::Invalid("padding arithmetic overflows".into()))?;
            if n < 0 {
                return invalid(format!("padding makes dimension {i} negative"));
            }
            dims.push(n);
        }
        Ok(array(a.element_type, &dims))
    }

    fn concatenate(&self) -> R<Shape> {
        self.at_least(1)?;
        let d = self.dims_attr()?;
        if d.len() != 1 {
            return invalid("concatenate takes exactly one dimension");
        }
        let a = self.arr(0)?;
        let cd = check_dim("concatenate", d[0], a.rank())?;
        let mut dims = a.dims.clone();
        for i in 1..self.ops.len() {
            let b = self.arr(i)?;
            self.same_type("concatenate operand", a.element_type, b.element_type)?;
            if b.rank() != a.rank()
                || b.dims
                    .iter()
                    .zip(a.dims.iter())
                    .enumerate()
                    .any(|(k, (x, y))| k != cd && x != y)
            {
                return Err(ShapeError::OperandDims {
                    lhs: shape_text(self.op(0)?),
                    rhs: shape_text(self.op(i)?),
                });
            }
            dims[cd] = dims[cd]
                .checked_add(b.dims[cd])
                .ok_or_else(|| ShapeError::Invalid("concatenated dimension overflows".into()))?;
        }
        Ok(array(a.element_type, &dims))
    }

    fn gather(&self) -> R<Shape> {
        self.count(2)?;
        let a = self.arr(0)?;
        let idx = self.arr(1)?;
        if !idx.element_type.is_integral() {
            return invalid("gather indices must be integers");
        }
        let g = self
            .instr
            .attrs
            .gather
            .as_deref()
            .ok_or(ShapeError::MissingAttribute("offset_dims"))?;
        let ivd = g.index_vector_dim;
        if ivd < 0 || ivd as usize > idx.rank() {
            return Err(ShapeError::DimensionOutOfRange {
                what: "gather index_vector_dim",
                dim: ivd,
                rank: idx.rank() + 1,
            });
        }
        let ivd = ivd as usize;
        let index_len = if ivd == idx.rank() { 1 } else { idx.dims[ivd] };
        if g.start_index_map.len() as i64 != index_len {
            return invalid(format!(
                "gather: start_index_map has {} entries, the index vector has {index_len}",
                g.start_index_map.len()
            ));
        }
        if g.slice_sizes.len() != a.rank() {
            return invalid(format!(
                "gather: slice_sizes has {} entries, operand has rank {}",
                g.slice_sizes.len(),
                a.rank()
            ));
        }
        for (i, (&s, &d)) in g.slice_sizes.iter().zip(a.dims.iter()).enumerate() {
            if s < 0 || s > d {
                return invalid(format!(
                    "gather: slice size {s} of dimension {i} exceeds the operand size {d}"
                ));
            }
        }
        check_unique(
            "gather collapsed_slice_dims",
            &g.collapsed_slice_dims,
            a.rank(),
        )?;
        check_unique(
            "gather operand_batching_dims",
            &g.operand_batching_dims,
            a.rank(),
        )?;
        check_unique("gather start_index_map", &g.start_index_map, a.rank())?;
        for &c in g
            .collapsed_slice_dims
            .iter()
            .chain(g.operand_batching_dims.iter())
        {
            if g.slice_sizes[c as usize] > 1 {
                return invalid(format!(
                    "gather: collapsed dimension {c} must have slice size 0 or 1"
                ));
            }
        }
        let offset_sizes: Dims = g
            .slice_sizes
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                !g.collapsed_slice_dims.contains(&(*i as i64))
                    && !g.operand_batching_dims.contains(&(*i as i64))
            })
            .map(|(_, &s)| s)
            .collect();
        if offset_sizes.len() != g.offset_dims.len() {
            return invalid(format!(
                "gather: {} offset_dims for {} uncollapsed slice dimensions",
                g.offset_dims.len(),
                offset_sizes.len()
            ));
        }
        let batch: Dims = idx
            .dims
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != ivd)
            .map(|(_, &d)| d)
            .collect();
        let rank = batch.len() + offset_sizes.len();
        check_unique("gather offset_dims", &g.offset_dims, rank)?;
        let (mut bi, mut oi) = (0, 0);
        let mut dims = Dims::new();
        for i in 0..rank {
            if g.offset_dims.contains(&(i as i64)) {
                dims.push(offset_sizes[oi]);
                oi += 1;
            } else {
                dims.push(*batch.get(bi).ok_or_else(|| {
                    ShapeError::Invalid("gather: offset_dims inconsistent".into())
                })?);
                bi += 1;
            }
        }
        Ok(array(a.element_type, &dims))
    }

    fn scatter(&self) -> R<Shape> {
        self.at_least(3)?;
        if self.ops.len() % 2 != 1 {
            return Err(ShapeError::OperandCount {
                expected: "an odd number (N operands, indices, N updates)".into(),
                found: self.ops.len(),
            });
        }
        let n = self.ops.len() / 2;
        let sd = self
            .instr
            .attrs
            .scatter
            .as_deref()
            .ok_or(ShapeError::MissingAttribute("update_window_dims"))?;
        let idx = self.arr(n)?;
        if !idx.element_type.is_integral() {
            return invalid("scatter indices must be integers");
        }
        let ivd = sd.index_vector_dim;
        if ivd < 0 || ivd as usize > idx.rank() {
            return Err(ShapeError::DimensionOutOfRange {
                what: "scatter index_vector_dim",
                dim: ivd,
                rank: idx.rank() + 1,
            });
        }
        let batch_rank = if (ivd as usize) < idx.rank() {
            idx.rank() - 1
        } else {
            idx.rank()
        };
        let a0 = self.arr(0)?;
        let mut out = Vec::with_capacity(n);
        let mut params = Vec::with_capacity(2 * n);
        for i in 0..n {
            let a = self.arr(i)?;
            let u = self.arr(n + 1 + i)?;
            if a.dims != a0.dims {
                return Err(ShapeError::OperandDims {
                    lhs: shape_text(self.op(0)?),
                    rhs: shape_text(self.op(i)?),
                });
            }
            self.same_type("scatter update", a.element_type, u.element_type)?;
            if u.rank() != sd.update_window_dims.len() + batch_rank {
                return invalid(format!(
                    "scatter: updates of rank {} need {} window and {batch_rank} scatter dimensions",
                    u.rank(),
                    sd.update_window_dims.len()
                ));
            }
            check_unique(
                "scatter update_window_dims",
                &sd.update_window_dims,
                u.rank(),
            )?;
            out.push(array(a.element_type, &a.dims));
        }
        for i in 0..n {
            params.push(array(self.arr(i)?.element_type, &[]));
        }
        for i in 0..n {
            params.push(array(self.arr(n + 1 + i)?.element_type, &[]));
        }
        let f = self.called(CallRole::ToApply, "to_apply")?;
        self.check_params(f, &params)?;
        Ok(tuple_or_single(out))
    }

    fn reduce(&self) -> R<Shape> {
        self.at_least(2)?;
        if !self.ops.len().is_multiple_of(2) {
            return Err(ShapeError::OperandCount {
                expected: "an even number (N inputs, N init values)".into(),
                found: self.ops.len(),
            });
        }
        let n = self.ops.len() / 2;
        let dims = self.dims_attr()?;
        let a0 = self.arr(0)?;
        check_unique("reduce", dims, a0.rank())?;
        let kept: Dims = a0
            .dims
            .iter()
            .enumerate()
            .filter(|(i, _)| !dims.contains(&(*i as i64)))
            .map(|(_, &d)| d)
            .collect();
        self.reduce_outputs(n, &a0.dims, &kept, "reduce")
    }

    /// A reducer of N values takes 2N scalars (accumulators, then inputs) and returns
    /// N scalars with the init value types.
    fn check_reducer(&self, f: &Computation, n: usize) -> R<()> {
        let mut acc = Vec::with_capacity(n);
        for i in 0..n {
            acc.push(array(self.arr(n + i)?.element_type, &[]));
        }
        let mut params = acc.clone();
        for i in 0..n {
            params.push(array(self.arr(i)?.element_type, &[]));
        }
        if f.params.len() != 2 * n {
            return Err(ShapeError::Signature {
                computation: f.name.clone(),
                message: format!("takes {} parameters, expected {}", f.params.len(), 2 * n),
            });
        }
        // XLA allows the input element type to differ from the accumulator type; only
        // the accumulator parameters and the root are checked.
        self.check_params_prefix(f, &acc)?;
        self.check_root(f, &tuple_or_single(acc))
    }

    fn check_params_prefix(&self, f: &Computation, expected: &[Shape]) -> R<()> {
        for (i, (&p, e)) in f.params.iter().zip(expected).enumerate() {
            let ps = &f.instr(p).shape;
            if !same(ps, e) {
                return Err(ShapeError::Signature {
                    computation: f.name.clone(),
                    message: format!(
                        "parameter {i} has shape {}, expected {}",
                        shape_text(ps),
                        shape_text(e)
                    ),
                });
            }
        }
        Ok(())
    }

    fn window(&self) -> R<Window> {
        Ok(self
            .instr
            .attrs
            .window
            .as_deref()
            .cloned()
            .unwrap_or_default())
    }

    fn reduce_window(&self) -> R<Shape> {
        self.at_least(2)?;
        if !self.ops.len().is_multiple_of(2) {
            return Err(ShapeError::OperandCount {
                expected: "an even number (N inputs, N init values)".into(),
                found: self.ops.len(),
            });
        }
        let n = self.ops.len() / 2;
        let a0 = self.arr(0)?;
        let w = self.window()?;
        let dims = if w.dims.is_empty() && a0.rank() > 0 {
            return Err(ShapeError::MissingAttribute("window"));
        } else {
            windowed_dims(&a0.dims, &w)?
        };
        self.reduce_outputs(n, &a0.dims, &dims, "reduce-window")
    }

    /// Result of a variadic reduce / reduce-window: N inputs of one shape, N scalar
    /// inits, a reducer of N values; one output of `out_dims` per init type.
    fn reduce_outputs(
        &self,
        n: usize,
        in_dims: &[i64],
        out_dims: &[i64],
        what: &str,
    ) -> Result<Shape, ShapeError> {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let a = self.arr(i)?;
            let init = self.arr(n + i)?;
            if a.dims.as_slice() != in_dims {
                return Err(ShapeError::OperandDims {
                    lhs: shape_text(self.op(0)?),
                    rhs: shape_text(self.op(i)?),
                });
            }
            if init.rank() != 0 {
                return invalid(format!("{what} init value {i} must be a scalar"));
            }
            out.push(array(init.element_type, out_dims));
        }
        let f = self.called(CallRole::ToApply, "to_apply")?;
        self.check_reducer(f, n)?;
        Ok(tuple_or_single(out))
    }

    fn select_and_scatter(&self) -> R<Shape> {
        self.count(3)?;
        let a = self.arr(0)?;
        let src = self.arr(1)?;
        let init = self.arr(2)?;
        let w = self.window()?;
        let dims = windowed_dims(&a.dims, &w)?;
        if dims != src.dims {
            return invalid(format!(
                "select-and-scatter: source shape {} differs from the windowed operand shape {}",
                shape_text(self.op(1)?),
                shape_text(&array(src.element_type, &dims))
            ));
        }
        if init.rank() != 0 {
            return invalid("select-and-scatter init value must be a scalar");
        }
        self.same_type(
            "select-and-scatter source",
            src.element_type,
            init.element_type,
        )?;
        let sel = self.called(CallRole::Select, "select")?;
        let et = array(a.element_type, &[]);
        self.check_params(sel, &[et.clone(), et])?;
        self.check_root(sel, &array(PrimitiveType::Pred, &[]))?;
        let sc = self.called(CallRole::Scatter, "scatter")?;
        let st = array(src.element_type, &[]);
        self.check_params(sc, &[st.clone(), st])?;
        Ok(array(a.element_type, &a.dims))
    }

    fn dot(&self) -> R<Shape> {
        self.count(2)?;
        let l = self.arr(0)?;
        let r = self.arr(1)?;
        let et = self.contraction_type(l, r)?;
        let empty = Default::default();
        let dd = self.instr.attrs.dot_dims.as_deref().unwrap_or(&empty);
        if dd.lhs_batch.len() != dd.rhs_batch.len() {
            return Err(ShapeError::DotDims(format!(
                "{} lhs batch dimensions but {} rhs batch dimensions",
                dd.lhs_batch.len(),
                dd.rhs_batch.len()
            )));
        }
        if dd.lhs_contracting.len() != dd.rhs_contracting.len() {
            return Err(ShapeError::DotDims(format!(
                "{} lhs contracting dimensions but {} rhs contracting dimensions",
                dd.lhs_contracting.len(),
                dd.rhs_contracting.len()
            )));
        }
        let mut lused: Vec<i64> = dd.lhs_batch.to_vec();
        lused.extend_from_slice(&dd.lhs_contracting);
        let mut rused: Vec<i64> = dd.rhs_batch.to_vec();
        rused.extend_from_slice(&dd.rhs_contracting);
        check_unique("dot lhs", &lused, l.rank())?;
        check_unique("dot rhs", &rused, r.rank())?;
        for (&a, &b) in dd.lhs_contracting.iter().zip(dd.rhs_contracting.iter()) {
            let (x, y) = (l.dims[a as usize], r.dims[b as usize]);
            if x != y {
                return Err(ShapeError::DotContracting {
                    lhs_dim: a,
                    lhs_size: x,
                    rhs_dim: b,
                    rhs_size: y,
                });
            }
        }
        let mut dims = Dims::new();
        for (&a, &b) in dd.lhs_batch.iter().zip(dd.rhs_batch.iter()) {
            let (x, y) = (l.dims[a as usize], r.dims[b as usize]);
            if x != y {
                return Err(ShapeError::DotBatch {
                    lhs_dim: a,
                    lhs_size: x,
                    rhs_dim: b,
                    rhs_size: y,
                });
            }
            dims.push(x);
        }
        for (i, &x) in l.dims.iter().enumerate() {
            if !lused.contains(&(i as i64)) {
                dims.push(x);
            }
        }
        for (i, &x) in r.dims.iter().enumerate() {
            if !rused.contains(&(i as i64)) {
                dims.push(x);
            }
        }
        Ok(array(et, &dims))
    }

    fn convolution(&self) -> R<Shape> {
        self.count(2)?;
        let l = self.arr(0)?;
        let k = self.arr(1)?;
        let et = self.contraction_type(l, k)?;
        let cd = self
            .instr
            .attrs
            .conv_dims
            .as_deref()
            .ok_or(ShapeError::MissingAttribute("dim_labels"))?;
        let nsp = cd.input_spatial.len();
        if cd.kernel_spatial.len() != nsp || cd.output_spatial.len() != nsp {
            return Err(ShapeError::Conv(
                "dim_labels have different spatial ranks".into(),
            ));
        }
        if l.rank() != nsp + 2 || k.rank() != nsp + 2 {
            return Err(ShapeError::Conv(format!(
                "dim_labels describe rank {} but lhs has rank {} and rhs rank {}",
                nsp + 2,
                l.rank(),
                k.rank()
            )));
        }
        let mut lused: Vec<i64> = vec![cd.input_batch, cd.input_feature];
        lused.extend_from_slice(&cd.input_spatial);
        check_unique("convolution input dim_labels", &lused, l.rank())?;
        let mut kused: Vec<i64> = vec![cd.kernel_input_feature, cd.kernel_output_feature];
        kused.extend_from_slice(&cd.kernel_spatial);
        check_unique("convolution kernel dim_labels", &kused, k.rank())?;
        let mut oused: Vec<i64> = vec![cd.output_batch, cd.output_feature];
        oused.extend_from_slice(&cd.output_spatial);
        check_unique("convolution output dim_labels", &oused, nsp + 2)?;
        let fgc = self.instr.attrs.feature_group_count.unwrap_or(1);
        let bgc = self.instr.attrs.batch_group_count.unwrap_or(1);
        if fgc < 1 || bgc < 1 {
            return Err(ShapeError::Conv("group counts must be positive".into()));
        }
        if fgc > 1 && bgc > 1 {
            return Err(ShapeError::Conv(
                "feature_group_count and batch_group_count cannot both exceed 1".into(),
            ));
        }
        let batch = l.dims[cd.input_batch as usize];
        let in_f = l.dims[cd.input_feature as usize];
        let k_in = k.dims[cd.kernel_input_feature as usize];
        let k_out = k.dims[cd.kernel_output_feature as usize];
        if in_f % fgc != 0 || in_f / fgc != k_in {
            return Err(ShapeError::ConvFeatures {
                input_features: in_f,
                kernel_input_features: k_in,
                feature_group_count: fgc,
            });
        }
        if k_out % fgc != 0 {
            return Err(ShapeError::Conv(format!(
                "kernel output feature size {k_out} is not a multiple of feature_group_count {fgc}"
            )));
        }
        if batch % bgc != 0 {
            return Err(ShapeError::Conv(format!(
                "input batch size {batch} is not a multiple of batch_group_count {bgc}"
            )));
        }
        if k_out % bgc != 0 {
            return Err(ShapeError::Conv(format!(
                "kernel output feature size {k_out} is not a multiple of batch_group_count {bgc}"
            )));
        }
        let w = self.window()?;
        if w.dims.len() != nsp {
            return Err(ShapeError::Window(format!(
                "window has {} dimensions, the convolution has {nsp} spatial dimensions",
                w.dims.len()
            )));
        }
        let mut dims: Dims = SmallVec::from_elem(0, nsp + 2);
        dims[cd.output_batch as usize] = batch / bgc;
        dims[cd.output_feature as usize] = k_out;
        for i in 0..nsp {
            let ks = k.dims[cd.kernel_spatial[i] as usize];
            if w.dims[i].size != ks {
                return Err(ShapeError::Window(format!(
                    "window size {} of spatial dimension {i} differs from the kernel size {ks}",
                    w.dims[i].size
                )));
            }
            let input = l.dims[cd.input_spatial[i] as usize];
            dims[cd.output_spatial[i] as usize] = window_output_size(input, &w.dims[i])?;
        }
        Ok(array(et, &dims))
    }

    fn fft(&self) -> R<Shape> {
        self.count(1)?;
        let a = self.arr(0)?;
        let len = self
            .instr
            .attrs
            .fft_length
            .as_ref()
            .ok_or(ShapeError::MissingAttribute("fft_length"))?;
        let ty = self
            .instr
            .attrs
            .fft_type
            .as_deref()
            .ok_or(ShapeError::MissingAttribute("fft_type"))?;
        if len.is_empty() || len.len() > 3 || len.len() > a.rank() {
            return invalid(format!(
                "fft_length must have 1..3 entries ≤ rank, found {len:?}"
            ));
        }
        let r = a.rank();
        let tail = r - len.len();
        let mut dims = a.dims.clone();
        match ty {
            "FFT" | "IFFT" => {
                if !a.element_type.is_complex() {
                    return invalid(format!("{ty} needs a complex operand"));
                }
                Ok(array(a.element_type, &dims))
            }
            "RFFT" => {
                let t = complex_type(a.element_type).ok_or_else(|| {
                    ShapeError::Invalid("RFFT needs an f32 or f64 operand".into())
                })?;
                if a.dims[tail..] != len[..] {
                    return invalid("RFFT: fft_length differs from the operand's minor dimensions");
                }
                dims[r - 1] = len[len.len() - 1] / 2 + 1;
                Ok(array(t, &dims))
            }
            "IRFFT" => {
                if !a.element_type.is_complex() {
                    return invalid("IRFFT needs a complex operand");
                }
                dims[r - 1] = len[len.len() - 1];
                Ok(array(real_type(a.element_type), &dims))
            }
            _ => invalid(format!("unknown fft_type '{ty}'")),
        }
    }

    fn batch_norm(&self) -> R<Shape> {
        let op = self.instr.opcode;
        let n = match op {
            Opcode::BatchNormTraining => 3,
            _ => 5,
        };
        self.count(n)?;
        let a = self.arr(0)?;
        let fi = self
            .instr
            .attrs
            .feature_index
            .ok_or(ShapeError::MissingAttribute("feature_index"))?;
        let f = check_dim("batch-norm feature_index", fi, a.rank())?;
        let fsize = a.dims[f];
        let feat = array(a.element_type, &[fsize]);
        for i in 1..n {
            let s = self.arr(i)?;
            let want: &[i64] = if op == Opcode::BatchNormGrad && i == 4 {
                &a.dims
            } else {
                &[fsize]
            };
            if s.dims.as_slice() != want {
                return invalid(format!(
                    "batch-norm operand {i} has shape {}, expected dimensions {want:?}",
                    shape_text(self.op(i)?)
                ));
            }
        }
        let whole = array(a.element_type, &a.dims);
        Ok(match op {
            Opcode::BatchNormInference => whole,
            _ => Shape::Tuple(vec![whole, feat.clone(), feat]),
        })
    }

    fn conditional(&self) -> R<Shape> {
        self.at_least(1)?;
        let p = self.arr(0)?;
        let a = &self.instr.attrs;
        let branches: Vec<CompId> = if p.element_type == PrimitiveType::Pred {
            let t = a
                .called_with(CallRole::TrueComputation)
                .ok_or(ShapeError::MissingComputation("true_computation"))?;
            let f = a
                .called_with(CallRole::FalseComputation)
                .ok_or(ShapeError::MissingComputation("false_computation"))?;
            vec![t, f]
        } else {
            a.called
                .iter()
                .filter(|(r, _)| *r == CallRole::BranchComputations)
                .map(|(_, c)| *c)
                .collect()
        };
        // A pred selector may also be written with branch_computations.
        let branches = if branches.is_empty() {
            a.called
                .iter()
                .filter(|(r, _)| *r == CallRole::BranchComputations)
                .map(|(_, c)| *c)
                .collect()
        } else {
            branches
        };
        if p.rank() != 0
            || !(p.element_type == PrimitiveType::Pred || p.element_type == PrimitiveType::S32)
        {
            return invalid(format!(
                "the branch selector must be pred[] or s32[], found {}",
                shape_text(self.op(0)?)
            ));
        }
        if branches.is_empty() {
            return Err(ShapeError::MissingComputation("branch_computations"));
        }
        if self.ops.len() != branches.len() + 1 {
            return Err(ShapeError::OperandCount {
                expected: format!("{} (selector + one per branch)", branches.len() + 1),
                found: self.ops.len(),
            });
        }
        let mut root: Option<&Shape> = None;
        for (i, &b) in branches.iter().enumerate() {
            let c = self.comp(b)?;
            self.check_params(c, std::slice::from_ref(self.op(i + 1)?))?;
            let rs = root_shape(c)?;
            match root {
                None => root = Some(rs),
                Some(r0) => {
                    if !same(r0, rs) {
                        return Err(ShapeError::Signature {
                            computation: c.name.clone(),
                            message: format!(
                                "root shape {} differs from branch 0's {}",
                                shape_text(rs),
                                shape_text(r0)
                            ),
                        });
                    }
                }
            }
        }
        Ok(root.cloned().unwrap_or(Shape::Tuple(vec![])))
    }

    /// all-gather / reduce-scatter: same rank and element type per operand; the
    /// result dims follow from the replica count, which the text does not carry.
    fn gather_scatter_collective(&self) -> R<()> {
        let outs: Vec<&Shape> = match self.declared()? {
            Shape::Tuple(v) if self.ops.len() > 1 => v.iter().collect(),
            s => vec![s],
        };
        if outs.len() != self.ops.len() {
            return Err(ShapeError::OperandCount {
                expected: outs.len().to_string(),
                found: self.ops.len(),
            });
        }
        let dims = self.dims_attr()?;
        for (i, o) in outs.iter().enumerate() {
            let a = self.arr(i)?;
            let oa = o
                .as_array()
                .ok_or_else(|| ShapeError::Invalid("the result must be arrays".into()))?;
            if oa.rank() != a.rank() {
                return invalid(format!(
                    "operand {i} has rank {}, result has rank {}",
                    a.rank(),
                    oa.rank()
                ));
            }
            self.same_type("result", a.element_type, oa.element_type)?;
            if let Some(&d) = dims.first() {
                check_dim(self.instr.opcode.name(), d, a.rank())?;
            }
        }
        Ok(())
    }
}
