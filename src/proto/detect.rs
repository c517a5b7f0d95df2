//! Content-based detection of the kind of a module / tuning file.
//!
//! A file's extension is not trusted: `detect` looks at the bytes.
//!
//! 1. **HLO text**: the first 4 KiB are UTF-8 (a multi-byte character cut at
//!    the 4 KiB boundary is allowed) without control characters other than
//!    tab, CR and LF, and the first non-blank character is a letter, `_`,
//!    `%` or `/` (`HloModule`, `ENTRY`, a computation name, a comment).
//!    Protobuf tags of fields 2..=3 are the bytes 0x12 / 0x1a, control
//!    characters, so a binary module fails this test within its first
//!    few bytes.
//! 2. Otherwise the top-level protobuf fields are walked (tags only, payloads
//!    skipped; at most [`MAX_FIELDS`] fields; a truncated tail just ends the
//!    walk) and classified by field numbers and wire types:
//!    * **`xla.HloModuleProto`**: field 1 (`name`) or 2
//!      (`entry_computation_name`) is a length-delimited *printable string*,
//!      and field 2 is never a varint.
//!    * **`tpu_graphs.ModuleTuningData`**: only fields 1..=4; field 1
//!      (`module`) is a length-delimited payload that itself looks like an
//!      `HloModuleProto`; or, without field 1, field 2 (`fingerprint`) is a
//!      varint.
//!    * **`tpu_graphs.TuningData`**: every field is number 1 and
//!      length-delimited, and the first payload looks like a
//!      `ModuleTuningData`.
//!
//! The tests are ordered so that the three binary kinds cannot be confused
//! for real files: a module's field 1 is a name (printable text), a
//! `ModuleTuningData`'s field 1 is a message that starts with the tag byte
//! 0x0a followed by a length, and a `TuningData`'s field 1 is a message whose
//! own field 1 is a message. Degenerate files (e.g. a module without any
//! name, an empty message) give [`InputKind::Unknown`]; callers that know
//! what they expect can decode directly.

use serde::Serialize;

/// Kind of input file, as found by [`detect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// HLO text (`HloModule ...`).
    HloText,
    /// Serialized `xla.HloModuleProto`.
    HloModuleProto,
    /// Serialized `tpu_graphs.ModuleTuningData` (TpuGraphs layout file).
    ModuleTuningData,
    /// Serialized `tpu_graphs.TuningData` (TpuGraphs tile file).
    TuningData,
    /// None of the above (empty, or not recognisable).
    Unknown,
}

impl std::fmt::Display for InputKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            InputKind::HloText => "HLO text",
            InputKind::HloModuleProto => "xla.HloModuleProto",
            InputKind::ModuleTuningData => "tpu_graphs.ModuleTuningData",
            InputKind::TuningData => "tpu_graphs.TuningData",
            InputKind::Unknown => "an unrecognised file",
        })
    }
}

/// At most this many top-level fields are looked at.
pub const MAX_FIELDS: usize = 64;
/// Bytes inspected by the text test.
const TEXT_PREFIX: usize = 4096;

/// Detects the kind of `bytes` by content (see the module docs for the rules).
/// Never panics, whatever the input.
pub fn detect(bytes: &[u8]) -> InputKind {
    if bytes.is_empty() {
        return InputKind::Unknown;
    }
    if looks_like_text(bytes) {
        return InputKind::HloText;
    }
    let fields = walk(bytes, MAX_FIELDS);
    if looks_like_module(&fields) {
        InputKind::HloModuleProto
    } else if looks_like_module_tuning(&fields) {
        InputKind::ModuleTuningData
    } else if looks_like_tuning_set(&fields) {
        InputKind::TuningData
    } else {
        InputKind::Unknown
    }
}

fn looks_like_text(bytes: &[u8]) -> bool {
    let prefix = &bytes[..bytes.len().min(TEXT_PREFIX)];
    let text = match std::str::from_utf8(prefix) {
        Ok(t) => t,
        // A multi-byte character cut by the prefix boundary is fine.
        Err(e) if e.error_len().is_none() && prefix.len() == TEXT_PREFIX => {
            match std::str::from_utf8(&prefix[..e.valid_up_to()]) {
                Ok(t) => t,
                Err(_) => return false,
            }
        }
        Err(_) => return false,
    };
    if text
        .bytes()
        .any(|b| (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r')) || b == 0x7f)
    {
        return false;
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    match text.trim_start().chars().next() {
        Some(c) => c.is_ascii_alphabetic() || matches!(c, '_' | '%' | '/'),
        None => false,
    }
}

/// Wire-level value of one field.
#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Varint,
    Fixed,
    /// Length-delimited payload (cut short if the input is truncated).
    Len(&'a [u8]),
}

/// Walks the top-level fields of a protobuf message: `(field number, value)`.
/// Stops at `max` fields, at the end, or at the first malformed byte.
fn walk(mut bytes: &[u8], max: usize) -> Vec<(u64, Value<'_>)> {
    let mut out = Vec::new();
    while !bytes.is_empty() && out.len() < max {
        let Some((key, rest)) = varint(bytes) else {
            break;
        };
        let number = key >> 3;
        if number == 0 || number > (1 << 29) - 1 {
            break;
        }
        bytes = rest;
        let value = match key & 7 {
            0 => match varint(bytes) {
                Some((_, rest)) => {
                    bytes = rest;
                    Value::Varint
                }
                None => break,
            },
            1 | 5 => {
                let n = if key & 7 == 1 { 8 } else { 4 };
                match bytes.get(n..) {
                    Some(rest) => {
                        bytes = rest;
                        Value::Fixed
                    }
                    None => break,
                }
            }
            2 => {
                let Some((len, rest)) = varint(bytes) else {
                    break;
                };
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                if len > rest.len() {
                    // Truncated: keep what is there and stop.
                    out.push((number, Value::Len(rest)));
                    break;
                }
                let (payload, rest) = rest.split_at(len);
                bytes = rest;
                Value::Len(payload)
            }
            _ => break,
        };
        out.push((number, value));
    }
    out
}

fn varint(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let mut v: u64 = 0;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * i as u32);
        if b & 0x80 == 0 {
            return Some((v, &bytes[i + 1..]));
        }
    }
    None
}

fn printable(s: &[u8]) -> bool {
    !s.is_empty() && std::str::from_utf8(s).is_ok() && s.iter().all(|&b| b >= 0x20 && b != 0x7f)
}

fn looks_like_module(fields: &[(u64, Value<'_>)]) -> bool {
    let mut named = false;
    for &(n, v) in fields {
        match (n, v) {
            (1 | 2, Value::Len(p)) => {
                if !printable(p) {
                    return false;
                }
                named = true;
            }
            (1 | 2, _) => return false,
            (3 | 4, Value::Len(_)) => {}
            (3 | 4, _) => return false,
            _ => {}
        }
    }
    named
}

fn looks_like_module_tuning(fields: &[(u64, Value<'_>)]) -> bool {
    let mut evidence = false;
    for &(n, v) in fields {
        match (n, v) {
            (1, Value::Len(p)) => {
                if !looks_like_module(&walk(p, MAX_FIELDS)) {
                    return false;
                }
                evidence = true;
            }
            (2, Value::Varint) => evidence = true,
            (3, Value::Len(_)) | (4, Value::Len(_) | Value::Varint) => {}
            _ => return false,
        }
    }
    evidence
}

fn looks_like_tuning_set(fields: &[(u64, Value<'_>)]) -> bool {
    let Some(&(1, Value::Len(first))) = fields.first() else {
        return false;
    };
    fields
        .iter()
        .all(|&(n, v)| n == 1 && matches!(v, Value::Len(_)))
        && looks_like_module_tuning(&walk(first, MAX_FIELDS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_text() {
        assert_eq!(detect(b"HloModule m\n\nENTRY e {}"), InputKind::HloText);
        assert_eq!(detect(b"  // comment\nENTRY e {}"), InputKind::HloText);
        assert_eq!(
            detect(b"\n\x0bjit__lambda\x12\x06main.3"),
            InputKind::HloModuleProto
        );
        assert_eq!(detect(b""), InputKind::Unknown);
        assert_eq!(detect(b"   \n"), InputKind::Unknown);
        assert_eq!(detect(&[0xff, 0xff, 0xff]), InputKind::Unknown);
    }

    #[test]
    fn nested_kinds() {
        // module: name "m", entry "e"
        let module = b"\x0a\x01m\x12\x01e".to_vec();
        assert_eq!(detect(&module), InputKind::HloModuleProto);
        // ModuleTuningData: module, fingerprint 7
        let mut mtd = vec![0x0a, module.len() as u8];
        mtd.extend_from_slice(&module);
        mtd.extend_from_slice(&[0x10, 7]);
        assert_eq!(detect(&mtd), InputKind::ModuleTuningData);
        // module only, no other field
        let mtd_only = &mtd[..mtd.len() - 2];
        assert_eq!(detect(mtd_only), InputKind::ModuleTuningData);
        // TuningData with two ModuleTuningData
        let mut td = Vec::new();
        for _ in 0..2 {
            td.extend_from_slice(&[0x0a, mtd_only.len() as u8]);
            td.extend_from_slice(mtd_only);
        }
        assert_eq!(detect(&td), InputKind::TuningData);
        // truncated TuningData is still recognised
        assert_eq!(detect(&td[..td.len() - 3]), InputKind::TuningData);
    }
}
