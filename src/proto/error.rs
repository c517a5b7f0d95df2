//! Error type of the binary front end.

use std::path::PathBuf;

use super::detect::InputKind;

/// Everything that can go wrong while reading or writing a `.pb` input.
///
/// Messages say what was expected and what is wrong, e.g.
/// `not a valid tpu_graphs.ModuleTuningData (truncated or corrupt file?): ...`.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    /// Reading or writing a file failed.
    #[error("{}: {err}", path.display())]
    Io {
        /// File that could not be read or written.
        path: PathBuf,
        /// Underlying I/O error.
        err: std::io::Error,
    },
    /// The bytes are not a well-formed protobuf message of the expected type.
    #[error("not a valid {what} (truncated or corrupt file?): {err}")]
    Decode {
        /// Fully qualified message name, e.g. `xla.HloModuleProto`.
        what: &'static str,
        /// The decoder's description of the first problem.
        err: prost::DecodeError,
    },
    /// The fast HloModuleProto reader found malformed wire data.
    #[error("not a valid {what} (truncated or corrupt file?): {context}: {err}")]
    Malformed {
        /// Message type being read.
        what: &'static str,
        /// Where: computation / instruction / field.
        context: String,
        /// Wire-level problem.
        err: super::wire::WireError,
    },
    /// The file holds a different kind of input than the caller asked for.
    #[error("expected {expected}, but the content looks like {found}")]
    WrongKind {
        /// What the caller wanted.
        expected: InputKind,
        /// What [`detect`](super::detect::detect) found.
        found: InputKind,
    },
    /// An error while reading the named file.
    #[error("{}: {err}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// What went wrong in it.
        err: Box<ProtoError>,
    },
    /// Well-formed protobuf whose content breaks a rule of the format.
    #[error("{context}: {msg}")]
    Invalid {
        /// Where (message / module / computation / instruction).
        context: String,
        /// What is wrong.
        msg: String,
    },
}

impl ProtoError {
    /// Shorthand for [`ProtoError::Invalid`].
    pub fn invalid(context: impl Into<String>, msg: impl Into<String>) -> Self {
        ProtoError::Invalid {
            context: context.into(),
            msg: msg.into(),
        }
    }
}

/// Result type of this module.
pub type Result<T, E = ProtoError> = std::result::Result<T, E>;
