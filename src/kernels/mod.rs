//! From compiled HLO to the kernel-level cost model, and the program model.
//!
//! * [`lower`]: one instruction (a fusion or an unfused op) → [`KernelDesc`]
//!   ([`lower_kernel`]): iteration space from the output's physical layout,
//!   hero (dot / convolution / reduce / …) → kernel kind and reduction dims,
//!   dim maps traced from every fusion operand to the output.
//! * [`program`]: the whole module ([`estimate_program`], [`LoweredProgram`]):
//!   kernels summed in program order, `while` × trip count, `conditional` =
//!   most expensive branch; [`explain_kernel`] for the teaching view.
//! * [`ops`]: op cost classes and shape/layout helpers.
//!
//! Rules, formulas and approximations: `docs/kernels.md`.
//!
//! [`KernelDesc`]: crate::tpu::KernelDesc

mod content;
mod kept;
pub mod lower;
pub mod memo;
pub mod ops;
pub mod program;

pub use lower::{describe, lower_body, lower_kernel, lower_kernel_full, LowerError, LoweredKernel};
pub use memo::{KernelMemo, KernelTimes};
pub use program::{
    compile_program, compile_program_with, estimate_program, explain_kernel, find_kernel,
    tile_overrides, CompiledProgram, KernelExplanation, KernelRow, LoweredProgram, PreparedProgram,
    ProgramError, ProgramEstimate, ProgramKernel, SideOutputs, TileOverrides, TripSource,
    DEFAULT_TRIP_COUNT,
};
