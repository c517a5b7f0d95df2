//! TpuGraphs dataset generation: graph encoding, the 140 node features, opcode ids and
//! configuration features (spec `tpugraphs_format.md` §1–§4).

pub mod config_feat;
pub mod features;
pub mod graph;
pub mod opcodes;
