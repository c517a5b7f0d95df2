//! Kernel descriptions in plain numbers (independent of the HLO IR).
//!
//! A kernel iterates over an *iteration space*: the output's physical dims
//! (major→minor, indices `0..r`) followed by the reduction dims
//! (`r..r+q`: dot contraction, convolution window, reduced dims). The grid
//! tiles this space; inputs say through [`DimMap`] which iteration dims index
//! each of their physical dims, from which re-fetch counts, broadcast reuse
//! and contraction follow.

use serde::{Deserialize, Serialize};

use super::error::ModelError;
use crate::ir::{Dims, PrimitiveType};

/// Largest supported number of iteration dims (output rank + reduction dims),
/// and largest tensor rank. Evaluation uses fixed stack arrays of this size.
pub const MAX_DIMS: usize = 12;

/// A tensor in its physical layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorDesc {
    /// Physical dims, major→minor (after layout assignment); inline up to rank 4.
    pub dims: Dims,
    /// Element width in bits (1-bit `pred` is stored as 8 bits; `E(n)` wins).
    pub elem_bits: u32,
    /// Element type: with the dims it fixes the TPU tiling of the tensor in HBM
    /// ([`crate::passes::tiling::tpu_tiles`]).
    pub elem: PrimitiveType,
}

impl TensorDesc {
    /// A tensor of `elem_bits`-wide elements of that width's usual type (f32, bf16,
    /// s8, pred, s4, f64): for kernels built from numbers (tests, calibration
    /// microbenchmarks, the layout evaluator's copies). The lowering passes the real
    /// type with [`TensorDesc::typed`].
    pub fn new(dims: impl Into<Dims>, elem_bits: u32) -> Self {
        let elem = match elem_bits {
            0..=1 => PrimitiveType::Pred,
            2 => PrimitiveType::S2,
            3..=4 => PrimitiveType::S4,
            5..=8 => PrimitiveType::S8,
            9..=16 => PrimitiveType::Bf16,
            17..=32 => PrimitiveType::F32,
            _ => PrimitiveType::F64,
        };
        Self::typed(dims, elem, elem_bits)
    }
    /// A tensor of element type `elem` stored at `elem_bits` bits.
    pub fn typed(dims: impl Into<Dims>, elem: PrimitiveType, elem_bits: u32) -> Self {
        Self {
            dims: dims.into(),
            elem_bits,
            elem,
        }
    }
    /// Rank.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
    /// Number of elements (1 for a scalar).
    pub fn elements(&self) -> i64 {
        self.dims.iter().product()
    }
    /// Storage width in bits (pred and sub-byte types below 4 bits → 8).
    pub fn storage_bits(&self) -> u32 {
        storage_bits(self.elem_bits)
    }
    /// Logical bytes (no layout padding).
    pub fn bytes(&self) -> f64 {
        self.elements() as f64 * f64::from(self.storage_bits()) / 8.0
    }
    /// The tensor's physical tiled shape in HBM: its dims padded to the TPU tile of
    /// its type (`T(8,128)` for 32-bit, `T(8,128)(2,1)` for 16-bit, `T(1024)` for a
    /// long rank-1 array, … — [`crate::passes::tiling::tpu_tiles`]), by the one
    /// padded-shape function [`crate::ir::padded_physical_dims`].
    pub fn padded_dims(&self) -> Vec<i64> {
        let m2m = crate::passes::tiling::row_major(self.dims.len());
        let tiles = crate::passes::tiling::tpu_tiles(self.elem, &self.dims, &m2m);
        crate::ir::padded_physical_dims(&self.dims, &m2m, &tiles).to_vec()
    }
    /// Bytes in HBM after tiled-layout padding.
    pub fn padded_bytes(&self) -> f64 {
        self.padded_dims()
            .iter()
            .map(|&x| x as f64)
            .product::<f64>()
            * f64::from(self.storage_bits())
            / 8.0
    }
}

/// Storage width: pred (1 bit) is a byte; 4-bit stays packed.
pub fn storage_bits(bits: u32) -> u32 {
    match bits {
        0..=1 => 8,
        2..=4 => 4,
        b => b,
    }
}

/// How one physical dim of an input is indexed by the iteration space.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum DimMap {
    /// Index equals iteration dim `0` (an output dim or a reduction dim).
    /// A size-1 input dim mapped to a larger iteration dim is a broadcast.
    Iter(usize),
    /// Convolution input spatial dim: index = out·stride + win·dilation − pad.
    /// A tile of `to` outputs and `tw` window taps needs
    /// `(to−1)·stride + (tw−1)·dilation + 1` input rows (clipped to the dim).
    Window {
        /// Output spatial iteration dim.
        out: usize,
        /// Window (kernel spatial) iteration dim.
        win: usize,
        /// Window stride.
        stride: i64,
        /// Window (rhs) dilation.
        dilation: i64,
    },
    /// Not tiled: every tile needs the whole dim (e.g. a gather table).
    Full,
    /// Major part of a dim that a reshape / bitcast merged into iteration
    /// dim `iter` together with more-minor dims of total size `inner`:
    /// index = iteration index ÷ `inner`, so a tile of `t` iterations needs
    /// `⌈t/inner⌉` rows (clipped to the dim). Added for the HLO lowering
    /// (`kernels::lower`), e.g. an `[8,128,768]` operand read as `[1024,768]`.
    Outer {
        /// Iteration dim the merged dim runs along.
        iter: usize,
        /// Product of the more-minor merged dims (≥ 1).
        inner: i64,
    },
}

/// One operand of the kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputDesc {
    /// Physical shape and element width.
    pub tensor: TensorDesc,
    /// One entry per tensor dim (same order as `tensor.dims`).
    pub dims: Vec<DimMap>,
}

impl InputDesc {
    /// Input whose dim `i` is indexed by iteration dim `iter[i]`.
    pub fn mapped(dims: Vec<i64>, elem_bits: u32, iter: &[usize]) -> Self {
        Self {
            tensor: TensorDesc::new(dims, elem_bits),
            dims: iter.iter().map(|&d| DimMap::Iter(d)).collect(),
        }
    }

    /// Whether the block of this input changes when iteration dim `d` moves.
    pub fn depends_on(&self, d: usize) -> bool {
        self.dims
            .iter()
            .zip(&self.tensor.dims)
            .any(|(m, &size)| match *m {
                DimMap::Iter(i) => i == d && size > 1,
                DimMap::Window { out, win, .. } => out == d || win == d,
                DimMap::Full => false,
                DimMap::Outer { iter, .. } => iter == d && size > 1,
            })
    }

    /// Iteration dims this input does not depend on (broadcast / reuse dims).
    pub fn broadcast_dims(&self, n_iter: usize) -> Vec<usize> {
        (0..n_iter).filter(|&d| !self.depends_on(d)).collect()
    }

    /// Reduction iteration dims this input depends on (its contraction dims).
    pub fn contraction_dims(&self, output_rank: usize, n_iter: usize) -> Vec<usize> {
        (output_rank..n_iter)
            .filter(|&d| self.depends_on(d))
            .collect()
    }
}

/// Role of an output dim in an MXU kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MxuRole {
    /// Batch: separate matmuls, no operand reuse between them.
    Batch,
    /// Rows streamed through the array (LHS rows; for convolution the
    /// batch and output spatial dims). The innermost M dim pads to 8.
    M,
    /// Columns of the weight array (output features). The innermost N dim
    /// pads to the MXU width.
    N,
}

/// Numeric mode of the MXU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MxuPrecision {
    /// int8 × int8 → int32 (2× bf16 rate where the target supports it).
    Int8,
    /// bf16 × bf16 → f32 (also f32 at DEFAULT precision: 1 bf16 pass).
    Bf16,
    /// f32 at HIGH precision: 3 bf16 passes.
    F32High,
    /// f32 at HIGHEST precision: 6 bf16 passes.
    F32Highest,
}

impl MxuPrecision {
    /// Number of bf16 passes (int8 counts as 1).
    pub fn passes(self) -> f64 {
        match self {
            MxuPrecision::Int8 | MxuPrecision::Bf16 => 1.0,
            MxuPrecision::F32High => 3.0,
            MxuPrecision::F32Highest => 6.0,
        }
    }
}

/// Matrix-unit mapping of a dot or convolution (implicit GEMM).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MxuSpec {
    /// One role per output dim (same order as `KernelDesc::output.dims`).
    /// Reduction dims of kind `Contraction` form K (innermost pads to the MXU
    /// width); `Window` dims are separate passes (implicit GEMM).
    pub roles: Vec<MxuRole>,
    /// Numeric mode.
    pub precision: MxuPrecision,
}

/// What the kernel mostly does (selects the compute model).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum KernelKind {
    /// Dot / convolution on the MXU (+ fused VPU epilogue).
    Mxu(MxuSpec),
    /// Elementwise / broadcast / fused loop kernel on the VPU.
    Elementwise,
    /// Reduction (reduce, reduce-window without MXU) on the VPU/XLU.
    Reduction,
    /// Pure data movement: copy, transpose, layout change.
    CopyTranspose,
    /// Anything else (gather, scatter, sort, ...): modelled like Elementwise.
    Other,
}

/// Which hardware axis a reduced dim lives on in the reduced operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReduceAxis {
    /// The minor (lane) dim: cross-lane reduction on the XLU (slowest).
    Lanes,
    /// The second-minor (sublane) dim: in-vreg sublane shuffle (cheap).
    Sublanes,
    /// A major dim: plain vreg-wise accumulation.
    Major,
}

/// Kind of a reduction iteration dim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReductionKind {
    /// Dot / convolution feature contraction (the MXU K dimension).
    Contraction,
    /// Convolution window tap (one MXU pass per tap).
    Window,
    /// VPU reduction across the given axis.
    Reduce(ReduceAxis),
}

/// An iteration dim beyond the output dims.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReductionDim {
    /// Extent.
    pub size: i64,
    /// Kind.
    pub kind: ReductionKind,
}

/// Vector-op counts by cost class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct OpCounts {
    /// add, sub, mul, max, min, select, compare, and/or, convert, negate, abs.
    pub cheap: f64,
    /// divide, exp, log, tanh, rsqrt, sqrt, pow, logistic (EUP / multi-op).
    pub medium: f64,
    /// sin, cos, tan, erf, atan2 and other polynomial expansions.
    pub expensive: f64,
}

impl OpCounts {
    /// Counts with only cheap ops.
    pub fn cheap(n: f64) -> Self {
        Self {
            cheap: n,
            ..Self::default()
        }
    }
    /// True when all counts are zero.
    pub fn is_zero(&self) -> bool {
        self.cheap == 0.0 && self.medium == 0.0 && self.expensive == 0.0
    }
}

/// VPU work of the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct VpuWork {
    /// Ops per output element (elementwise body, MXU epilogue such as
    /// bias/ReLU, reduction epilogue).
    pub per_output_element: OpCounts,
    /// Ops per iteration point of a VPU reduction (pre-reduction ops plus the
    /// combiner), i.e. per element of the reduced operand. Ignored for MXU
    /// kernels (their contraction runs on the MXU).
    pub per_reduction_point: OpCounts,
}

/// A fused kernel in plain numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelDesc {
    /// Kernel (fusion) name, for reports.
    pub name: crate::ir::Name,
    /// What the kernel does.
    pub kind: KernelKind,
    /// Output tensor in physical layout; its dims are iteration dims `0..r`.
    pub output: TensorDesc,
    /// Iteration dims `r..r+q` (contraction, window taps, reduced dims).
    /// Loop order: output dims major→minor, then these (reduction innermost).
    pub reduction_dims: Vec<ReductionDim>,
    /// Operands.
    pub inputs: Vec<InputDesc>,
    /// Index into `inputs` of the operand TpuGraphs calls the *kernel*
    /// (convolution filter / dot RHS); `TileConfig::kernel_bounds` index its dims.
    pub kernel_operand: Option<usize>,
    /// VPU work.
    pub vpu: VpuWork,
    /// Total transcendental ops (informational, as XLA cost analysis reports;
    /// their cost comes from the `medium`/`expensive` classes).
    pub transcendentals: f64,
    /// Logical FLOPs (e.g. 2·M·N·K for a dot), unpadded.
    pub flops: f64,
}

/// Shape of a 2-D convolution in NHWC / HWIO layout.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Conv2dShape {
    /// Batch.
    pub n: i64,
    /// Input height.
    pub h: i64,
    /// Input width.
    pub w: i64,
    /// Input features.
    pub c_in: i64,
    /// Output features.
    pub c_out: i64,
    /// Window height.
    pub kh: i64,
    /// Window width.
    pub kw: i64,
    /// Stride (both spatial dims).
    pub stride: i64,
    /// Symmetric padding (both spatial dims).
    pub pad: i64,
}

fn check_dims(what: &'static str, dims: &[i64]) -> Result<(), ModelError> {
    if dims.len() > MAX_DIMS {
        return Err(ModelError::TooManyDims {
            what,
            got: dims.len(),
            max: MAX_DIMS,
        });
    }
    for (i, &d) in dims.iter().enumerate() {
        if d <= 0 {
            return Err(ModelError::BadDim {
                what,
                index: i,
                value: d,
            });
        }
    }
    Ok(())
}

impl KernelDesc {
    /// Output rank (number of output iteration dims).
    pub fn output_rank(&self) -> usize {
        self.output.dims.len()
    }

    /// Number of iteration dims (output rank + reduction dims).
    pub fn n_iter(&self) -> usize {
        self.output.dims.len() + self.reduction_dims.len()
    }

    /// Window taps that slide over a smaller output than themselves: iteration dim
    /// `win` of a `DimMap::Window { out, win }` with extent(win) > extent(out). This is
    /// the filter gradient of a convolution in a training step (the window is the
    /// activation gradient, the output the filter), which XLA's TPU emitter
    /// contracts as one matmul over window taps × input features.
    pub fn is_big_window(&self, win: usize) -> bool {
        self.inputs.iter().any(|inp| {
            inp.dims.iter().any(|m| match *m {
                DimMap::Window { out, win: w, .. } => {
                    w == win && self.iter_extent(w) > self.iter_extent(out)
                }
                _ => false,
            })
        })
    }

    /// Is any window of this kernel a big window ([`Self::is_big_window`])?
    pub fn has_big_window(&self) -> bool {
        let r = self.output_rank();
        (r..self.n_iter()).any(|d| self.is_big_window(d))
    }

    /// Extent of iteration dim `d` (0 if out of range).
    pub fn iter_extent(&self, d: usize) -> i64 {
        let r = self.output.dims.len();
        if d < r {
            self.output.dims.get(d).copied().unwrap_or(0)
        } else {
            self.reduction_dims.get(d - r).map(|x| x.size).unwrap_or(0)
        }
    }

    /// Checks structural consistency; allocation-free unless it fails.
    pub fn validate(&self) -> Result<(), ModelError> {
        check_dims("output", &self.output.dims)?;
        let n = self.n_iter();
        if n > MAX_DIMS {
            return Err(ModelError::TooManyDims {
                what: "iteration space",
                got: n,
                max: MAX_DIMS,
            });
        }
        for (i, r) in self.reduction_dims.iter().enumerate() {
            if r.size <= 0 {
                return Err(ModelError::BadDim {
                    what: "reduction dim",
                    index: i,
                    value: r.size,
                });
            }
        }
        if self.output.elem_bits == 0 || self.output.elem_bits > 64 {
            return Err(ModelError::BadElemBits {
                what: "output",
                bits: self.output.elem_bits,
            });
        }
        for (k, inp) in self.inputs.iter().enumerate() {
            check_dims("input", &inp.tensor.dims)?;
            if inp.tensor.elem_bits == 0 || inp.tensor.elem_bits > 64 {
                return Err(ModelError::BadElemBits {
                    what: "input",
                    bits: inp.tensor.elem_bits,
                });
            }
            if inp.dims.len() != inp.tensor.dims.len() {
                return Err(ModelError::InputMapLength {
                    input: k,
                    expected: inp.tensor.dims.len(),
                    got: inp.dims.len(),
                });
            }
            for m in &inp.dims {
                let bad = match *m {
                    DimMap::Iter(d) => (d >= n).then_some(d),
                    DimMap::Window {
                        out,
                        win,
                        stride,
                        dilation,
                    } => {
                        if stride <= 0 || dilation <= 0 {
                            return Err(ModelError::BadWindow {
                                input: k,
                                stride,
                                dilation,
                            });
                        }
                        if out >= n {
                            Some(out)
                        } else if win >= n {
                            Some(win)
                        } else {
                            None
                        }
                    }
                    DimMap::Full => None,
                    DimMap::Outer { iter, inner } => {
                        if inner <= 0 {
                            return Err(ModelError::BadOuter { input: k, inner });
                        }
                        (iter >= n).then_some(iter)
                    }
                };
                if let Some(d) = bad {
                    return Err(ModelError::BadIterDim {
                        input: k,
                        dim: d,
                        n_iter: n,
                    });
                }
            }
        }
        if let Some(ko) = self.kernel_operand {
            if ko >= self.inputs.len() {
                return Err(ModelError::BadKernelOperand {
                    index: ko,
                    inputs: self.inputs.len(),
                });
            }
        }
        if let KernelKind::Mxu(spec) = &self.kind {
            if spec.roles.len() != self.output.dims.len() {
                return Err(ModelError::RolesLength {
                    expected: self.output.dims.len(),
                    got: spec.roles.len(),
                });
            }
        }
        for x in [self.flops, self.transcendentals] {
            if !(x.is_finite() && x >= 0.0) {
                return Err(ModelError::BadCount { value: x });
            }
        }
        for c in [self.vpu.per_output_element, self.vpu.per_reduction_point] {
            for x in [c.cheap, c.medium, c.expensive] {
                if !(x.is_finite() && x >= 0.0) {
                    return Err(ModelError::BadCount { value: x });
                }
            }
        }
        Ok(())
    }

    /// Batched matmul `out[b,m,n] = Σ_k lhs[b,m,k]·rhs[b,k,n]` in row-major
    /// layout (the batch dim is omitted when `batch == 1`). The RHS is the
    /// kernel operand, so `kernel_bounds = [bk, bn]` (or `[bb, bk, bn]`).
    #[allow(clippy::too_many_arguments)]
    pub fn matmul(
        name: &str,
        batch: i64,
        m: i64,
        k: i64,
        n: i64,
        in_bits: u32,
        out_bits: u32,
        precision: MxuPrecision,
    ) -> Result<Self, ModelError> {
        check_dims("matmul", &[batch, m, k, n])?;
        let (out_dims, roles, lhs, rhs) = if batch > 1 {
            (
                vec![batch, m, n],
                vec![MxuRole::Batch, MxuRole::M, MxuRole::N],
                InputDesc::mapped(vec![batch, m, k], in_bits, &[0, 1, 3]),
                InputDesc::mapped(vec![batch, k, n], in_bits, &[0, 3, 2]),
            )
        } else {
            (
                vec![m, n],
                vec![MxuRole::M, MxuRole::N],
                InputDesc::mapped(vec![m, k], in_bits, &[0, 2]),
                InputDesc::mapped(vec![k, n], in_bits, &[2, 1]),
            )
        };
        let d = Self {
            name: name.into(),
            kind: KernelKind::Mxu(MxuSpec { roles, precision }),
            output: TensorDesc::new(out_dims, out_bits),
            reduction_dims: vec![ReductionDim {
                size: k,
                kind: ReductionKind::Contraction,
            }],
            inputs: vec![lhs, rhs],
            kernel_operand: Some(1),
            vpu: VpuWork::default(),
            transcendentals: 0.0,
            flops: 2.0 * (batch as f64) * (m as f64) * (n as f64) * (k as f64),
        };
        d.validate()?;
        Ok(d)
    }

    /// 2-D convolution, input NHWC, filter HWIO, output NHWC (features minor),
    /// lowered to implicit GEMM: M = N·OH·OW, N = C_out, K = C_in, window taps
    /// KH·KW as separate passes. Iteration dims: `[n, oh, ow, cout, kh, kw, cin]`.
    pub fn conv2d(
        name: &str,
        s: Conv2dShape,
        in_bits: u32,
        out_bits: u32,
        precision: MxuPrecision,
    ) -> Result<Self, ModelError> {
        check_dims(
            "conv2d",
            &[s.n, s.h, s.w, s.c_in, s.c_out, s.kh, s.kw, s.stride],
        )?;
        if s.pad < 0 {
            return Err(ModelError::BadDim {
                what: "conv2d padding",
                index: 0,
                value: s.pad,
            });
        }
        let oh = (s.h + 2 * s.pad - s.kh) / s.stride + 1;
        let ow = (s.w + 2 * s.pad - s.kw) / s.stride + 1;
        check_dims("conv2d output", &[oh, ow])?;
        let input = InputDesc {
            tensor: TensorDesc::new(vec![s.n, s.h, s.w, s.c_in], in_bits),
            dims: vec![
                DimMap::Iter(0),
                DimMap::Window {
                    out: 1,
                    win: 4,
                    stride: s.stride,
                    dilation: 1,
                },
                DimMap::Window {
                    out: 2,
                    win: 5,
                    stride: s.stride,
                    dilation: 1,
                },
                DimMap::Iter(6),
            ],
        };
        let filter = InputDesc::mapped(vec![s.kh, s.kw, s.c_in, s.c_out], in_bits, &[4, 5, 6, 3]);
        let d = Self {
            name: name.into(),
            kind: KernelKind::Mxu(MxuSpec {
                roles: vec![MxuRole::M, MxuRole::M, MxuRole::M, MxuRole::N],
                precision,
            }),
            output: TensorDesc::new(vec![s.n, oh, ow, s.c_out], out_bits),
            reduction_dims: vec![
                ReductionDim {
                    size: s.kh,
                    kind: ReductionKind::Window,
                },
                ReductionDim {
                    size: s.kw,
                    kind: ReductionKind::Window,
                },
                ReductionDim {
                    size: s.c_in,
                    kind: ReductionKind::Contraction,
                },
            ],
            inputs: vec![input, filter],
            kernel_operand: Some(1),
            vpu: VpuWork::default(),
            transcendentals: 0.0,
            flops: 2.0 * (s.n * oh * ow) as f64 * (s.c_out * s.c_in * s.kh * s.kw) as f64,
        };
        d.validate()?;
        Ok(d)
    }

    /// Elementwise kernel over `dims` with `n_inputs` operands of the same
    /// shape and layout, `ops` per output element.
    pub fn elementwise(
        name: &str,
        dims: &[i64],
        elem_bits: u32,
        n_inputs: usize,
        ops: OpCounts,
    ) -> Result<Self, ModelError> {
        check_dims("elementwise", dims)?;
        let iter: Vec<usize> = (0..dims.len()).collect();
        let d = Self {
            name: name.into(),
            kind: KernelKind::Elementwise,
            output: TensorDesc::new(dims.to_vec(), elem_bits),
            reduction_dims: vec![],
            inputs: (0..n_inputs)
                .map(|_| InputDesc::mapped(dims.to_vec(), elem_bits, &iter))
                .collect(),
            kernel_operand: None,
            vpu: VpuWork {
                per_output_element: ops,
                per_reduction_point: OpCounts::default(),
            },
            transcendentals: 0.0,
            flops: dims.iter().product::<i64>() as f64 * (ops.cheap + ops.medium + ops.expensive),
        };
        d.validate()?;
        Ok(d)
    }

    /// Reduction of the input dims listed in `reduced` (indices into
    /// `in_dims`, physical order). The output keeps the remaining dims in
    /// order; each reduced dim becomes a reduction iteration dim whose axis
    /// follows from its position (minor → lanes, second-minor → sublanes).
    /// `per_point` are ops per input element (including the combiner).
    pub fn reduction(
        name: &str,
        in_dims: &[i64],
        reduced: &[usize],
        elem_bits: u32,
        per_point: OpCounts,
    ) -> Result<Self, ModelError> {
        check_dims("reduction input", in_dims)?;
        let rank = in_dims.len();
        let mut out_dims = Vec::new();
        let mut red = Vec::new();
        for (i, &d) in in_dims.iter().enumerate() {
            if !reduced.contains(&i) {
                out_dims.push(d);
            }
        }
        for &i in reduced {
            let Some(&size) = in_dims.get(i) else {
                return Err(ModelError::BadIterDim {
                    input: 0,
                    dim: i,
                    n_iter: rank,
                });
            };
            let axis = if i + 1 == rank {
                ReduceAxis::Lanes
            } else if i + 2 == rank {
                ReduceAxis::Sublanes
            } else {
                ReduceAxis::Major
            };
            red.push(ReductionDim {
                size,
                kind: ReductionKind::Reduce(axis),
            });
        }
        let r = out_dims.len();
        let mut map = Vec::with_capacity(rank);
        let mut next_out = 0usize;
        for i in 0..rank {
            if let Some(p) = reduced.iter().position(|&x| x == i) {
                map.push(DimMap::Iter(r + p));
            } else {
                map.push(DimMap::Iter(next_out));
                next_out += 1;
            }
        }
        let d = Self {
            name: name.into(),
            kind: KernelKind::Reduction,
            output: TensorDesc::new(out_dims, elem_bits),
            reduction_dims: red,
            inputs: vec![InputDesc {
                tensor: TensorDesc::new(in_dims.to_vec(), elem_bits),
                dims: map,
            }],
            kernel_operand: None,
            vpu: VpuWork {
                per_output_element: OpCounts::default(),
                per_reduction_point: per_point,
            },
            transcendentals: 0.0,
            flops: in_dims.iter().product::<i64>() as f64
                * (per_point.cheap + per_point.medium + per_point.expensive),
        };
        d.validate()?;
        Ok(d)
    }

    /// Copy / transpose: `out.dims[i] = in_dims[perm[i]]` (physical orders).
    /// The identity permutation is a plain copy.
    pub fn copy_transpose(
        name: &str,
        in_dims: &[i64],
        perm: &[usize],
        elem_bits: u32,
    ) -> Result<Self, ModelError> {
        check_dims("copy input", in_dims)?;
        let rank = in_dims.len();
        let mut seen = [false; MAX_DIMS];
        if perm.len() != rank {
            return Err(ModelError::BadPermutation { rank });
        }
        for &p in perm {
            match seen.get_mut(p) {
                Some(s) if !*s && p < rank => *s = true,
                _ => return Err(ModelError::BadPermutation { rank }),
            }
        }
        let out_dims: Vec<i64> = perm.iter().map(|&p| in_dims[p]).collect();
        let mut map = vec![DimMap::Full; rank];
        for (i, &p) in perm.iter().enumerate() {
            map[p] = DimMap::Iter(i);
        }
        let d = Self {
            name: name.into(),
            kind: KernelKind::CopyTranspose,
            output: TensorDesc::new(out_dims, elem_bits),
            reduction_dims: vec![],
            inputs: vec![InputDesc {
                tensor: TensorDesc::new(in_dims.to_vec(), elem_bits),
                dims: map,
            }],
            kernel_operand: None,
            vpu: VpuWork::default(),
            transcendentals: 0.0,
            flops: 0.0,
        };
        d.validate()?;
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_by_element_width() {
        // The HBM tiles of spec §5.5: f32 with 3 rows takes T(4,128); bf16 T(8,128)(2,1)
        // and s8 T(8,128)(4,1) pad to 8 rows; pred is stored as bytes; a long rank-1
        // f32 array takes T(1024), a short one T(128); an f32 scalar T(256).
        assert_eq!(TensorDesc::new(vec![3, 5], 32).padded_dims(), vec![4, 128]);
        assert_eq!(
            TensorDesc::new(vec![10, 5], 32).padded_dims(),
            vec![16, 128]
        );
        assert_eq!(
            TensorDesc::new(vec![10, 200], 16).padded_dims(),
            vec![16, 256]
        );
        assert_eq!(TensorDesc::new(vec![3, 5], 8).padded_dims(), vec![8, 128]);
        assert_eq!(
            TensorDesc::new(vec![2, 3, 5], 1).padded_bytes(),
            2.0 * 8.0 * 128.0
        );
        assert_eq!(TensorDesc::new(vec![1000], 32).padded_dims(), vec![1024]);
        assert_eq!(TensorDesc::new(vec![100], 32).padded_dims(), vec![128]);
        assert_eq!(TensorDesc::new(vec![], 32).padded_dims(), vec![256]);
        assert_eq!(
            TensorDesc::typed(vec![], PrimitiveType::S32, 32).padded_dims(),
            vec![128]
        );
        // 64-bit arrays are untiled.
        assert_eq!(TensorDesc::new(vec![3, 5], 64).padded_dims(), vec![3, 5]);
    }

    #[test]
    fn derived_broadcast_and_contraction_dims() {
        let d = KernelDesc::matmul("mm", 1, 64, 32, 16, 16, 16, MxuPrecision::Bf16).unwrap();
        // iteration dims: 0 = m, 1 = n, 2 = k
        assert_eq!(d.inputs[0].broadcast_dims(3), vec![1]);
        assert_eq!(d.inputs[1].broadcast_dims(3), vec![0]);
        assert_eq!(d.inputs[0].contraction_dims(2, 3), vec![2]);
        let c = KernelDesc::conv2d(
            "c",
            Conv2dShape {
                n: 2,
                h: 9,
                w: 9,
                c_in: 4,
                c_out: 8,
                kh: 3,
                kw: 3,
                stride: 2,
                pad: 0,
            },
            16,
            16,
            MxuPrecision::Bf16,
        )
        .unwrap();
        assert_eq!(c.output.dims[..], [2, 4, 4, 8]);
        assert_eq!(c.inputs[0].broadcast_dims(7), vec![3]);
        assert_eq!(c.inputs[0].contraction_dims(4, 7), vec![4, 5, 6]);
        assert_eq!(c.flops, 2.0 * 2.0 * 16.0 * 8.0 * 4.0 * 9.0);
    }

    #[test]
    fn builders_reject_bad_input() {
        assert!(KernelDesc::matmul("m", 1, 0, 4, 4, 16, 16, MxuPrecision::Bf16).is_err());
        assert!(KernelDesc::copy_transpose("t", &[2, 3], &[0, 0], 32).is_err());
        assert!(KernelDesc::reduction("r", &[2, 3], &[5], 32, OpCounts::cheap(1.0)).is_err());
        let mut d = KernelDesc::elementwise("e", &[8, 128], 32, 1, OpCounts::cheap(1.0)).unwrap();
        d.inputs[0].dims[0] = DimMap::Iter(9);
        assert!(matches!(
            d.validate(),
            Err(ModelError::BadIterDim { dim: 9, .. })
        ));
        let r = KernelDesc::reduction("r", &[4, 6, 8], &[1, 2], 32, OpCounts::cheap(1.0)).unwrap();
        assert_eq!(r.output.dims[..], [4]);
        assert_eq!(
            r.reduction_dims.iter().map(|x| x.kind).collect::<Vec<_>>(),
            vec![
                ReductionKind::Reduce(ReduceAxis::Sublanes),
                ReductionKind::Reduce(ReduceAxis::Lanes)
            ]
        );
    }
}
