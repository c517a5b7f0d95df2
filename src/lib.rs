//! tpusim: read XLA HLO, compile it the way XLA's TPU pipeline would under a
//! compilation configuration, estimate its runtime with an analytical TPU model,
//! and write TpuGraphs samples.
//!
//! Data flows one way, one module per stage:
//!
//! * front ends: `hlo` (text, pest grammar) and `proto` (binary `HloModuleProto`,
//!   TpuGraphs tuning files) read into `ir` (the module as petgraph computations), whose
//!   `ir::check` both share;
//! * `analysis`: facts about a module read by every later stage (shape inference,
//!   verifier, XLA's cost analysis and flop counts, while-loop trip counts);
//! * `passes`: compilation under a configuration (layout assignment with the TPU's
//!   layout tiles in `passes::tiling`, fusion, tiles), giving the compiled module and
//!   its kernel list;
//! * `tpu`: the analytical TPU model (targets, MXU/VPU/HBM/VMEM roofline, tiles) that
//!   kernels are costed by;
//! * `kernels`: the compiled program lowered to the model's kernel descriptions, in
//!   program order (loops × trip counts), and costed;
//! * outputs: `dataset` (TpuGraphs samples, generation, replaying tuning files),
//!   `eval` (metrics, scoring), `sweep` and `report` (teaching views);
//! * `cli`: the command-line front (clap; the only place that knows about it).
//!
//! A stage imports only the stages listed before it; `atomic` (file writing),
//! `limits` (input sizes), `rng` (seeded draws) and `progress` serve them all.

pub mod analysis;
pub mod atomic;
pub mod cli;
pub mod csv_text;
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
