//! The intermediate representation: modules of computations, each a petgraph graph of
//! instructions with typed shapes, layouts and attributes.

pub mod attrs;
pub mod check;
pub mod module;
pub mod opcode;
pub mod shape;
pub mod types;

pub use attrs::*;
pub use check::{check_module, CheckError, MAX_ARRAY_BYTES, MAX_CALL_DEPTH};
pub use module::*;
pub use opcode::{Opcode, ALL_OPCODES};
pub use shape::*;
pub use types::PrimitiveType;
