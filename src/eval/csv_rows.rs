//! Reading a prediction CSV (`score --predictions`, `compare --pred`): one reader for
//! both, so they refuse the same broken files with the same messages. The file is
//! streamed with the `csv` crate, at most [`CSV_FILE_BYTES`]; its first row must be the
//! expected header (a UTF-8 byte-order mark before it is allowed); blank lines are
//! skipped; every other row must have the header's field count. A NUL byte (binary
//! data, `/dev/zero`) is refused where it is met.

use std::path::Path;

use crate::limits::{size_text, CSV_FILE_BYTES};

/// Why a prediction CSV was refused: the whole file (`line` 0), or one line of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvFault {
    /// 1-based line, 0 for a fault of the whole file.
    pub line: u64,
    pub msg: String,
}

impl CsvFault {
    pub fn at(line: u64, msg: impl Into<String>) -> Self {
        CsvFault {
            line,
            msg: msg.into(),
        }
    }
}

/// Calls `row(line, record)` for each data row of the CSV at `path` whose first row is
/// `header` (fields in order). Ends with a fault of the file if it is larger than the
/// limit, or empty.
pub fn for_each_row(
    path: &Path,
    header: &[&str],
    mut row: impl FnMut(u64, &csv::StringRecord) -> Result<(), CsvFault>,
) -> Result<(), CsvFault> {
    let input =
        crate::limits::open(path, CSV_FILE_BYTES).map_err(|e| CsvFault::at(0, e.to_string()))?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(NoNul {
            inner: input,
            at: 0,
        });
    let want = header.join(",");
    let mut rec = csv::StringRecord::new();
    let mut seen_header = false;
    loop {
        match reader.read_record(&mut rec) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                let line = e.position().map_or(0, |p| p.line());
                let msg = match e.kind() {
                    csv::ErrorKind::Utf8 { .. } => "not UTF-8 text".to_string(),
                    csv::ErrorKind::Io(io) => io.to_string(),
                    _ => e.to_string(),
                };
                return Err(CsvFault::at(line.max(1), msg));
            }
        }
        let line = rec.position().map_or(0, |p| p.line());
        if !seen_header {
            seen_header = true;
            let same = rec.len() == header.len()
                && rec.iter().enumerate().all(|(i, f)| {
                    (if i == 0 {
                        f.trim_start_matches('\u{feff}')
                    } else {
                        f
                    }) == header[i]
                });
            if !same {
                return Err(CsvFault::at(
                    line,
                    format!(
                        "expected the header '{want}', found '{}'",
                        rec.iter().collect::<Vec<_>>().join(",")
                    ),
                ));
            }
            continue;
        }
        if rec.len() == 1 && rec.get(0).is_some_and(str::is_empty) {
            continue;
        }
        if rec.len() != header.len() {
            return Err(CsvFault::at(
                line,
                format!(
                    "expected {} fields ({want}), found {}",
                    header.len(),
                    rec.len()
                ),
            ));
        }
        row(line, &rec)?;
    }
    // The reader stops one byte past the limit: reaching it means the file is larger.
    if reader.position().byte() > CSV_FILE_BYTES {
        return Err(CsvFault::at(
            0,
            format!(
                "larger than {}, the most tpusim reads of a prediction CSV",
                size_text(CSV_FILE_BYTES)
            ),
        ));
    }
    if !seen_header {
        return Err(CsvFault::at(
            0,
            format!("empty (expected the header '{want}')"),
        ));
    }
    Ok(())
}

/// A reader that fails at the first NUL byte: no text file holds one, and binary data
/// (`/dev/zero`) would otherwise make one endless CSV field.
struct NoNul<R> {
    inner: R,
    at: u64,
}

impl<R: std::io::Read> std::io::Read for NoNul<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(i) = memchr::memchr(0, &buf[..n]) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "binary data, not CSV text (a NUL byte at byte {})",
                    self.at + i as u64
                ),
            ));
        }
        self.at += n as u64;
        Ok(n)
    }
}
