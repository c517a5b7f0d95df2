//! TpuGraphs dataset files: features and `.npz` I/O.

pub mod kernel_module;
pub mod npz;
pub mod plan;
