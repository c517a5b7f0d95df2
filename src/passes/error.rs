//! Errors of the compilation pipeline (configuration problems and malformed modules).

use thiserror::Error;

/// Everything that can go wrong when reading or applying a [`super::CompilationConfig`]
/// or when compiling a module. Messages always name the node, kernel or file involved.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CompileError {
    /// The configuration text could not be read or parsed.
    #[error("cannot read compilation config {source_name}: {message}")]
    ConfigSyntax {
        source_name: String,
        message: String,
    },

    /// A layout entry or fusion override names an instruction the module does not have.
    #[error("{context}: no instruction named '{name}' in module '{module}'")]
    UnknownNode {
        context: String,
        name: String,
        module: String,
    },

    /// The same instruction name occurs in several computations.
    #[error(
        "{context}: instruction name '{name}' is ambiguous (found in computations {computations})"
    )]
    AmbiguousNode {
        context: String,
        name: String,
        computations: String,
    },

    /// A node index past the end of the TpuGraphs node list.
    #[error("{context}: node index {index} is out of range (module '{module}' has {count} nodes)")]
    NodeIndexOutOfRange {
        context: String,
        index: usize,
        count: usize,
        module: String,
    },

    /// A layout entry names an instruction whose opcode is not configurable.
    #[error("layout config for node {node}: opcode '{opcode}' is not configurable (configurable: {allowed})")]
    NotConfigurable {
        node: String,
        opcode: String,
        allowed: String,
    },

    /// Two layout entries for one node.
    #[error("layout config for node {node} is given twice")]
    DuplicateLayout { node: String },

    /// A layout that is not a `minor_to_major` prefix of the tensor's dimensions (a dim
    /// repeated or out of range, or more entries than the rank).
    #[error("layout config for node {node}: {tensor} layout {layout:?} is not a minor_to_major prefix of a rank-{rank} tensor ({reason})")]
    BadLayout {
        node: String,
        tensor: &'static str,
        layout: Vec<i64>,
        rank: usize,
        reason: String,
    },

    /// A layout for a tensor the node does not have (e.g. `kernel` on a reshape).
    #[error("layout config for node {node}: it has no {tensor} tensor ({reason})")]
    NoSuchTensor {
        node: String,
        tensor: &'static str,
        reason: String,
    },

    /// A fusion override whose producer does not feed the consumer.
    #[error(
        "fusion override {producer} -> {consumer}: '{producer}' is not an operand of '{consumer}'"
    )]
    NotAnEdge { producer: String, consumer: String },

    /// A tile entry names a kernel that does not exist.
    #[error("tile config: no kernel {kernel} (the compiled module has {count} kernels)")]
    UnknownKernel { kernel: String, count: usize },

    /// Two tile entries for one kernel.
    #[error("tile config for kernel {kernel} is given twice")]
    DuplicateTile { kernel: String },

    /// Two fusion overrides for one producer → consumer edge (e.g. `fuse = false` and
    /// `fuse = true`).
    #[error("fusion override {producer} -> {consumer} is given twice")]
    DuplicateFusionOverride { producer: String, consumer: String },

    /// The input module is malformed in a way the passes cannot handle.
    #[error("module '{module}': {message}")]
    BadModule { module: String, message: String },

    /// The compiled module failed the structural self-check (a bug in the passes).
    #[error("compiled module '{module}' failed verification: {message}")]
    Verify { module: String, message: String },
}
