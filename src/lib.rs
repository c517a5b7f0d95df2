//! tpusim: read XLA HLO, compile it the way XLA's TPU pipeline would under a
//! compilation configuration, estimate its runtime with an analytical TPU model,
//! and write TpuGraphs samples.
//!
//! Data flows one way; one module per stage:
//! `hlo` (text) / `proto` (binary) → `ir` → `analysis` → `passes` → `kernels` → `tpu` →
//! `dataset` / `eval` / `sweep` / `report`.

pub mod analysis;
pub mod atomic;
pub mod cli;
pub mod dataset;
pub mod eval;
pub mod hlo;
pub mod ir;
pub mod kernels;
pub mod limits;
pub mod passes;
pub mod progress;
pub mod proto;
pub mod report;
pub mod rng;
pub mod sweep;
pub mod tpu;
