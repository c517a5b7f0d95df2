//! Error types of shape inference and verification.

use std::fmt;

use crate::hlo::printer::write_shape;
use crate::ir::{PrimitiveType, Shape};

/// Shape text without layouts, as used in error messages (`f32[2,3]`, `(f32[], s32[4])`).
pub fn shape_text(s: &Shape) -> String {
    let mut out = String::new();
    write_shape(&mut out, s, false);
    out
}

/// Why an instruction's result shape cannot be inferred from its operands and
/// attributes (the instruction is malformed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("takes {expected} operands, found {found}")]
    OperandCount { expected: String, found: usize },
    #[error("operand {operand} must be an array, found {shape}")]
    NotArray { operand: usize, shape: String },
    #[error("operand {operand} must be a tuple, found {shape}")]
    NotTuple { operand: usize, shape: String },
    #[error("{what}: element type {found} does not match {expected}")]
    ElementType {
        what: String,
        expected: PrimitiveType,
        found: PrimitiveType,
    },
    #[error("operand dimensions differ: {lhs} vs {rhs}")]
    OperandDims { lhs: String, rhs: String },
    #[error("{what}: dimension {dim} is out of range for rank {rank}")]
    DimensionOutOfRange {
        what: &'static str,
        dim: i64,
        rank: usize,
    },
    #[error("{what}: dimensions {dims:?} are not a permutation of 0..{rank}")]
    NotPermutation {
        what: &'static str,
        dims: Vec<i64>,
        rank: usize,
    },
    #[error("reshape changes the element count from {operand} to {result}")]
    ReshapeElementCount { operand: u64, result: u64 },
    #[error("broadcast: {dims} dimensions given for an operand of rank {rank}")]
    BroadcastRank { dims: usize, rank: usize },
    #[error(
        "broadcast: operand dimension {operand_dim} (size {operand_size}) maps to result dimension {result_dim} of size {result_size}"
    )]
    BroadcastDim {
        operand_dim: usize,
        operand_size: i64,
        result_dim: i64,
        result_size: i64,
    },
    #[error(
        "dot: contracting dimension sizes differ: lhs dimension {lhs_dim} has size {lhs_size}, rhs dimension {rhs_dim} has size {rhs_size}"
    )]
    DotContracting {
        lhs_dim: i64,
        lhs_size: i64,
        rhs_dim: i64,
        rhs_size: i64,
    },
    #[error(
        "dot: batch dimension sizes differ: lhs dimension {lhs_dim} has size {lhs_size}, rhs dimension {rhs_dim} has size {rhs_size}"
    )]
    DotBatch {
        lhs_dim: i64,
        lhs_size: i64,
        rhs_dim: i64,
        rhs_size: i64,
    },
    #[error("dot: {0}")]
    DotDims(String),
    #[error(
        "convolution: input feature size {input_features} is not kernel input feature size {kernel_input_features} times feature_group_count {feature_group_count}"
    )]
    ConvFeatures {
        input_features: i64,
        kernel_input_features: i64,
        feature_group_count: i64,
    },
    #[error("convolution: {0}")]
    Conv(String),
    #[error("window: {0}")]
    Window(String),
    #[error("tuple index {index} is out of range for a tuple of {len} elements")]
    TupleIndex { index: i64, len: usize },
    #[error(
        "slice of dimension {dim} [{start}:{limit}:{stride}] is out of bounds for size {size}"
    )]
    SliceBounds {
        dim: usize,
        start: i64,
        limit: i64,
        stride: i64,
        size: i64,
    },
    #[error("missing attribute '{0}'")]
    MissingAttribute(&'static str),
    #[error("missing called computation '{0}'")]
    MissingComputation(&'static str),
    #[error("called computation '{computation}': {message}")]
    Signature {
        computation: String,
        message: String,
    },
    #[error("{0}")]
    Invalid(String),
}

/// What is wrong with one instruction.
#[derive(Debug, Clone, PartialEq)]
pub enum VerifyErrorKind {
    /// The declared result shape differs from the inferred one (layouts ignored).
    ShapeMismatch {
        declared: Box<Shape>,
        inferred: Box<Shape>,
    },
    /// The instruction is malformed: no shape can be inferred.
    Malformed(ShapeError),
    /// A structural problem of the computation (root, parameters, callers).
    Structure(String),
}

/// One verifier finding, located at an instruction of a computation.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifyError {
    pub computation: String,
    pub instruction: String,
    /// The instruction's opcode text.
    pub opcode: String,
    /// Source line (1-based; 0 = unknown).
    pub line: u32,
    pub kind: VerifyErrorKind,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: ", self.line)?;
        }
        write!(
            f,
            "computation '{}', instruction '{}' ({}): ",
            self.computation, self.instruction, self.opcode
        )?;
        match &self.kind {
            VerifyErrorKind::ShapeMismatch { declared, inferred } => write!(
                f,
                "declared shape {} does not match the inferred shape {}",
                shape_text(declared),
                shape_text(inferred)
            ),
            VerifyErrorKind::Malformed(e) => write!(f, "{e}"),
            VerifyErrorKind::Structure(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for VerifyError {}
