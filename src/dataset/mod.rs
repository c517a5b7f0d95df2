//! TpuGraphs dataset files: graph encoding, the 140 node features, opcode ids and
//! configuration features (spec `tpugraphs_format.md` §1–§4), kernel modules of the
//! tile collection, `.npz` I/O and generation planning.

pub mod config_feat;
pub mod features;
pub mod generate;
pub mod graph;
pub mod kernel_module;
pub mod layout_eval;
pub mod listing;
pub mod manifest;
pub mod npz;
pub mod opcodes;
pub mod outdir;
pub mod plan;
pub mod replay;
pub mod write;
