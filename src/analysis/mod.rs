//! Static analysis of HLO modules: shape inference and a verifier that checks every
//! declared result shape against the inferred one, and a cost analysis with the
//! semantics of XLA's `HloCostAnalysis` (flops, transcendentals, bytes accessed).
//!
//! * [`infer_shape`] — the result shape XLA would infer for one instruction.
//! * [`verify_module`] — every instruction of every computation; errors name the
//!   computation, the instruction, both shapes and the source line.
//! * [`analyze_module`] — per-instruction and module-wide costs ([`CostReport`]),
//!   rendered for people by [`render_report`] or as JSON with `serde_json`.
//! * [`compiled_for`] — whether a module was already compiled by XLA:CPU or XLA:GPU
//!   (its TPU estimate would mean little), with the evidence.

pub mod compiled_for;
pub mod cost;
pub mod error;
pub mod infer;
pub mod report;
pub mod verify;
pub mod while_loop;

pub use compiled_for::{compiled_for, Backend, CompiledFor, Mark};
pub use cost::{
    analyze_module, analyze_module_with, module_cost, Cost, CostAnalyzer, CostOptions, CostReport,
    InstrCost, ShapeSizeMode,
};
pub use error::{ShapeError, VerifyError, VerifyErrorKind};
pub use infer::infer_shape;
pub use report::render_report;
pub use verify::{verify_computation, verify_module};
