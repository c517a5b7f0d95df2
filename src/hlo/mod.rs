//! HLO text front end: the pest grammar (`grammar/hlo.pest`), attribute sub-parsers,
//! located errors and the canonical printer.

pub mod attrs;
pub mod error;
pub mod names;
pub mod parser;
pub mod printer;
pub mod shape_text;

pub use error::HloError;
pub use parser::{parse_module, split_modules};
pub use printer::print_module;
