//! How much of an input file tpusim reads: every input that is read whole has a size
//! limit, so that an endless or huge input (`/dev/zero`, a runaway file) is refused with
//! a clear error instead of being read until memory runs out. The limits are documented
//! with the commands (README.md, `docs/binary-inputs.md`, `docs/generation.md`).
//!
//! npz files are not read whole (their members are streamed), so they have no limit here.

use std::io::Read;
use std::path::Path;

const MIB: u64 = 1 << 20;

/// HLO text and binary protobuf inputs (`HloModuleProto`, `ModuleTuningData`,
/// `TuningData`): 2 GiB, protobuf's own limit on a message.
pub const MODULE_FILE_BYTES: u64 = 2048 * MIB;

/// Compilation configurations and TPU target files (JSON/TOML): 64 MiB.
pub const CONFIG_FILE_BYTES: u64 = 64 * MIB;

/// Prediction CSVs (`score --predictions`): 1 GiB.
pub const CSV_FILE_BYTES: u64 = 1024 * MIB;

/// `N MiB` / `N GiB` for messages.
pub fn size_text(bytes: u64) -> String {
    if bytes >= 1024 * MIB && bytes.is_multiple_of(1024 * MIB) {
        format!("{} GiB", bytes / (1024 * MIB))
    } else {
        format!("{} MiB", bytes / MIB)
    }
}

fn too_large(limit: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::FileTooLarge,
        format!(
            "larger than {}, the most tpusim reads of this kind of input",
            size_text(limit)
        ),
    )
}

/// Opens `path` for reading at most `limit` bytes: a regular file past the limit is
/// refused before any byte is read; anything else (a pipe, a device) fails once it has
/// given more than `limit` bytes. The reader stops after `limit + 1` bytes.
pub fn open(path: &Path, limit: u64) -> std::io::Result<std::io::Take<std::fs::File>> {
    let f = std::fs::File::open(path)?;
    let meta = f.metadata()?;
    if meta.is_file() && meta.len() > limit {
        return Err(too_large(limit));
    }
    Ok(f.take(limit.saturating_add(1)))
}

/// The bytes of `path`, at most `limit` of them (else an error of kind `FileTooLarge`).
pub fn read_bytes(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut r = open(path, limit)?;
    let mut v = Vec::new();
    r.read_to_end(&mut v)?;
    if v.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(v)
}

/// The bytes of a module or tuning file (HLO text or a binary protobuf), at most
/// [`MODULE_FILE_BYTES`]. A file whose first byte is below 0x08 is refused before
/// more is read: that byte is a control character, so not HLO text, and as the first
/// byte of a protobuf message it would be a tag of field number 0, which no message
/// has. So an endless source of zeros (`/dev/zero`) is refused at once, not after
/// 2 GiB.
pub fn read_module_bytes(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut r = open(path, MODULE_FILE_BYTES)?;
    let mut v = Vec::new();
    (&mut r).take(1).read_to_end(&mut v)?;
    if let Some(&b) = v.first().filter(|&&b| b < 0x08) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("neither HLO text nor a protobuf message (it starts with the byte 0x{b:02x})"),
        ));
    }
    r.read_to_end(&mut v)?;
    if v.len() as u64 > MODULE_FILE_BYTES {
        return Err(too_large(MODULE_FILE_BYTES));
    }
    Ok(v)
}

/// The text of `path` (UTF-8), at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_bytes(path, limit)?).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endless_and_oversized_inputs_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x");
        std::fs::write(&f, vec![b'a'; 100]).unwrap();
        assert_eq!(read_bytes(&f, 100).unwrap().len(), 100);
        let e = read_bytes(&f, 99).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
        assert!(e.to_string().contains("larger than 0 MiB"), "{e}");
        if Path::new("/dev/zero").exists() {
            let e = read_bytes(Path::new("/dev/zero"), MIB).unwrap_err();
            assert_eq!(
                e.to_string(),
                "larger than 1 MiB, the most tpusim reads of this kind of input"
            );
        }
        assert_eq!(size_text(MODULE_FILE_BYTES), "2 GiB");
        if Path::new("/dev/zero").exists() {
            let e = read_module_bytes(Path::new("/dev/zero")).unwrap_err();
            assert_eq!(
                e.to_string(),
                "neither HLO text nor a protobuf message (it starts with the byte 0x00)"
            );
        }
        std::fs::write(&f, "HloModule m").unwrap();
        assert_eq!(read_module_bytes(&f).unwrap(), b"HloModule m");
        std::fs::write(&f, b"").unwrap();
        assert!(read_module_bytes(&f).unwrap().is_empty());
    }
}
