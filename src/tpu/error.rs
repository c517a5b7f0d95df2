//! Errors of the kernel cost model. Variants carry only numbers and static
//! strings so that the error path of an evaluation allocates nothing either.

use thiserror::Error;

/// Why a kernel or tile configuration cannot be evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Error)]
pub enum ModelError {
    /// The tile configuration needs more VMEM than the scoped limit.
    #[error("infeasible tile: needs {needed} B of VMEM, scoped limit is {available} B")]
    Infeasible {
        /// Bytes the configuration needs (double-buffered tiles + accumulator).
        needed: u64,
        /// Scoped VMEM limit of the target.
        available: u64,
    },
    /// A bounds list has the wrong length.
    #[error("tile config `{field}` has {got} entries, expected {expected} (or 0 for default)")]
    BoundsLength {
        /// `output_bounds`, `kernel_bounds` or `input_bounds`.
        field: &'static str,
        /// Expected length.
        expected: usize,
        /// Given length.
        got: usize,
    },
    /// A tile bound is ≤ 0 or larger than the dim it tiles.
    #[error("tile config `{field}[{index}]` = {value} is outside 1..={extent} (tiles of that physical dim)")]
    BoundOutOfRange {
        /// Which bounds list.
        field: &'static str,
        /// Position in the list.
        index: usize,
        /// Given value.
        value: i64,
        /// Extent of the tiled dim.
        extent: i64,
    },
    /// Too many dims for the fixed-size evaluator.
    #[error("{what} has {got} dims, at most {max} are supported")]
    TooManyDims {
        /// What was too big.
        what: &'static str,
        /// Number of dims given.
        got: usize,
        /// Supported maximum.
        max: usize,
    },
    /// A dim size is ≤ 0.
    #[error("{what} dim {index} has size {value}, must be ≥ 1")]
    BadDim {
        /// Which tensor.
        what: &'static str,
        /// Dim position.
        index: usize,
        /// Given size.
        value: i64,
    },
    /// Unsupported element width.
    #[error("{what} element width {bits} bits is not in 1..=64")]
    BadElemBits {
        /// Which tensor.
        what: &'static str,
        /// Given width.
        bits: u32,
    },
    /// An input's dim map does not match its rank.
    #[error("input {input}: dim map has {got} entries, tensor rank is {expected}")]
    InputMapLength {
        /// Input index.
        input: usize,
        /// Tensor rank.
        expected: usize,
        /// Map length.
        got: usize,
    },
    /// An input maps to an iteration dim that does not exist.
    #[error(
        "input {input}: iteration dim {dim} does not exist (iteration space has {n_iter} dims)"
    )]
    BadIterDim {
        /// Input index.
        input: usize,
        /// Referenced dim.
        dim: usize,
        /// Number of iteration dims.
        n_iter: usize,
    },
    /// A window map has a non-positive stride or dilation.
    #[error("input {input}: window stride {stride} / dilation {dilation} must be ≥ 1")]
    BadWindow {
        /// Input index.
        input: usize,
        /// Stride.
        stride: i64,
        /// Dilation.
        dilation: i64,
    },
    /// An `Outer` map has a non-positive inner size.
    #[error("input {input}: merged-dim inner size {inner} must be ≥ 1")]
    BadOuter {
        /// Input index.
        input: usize,
        /// Inner size.
        inner: i64,
    },
    /// `kernel_operand` points past the inputs.
    #[error("kernel operand index {index} but the kernel has {inputs} inputs")]
    BadKernelOperand {
        /// Given index.
        index: usize,
        /// Number of inputs.
        inputs: usize,
    },
    /// MXU roles do not cover the output dims.
    #[error("MXU roles: {got} given, output rank is {expected}")]
    RolesLength {
        /// Output rank.
        expected: usize,
        /// Number of roles.
        got: usize,
    },
    /// A count (flops, ops) is negative or not finite.
    #[error("op/flop count {value} must be finite and ≥ 0")]
    BadCount {
        /// Given value.
        value: f64,
    },
    /// A transpose permutation is not a permutation of `0..rank`.
    #[error("permutation is not a permutation of 0..{rank}")]
    BadPermutation {
        /// Rank of the input.
        rank: usize,
    },
}
