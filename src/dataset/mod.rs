//! TpuGraphs dataset files: features and `.npz` I/O.

pub mod npz;
