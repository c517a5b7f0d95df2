//! Reading module files given on the command line.

use std::path::Path;

use crate::hlo::{parse_module, split_modules, HloError};
use crate::ir::Module;
use crate::proto::ProtoError;

/// One module read from a file (`label` is `FILE` or `FILE#k` for split files).
pub struct LoadedModule {
    pub label: String,
    pub module: Module,
}

/// Read a file and parse the module(s) in it. With `split`, lines that are exactly
/// `// -----` separate modules (XLA's lit-test convention). A module that looks
/// already compiled by XLA:CPU or XLA:GPU gets a warning on stderr
/// ([`crate::analysis::compiled_for`]).
pub fn load_modules(path: &Path, split: bool) -> Result<Vec<LoadedModule>, LoadError> {
    let mods = read_modules(path, split)?;
    for m in &mods {
        if let Some(c) = crate::analysis::compiled_for(&m.module) {
            eprintln!(
                "warning: {}: looks compiled for {} ({c}); TPU estimates from it are \
                 meaningless: feed the unoptimized HLO (see docs/jax.md)",
                m.label,
                c.backend.name()
            );
        }
    }
    Ok(mods)
}

fn read_modules(path: &Path, split: bool) -> Result<Vec<LoadedModule>, LoadError> {
    let file = path.display().to_string();
    let bytes = crate::limits::read_module_bytes(path).map_err(|cause| LoadError::Read {
        file: file.clone(),
        cause,
    })?;
    modules_from_bytes(&file, bytes, split)
}

/// The module(s) of a file's content `bytes` (HLO text, `HloModuleProto`,
/// `ModuleTuningData` or `TuningData`, recognised by content), with `file` naming it in
/// labels and errors: what [`load_modules`] reads from a file (without its warning).
pub fn modules_from_bytes(
    file: &str,
    bytes: Vec<u8>,
    split: bool,
) -> Result<Vec<LoadedModule>, LoadError> {
    let file = file.to_string();
    // Binary inputs (HloModuleProto, ModuleTuningData, TuningData) are recognised by
    // content, whatever the file is called.
    use crate::proto::{detect, InputKind};
    if !matches!(detect(&bytes), InputKind::HloText | InputKind::Unknown) {
        let mods =
            crate::proto::modules_from_binary(&bytes).map_err(|cause| LoadError::Binary {
                file: file.clone(),
                cause,
            })?;
        let many = mods.len() > 1;
        return Ok(mods
            .into_iter()
            .enumerate()
            .map(|(k, module)| LoadedModule {
                label: if many {
                    format!("{file}#{k}")
                } else {
                    file.clone()
                },
                module,
            })
            .collect());
    }
    let text = match String::from_utf8(bytes) {
        Ok(t) if !t.contains('\0') => t,
        // Binary content that `detect` did not recognise: a corrupted or truncated
        // protobuf, most likely; say where decoding it fails.
        bad => {
            let bytes = match bad {
                Ok(t) => t.into_bytes(),
                Err(e) => e.into_bytes(),
            };
            return match crate::proto::module_from_proto_bytes(&bytes) {
                Ok(module) => Ok(vec![LoadedModule {
                    label: file,
                    module,
                }]),
                Err(cause) => Err(LoadError::NotText { file, cause }),
            };
        }
    };
    let mut out = Vec::new();
    if split {
        let parts = split_modules(&text);
        let many = parts.len() > 1;
        for (k, (first_line, part)) in parts.into_iter().enumerate() {
            let module = parse_module(&file, part).map_err(|mut e| {
                if e.line > 0 {
                    e.line += first_line - 1;
                }
                LoadError::Hlo(e)
            })?;
            let label = if many {
                format!("{file}#{k}")
            } else {
                file.clone()
            };
            out.push(LoadedModule { label, module });
        }
    } else {
        let module = parse_module(&file, &text).map_err(|e| {
            if text.lines().any(|l| l == "// -----") {
                LoadError::Hlo(HloError {
                    message: format!(
                        "{} (the file holds several modules separated by '// -----': use --split-modules)",
                        e.message
                    ),
                    ..e
                })
            } else {
                LoadError::Hlo(e)
            }
        })?;
        out.push(LoadedModule {
            label: file,
            module,
        });
    }
    Ok(out)
}

/// Why a module file could not be loaded. The message names the file (and, for HLO
/// text, the line and column) and says `error:` itself, as every command prints it; the
/// cause is part of the message, not a separate `source`.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read: missing, unreadable, or over the size limit.
    #[error("{file}: error: {cause}")]
    Read { file: String, cause: std::io::Error },
    /// A binary input (`HloModuleProto`, tuning data) that does not decode.
    #[error("{file}: error: {cause}")]
    Binary { file: String, cause: ProtoError },
    /// Content that is neither HLO text nor a recognised binary input.
    #[error("{file}: error: binary data, not HLO text: {cause}")]
    NotText { file: String, cause: ProtoError },
    /// HLO text that does not parse.
    #[error("{0}")]
    Hlo(HloError),
}
