//! Located errors: `FILE:LINE:COL: error: message`, followed by the offending line.

use std::fmt;

/// An error at a position of an HLO source text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HloError {
    pub file: String,
    /// 1-based line and column (0 when unknown).
    pub line: usize,
    pub col: usize,
    pub message: String,
    /// The offending source line (may be empty).
    pub source_line: String,
}

impl HloError {
    /// An error at a byte offset of `src`.
    pub fn at(file: &str, src: &str, offset: usize, message: impl Into<String>) -> Self {
        let offset = offset.min(src.len());
        let before = &src.as_bytes()[..offset];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map(|p| p + 1)
            .unwrap_or(0);
        let line_end = src[offset..]
            .find('\n')
            .map(|p| offset + p)
            .unwrap_or(src.len());
        // Column in characters, not bytes.
        let col = src
            .get(line_start..offset)
            .map(|s| s.chars().count())
            .unwrap_or(0)
            + 1;
        let mut source_line = src.get(line_start..line_end).unwrap_or("").to_string();
        if source_line.len() > 240 {
            let mut cut = 240;
            while !source_line.is_char_boundary(cut) {
                cut -= 1;
            }
            source_line.truncate(cut);
            source_line.push_str(" ...");
        }
        HloError {
            file: file.to_string(),
            line,
            col,
            message: message.into(),
            source_line,
        }
    }

    /// An error at a 1-based line and column of `src` (0 = unknown: no position).
    pub fn at_line_col(
        file: &str,
        src: &str,
        line: usize,
        col: usize,
        message: impl Into<String>,
    ) -> Self {
        if line == 0 {
            return Self::whole_file(file, message);
        }
        let offset = src
            .split_inclusive('\n')
            .take(line - 1)
            .map(str::len)
            .sum::<usize>();
        let in_line = src[offset.min(src.len())..]
            .char_indices()
            .nth(col.saturating_sub(1))
            .map_or(0, |(b, _)| b);
        Self::at(file, src, offset + in_line, message)
    }

    /// An error without a position inside the text.
    pub fn whole_file(file: &str, message: impl Into<String>) -> Self {
        HloError {
            file: file.to_string(),
            line: 0,
            col: 0,
            message: message.into(),
            source_line: String::new(),
        }
    }
}

impl fmt::Display for HloError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "{}:{}:{}: error: {}",
                self.file, self.line, self.col, self.message
            )?;
            if !self.source_line.is_empty() {
                let caret_pad: String = self
                    .source_line
                    .chars()
                    .take(self.col.saturating_sub(1))
                    .map(|c| if c == '\t' { '\t' } else { ' ' })
                    .collect();
                write!(f, "\n  {}\n  {}^", self.source_line, caret_pad)?;
            }
            Ok(())
        } else {
            write!(f, "{}: error: {}", self.file, self.message)
        }
    }
}

impl std::error::Error for HloError {}
