//! Small typed parsers for attribute values that the grammar captures as raw text
//! (`dimensions={..}`, `window={..}`, `dim_labels=..`, `slice={..}`, `padding=..`, ...).
//! Errors carry the byte offset inside the value so callers can locate them.

use smallvec::SmallVec;

use crate::ir::{ConvDims, Dims, PadDim, SliceDim, Window, WindowDim};

/// An error at a byte offset inside an attribute value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueError {
    pub offset: usize,
    pub message: String,
}

type R<T> = Result<T, ValueError>;

/// A cursor over attribute-value text.
pub struct Cursor<'a> {
    s: &'a [u8],
    text: &'a str,
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str) -> Self {
        Cursor {
            s: text.as_bytes(),
            text,
            pos: 0,
        }
    }

    pub fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(ValueError {
            offset: self.pos,
            message: msg.into(),
        })
    }

    pub fn skip_ws(&mut self) {
        while self.pos < self.s.len() {
            match self.s[self.pos] {
                b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                b'/' if self.s.get(self.pos + 1) == Some(&b'*') => {
                    match self.text[self.pos + 2..].find("*/") {
                        Some(p) => self.pos += p + 4,
                        None => self.pos = self.s.len(),
                    }
                }
                _ => break,
            }
        }
    }

    pub fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    pub fn peek_at(&self, k: usize) -> Option<u8> {
        self.s.get(self.pos + k).copied()
    }

    pub fn slice(&self, a: usize, b: usize) -> &'a str {
        self.text.get(a..b).unwrap_or("")
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.s.len()
    }

    /// Consume `c` (after whitespace) if present.
    pub fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub fn expect(&mut self, c: u8) -> R<()> {
        if self.eat(c) {
            Ok(())
        } else {
            self.err(format!("expected '{}'", c as char))
        }
    }

    pub fn eat_str(&mut self, t: &str) -> bool {
        self.skip_ws();
        if self.text[self.pos..].starts_with(t) {
            self.pos += t.len();
            true
        } else {
            false
        }
    }

    pub fn int(&mut self) -> R<i64> {
        self.skip_ws();
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let digits = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if self.pos == digits {
            self.pos = start;
            return self.err("expected an integer");
        }
        let t = &self.text[start..self.pos];
        match t.parse::<i64>() {
            Ok(v) => Ok(v),
            // XLA accepts the u64 range and stores the bits.
            Err(_) => match t.parse::<u64>() {
                Ok(v) => Ok(v as i64),
                Err(_) => {
                    self.pos = start;
                    self.err(format!("integer '{t}' out of range"))
                }
            },
        }
    }

    /// An identifier-like word (`[A-Za-z0-9_.%-]+`).
    pub fn word(&mut self) -> R<&'a str> {
        self.skip_ws();
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'%'))
        {
            self.pos += 1;
        }
        if self.pos == start {
            return self.err("expected a name");
        }
        Ok(&self.text[start..self.pos])
    }

    pub fn finish(&mut self) -> R<()> {
        self.skip_ws();
        if self.at_end() {
            Ok(())
        } else {
            self.err("unexpected text after the attribute value")
        }
    }
}

/// `{1,2,3}` or `{}`.
pub fn int_list(text: &str) -> R<Dims> {
    let mut c = Cursor::new(text);
    let v = int_list_at(&mut c)?;
    c.finish()?;
    Ok(v)
}

fn int_list_at(c: &mut Cursor) -> R<Dims> {
    c.expect(b'{')?;
    let mut v = Dims::new();
    if c.eat(b'}') {
        return Ok(v);
    }
    loop {
        v.push(c.int()?);
        if c.eat(b'}') {
            return Ok(v);
        }
        c.expect(b',')?;
    }
}

/// A single integer.
pub fn int(text: &str) -> R<i64> {
    let mut c = Cursor::new(text);
    let v = c.int()?;
    c.finish()?;
    Ok(v)
}

/// `true` / `false`.
pub fn boolean(text: &str) -> R<bool> {
    match text.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ValueError {
            offset: 0,
            message: "expected true or false".into(),
        }),
    }
}

/// A quoted string, unescaped (C escapes).
pub fn string(text: &str) -> R<String> {
    let t = text.trim();
    if t.len() < 2 || !t.starts_with('"') || !t.ends_with('"') {
        return Err(ValueError {
            offset: 0,
            message: "expected a quoted string".into(),
        });
    }
    Ok(unescape(&t[1..t.len() - 1]))
}

/// Undo C escapes (`\"`, `\\`, `\n`, `\t`, octal, hex).
pub fn unescape(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 >= b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        i += 1;
        match b[i] {
            b'n' => {
                out.push(b'\n');
                i += 1
            }
            b't' => {
                out.push(b'\t');
                i += 1
            }
            b'r' => {
                out.push(b'\r');
                i += 1
            }
            b'x' => {
                let mut v = 0u32;
                let mut j = i + 1;
                while j < b.len() && j < i + 3 && b[j].is_ascii_hexdigit() {
                    v = v * 16 + (b[j] as char).to_digit(16).unwrap_or(0);
                    j += 1;
                }
                out.push(v as u8);
                i = j;
            }
            b'0'..=b'7' => {
                let mut v = 0u32;
                let mut j = i;
                while j < b.len() && j < i + 3 && (b'0'..=b'7').contains(&b[j]) {
                    v = v * 8 + (b[j] - b'0') as u32;
                    j += 1;
                }
                out.push(v as u8);
                i = j;
            }
            other => {
                out.push(other);
                i += 1
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Escape a string for HLO text (inverse of [`unescape`] for printable text).
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            '\r' => o.push_str("\\r"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\x{:02x}", c as u32)),
            c => o.push(c),
        }
    }
    o
}

/// `AxB` or a single int.
fn dxd(c: &mut Cursor) -> R<SmallVec<[i64; 4]>> {
    let mut v = SmallVec::new();
    v.push(c.int()?);
    while c.peek() == Some(b'x') {
        c.pos += 1;
        v.push(c.int()?);
    }
    Ok(v)
}

/// `lo_hi` items joined by `x`.
fn pads(c: &mut Cursor) -> R<SmallVec<[(i64, i64); 4]>> {
    let mut v = SmallVec::new();
    loop {
        let lo = c.int()?;
        if c.peek() != Some(b'_') {
            return c.err("expected '_' in a low_high padding");
        }
        c.pos += 1;
        let hi = c.int()?;
        v.push((lo, hi));
        if c.peek() == Some(b'x') {
            c.pos += 1;
        } else {
            return Ok(v);
        }
    }
}

/// A window sub-attribute: name, offset of its value, values (pairs for `pad`).
type WindowField<'a> = (&'a str, usize, SmallVec<[(i64, i64); 4]>);

/// `window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=.. rhs_dilate=.. rhs_reversal=..}`.
pub fn window(text: &str) -> R<Window> {
    let mut c = Cursor::new(text);
    c.expect(b'{')?;
    let mut dims: Option<SmallVec<[WindowDim; 4]>> = None;
    let mut fields: Vec<WindowField> = Vec::new();
    loop {
        if c.eat(b'}') {
            break;
        }
        if c.eat(b',') {
            continue;
        }
        let start = c.pos;
        let key = c.word()?;
        c.expect(b'=')?;
        c.skip_ws();
        let at = c.pos;
        let vals: SmallVec<[(i64, i64); 4]> = if key == "pad" {
            pads(&mut c)?
        } else {
            dxd(&mut c)?.into_iter().map(|v| (v, 0)).collect()
        };
        match key {
            "size" => {
                dims = Some(
                    vals.iter()
                        .map(|&(v, _)| WindowDim {
                            size: v,
                            ..Default::default()
                        })
                        .collect(),
                )
            }
            "stride" | "pad" | "lhs_dilate" | "rhs_dilate" | "rhs_reversal" => {
                fields.push((key, at, vals))
            }
            _ => {
                c.pos = start;
                return c.err(format!("unknown window attribute '{key}'"));
            }
        }
    }
    c.finish()?;
    let mut dims = match dims {
        Some(d) => d,
        None if fields.is_empty() => SmallVec::new(),
        None => {
            return Err(ValueError {
                offset: 0,
                message: "window has no size".into(),
            })
        }
    };
    for (key, at, vals) in fields {
        if vals.len() != dims.len() {
            return Err(ValueError {
                offset: at,
                message: format!(
                    "window {key} has {} dims but size has {}",
                    vals.len(),
                    dims.len()
                ),
            });
        }
        for (d, (a, b)) in dims.iter_mut().zip(vals) {
            match key {
                "stride" => d.stride = a,
                "pad" => {
                    d.pad_low = a;
                    d.pad_high = b
                }
                "lhs_dilate" => d.base_dilation = a,
                "rhs_dilate" => d.window_dilation = a,
                _ => d.window_reversal = a != 0,
            }
        }
    }
    Ok(Window { dims })
}

/// `dim_labels=b01f_01io->b01f`.
pub fn dim_labels(text: &str) -> R<ConvDims> {
    let t = text.trim();
    let bad = |m: &str| {
        Err(ValueError {
            offset: 0,
            message: format!("bad dim_labels '{t}': {m}"),
        })
    };
    let (lhs, rest) = match t.split_once('_') {
        Some(x) => x,
        None => return bad("expected lhs_rhs->out"),
    };
    let (rhs, out) = match rest.split_once("->") {
        Some(x) => x,
        None => return bad("expected lhs_rhs->out"),
    };
    fn spatial(s: &str) -> Option<Dims> {
        let mut v: Vec<(u32, i64)> = Vec::new();
        for (i, ch) in s.chars().enumerate() {
            if let Some(d) = ch.to_digit(10) {
                v.push((d, i as i64));
            }
        }
        v.sort_unstable();
        for (k, (d, _)) in v.iter().enumerate() {
            if *d as usize != k {
                return None;
            }
        }
        Some(v.into_iter().map(|(_, i)| i).collect())
    }
    let pos = |s: &str, c: char| s.find(c).map(|p| p as i64);
    let (Some(ib), Some(ifeat)) = (pos(lhs, 'b'), pos(lhs, 'f')) else {
        return bad("lhs needs 'b' and 'f'");
    };
    let (Some(ki), Some(ko)) = (pos(rhs, 'i'), pos(rhs, 'o')) else {
        return bad("rhs needs 'i' and 'o'");
    };
    let (Some(ob), Some(of)) = (pos(out, 'b'), pos(out, 'f')) else {
        return bad("output needs 'b' and 'f'");
    };
    let (Some(is), Some(ks), Some(os)) = (spatial(lhs), spatial(rhs), spatial(out)) else {
        return bad("spatial dims must be numbered 0..n-1");
    };
    if is.len() != ks.len() || is.len() != os.len() {
        return bad("different numbers of spatial dims");
    }
    let valid = |s: &str, allowed: &str| {
        s.chars()
            .all(|c| c.is_ascii_digit() || c == '?' || allowed.contains(c))
    };
    if !valid(lhs, "bf") || !valid(rhs, "io") || !valid(out, "bf") {
        return bad("unexpected label character");
    }
    Ok(ConvDims {
        input_batch: ib,
        input_feature: ifeat,
        input_spatial: is,
        kernel_input_feature: ki,
        kernel_output_feature: ko,
        kernel_spatial: ks,
        output_batch: ob,
        output_feature: of,
        output_spatial: os,
        ranks: [lhs.len() as u8, rhs.len() as u8, out.len() as u8],
    })
}

/// `slice={[0:10:1], [2:5]}`.
pub fn slice(text: &str) -> R<SmallVec<[SliceDim; 4]>> {
    let mut c = Cursor::new(text);
    c.expect(b'{')?;
    let mut v = SmallVec::new();
    if c.eat(b'}') {
        c.finish()?;
        return Ok(v);
    }
    loop {
        c.expect(b'[')?;
        let start = c.int()?;
        c.expect(b':')?;
        let limit = c.int()?;
        let stride = if c.eat(b':') { c.int()? } else { 1 };
        c.expect(b']')?;
        v.push(SliceDim {
            start,
            limit,
            stride,
        });
        if c.eat(b'}') {
            break;
        }
        c.expect(b',')?;
    }
    c.finish()?;
    Ok(v)
}

/// `padding=0_0x1_1_2` (low_high[_interior] per dim).
pub fn padding(text: &str) -> R<SmallVec<[PadDim; 4]>> {
    let mut c = Cursor::new(text);
    let mut v = SmallVec::new();
    loop {
        let low = c.int()?;
        if !c.eat(b'_') {
            return c.err("expected '_' in padding");
        }
        let high = c.int()?;
        let interior = if c.peek() == Some(b'_') {
            c.pos += 1;
            c.int()?
        } else {
            0
        };
        v.push(PadDim {
            low,
            high,
            interior,
        });
        if c.peek() == Some(b'x') {
            c.pos += 1;
        } else {
            break;
        }
    }
    c.finish()?;
    Ok(v)
}

/// A name or `{name, name}` list (computations, control predecessors). `%` is stripped.
pub fn name_list(text: &str) -> R<Vec<(usize, &str)>> {
    let mut c = Cursor::new(text);
    let mut v = Vec::new();
    c.skip_ws();
    if c.eat(b'{') {
        if c.eat(b'}') {
            c.finish()?;
            return Ok(v);
        }
        loop {
            c.skip_ws();
            let at = c.pos;
            let w = c.word()?;
            v.push((at, w.strip_prefix('%').unwrap_or(w)));
            if c.eat(b'}') {
                break;
            }
            c.expect(b',')?;
        }
    } else {
        let at = c.pos;
        let w = c.word()?;
        v.push((at, w.strip_prefix('%').unwrap_or(w)));
    }
    c.finish()?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_window() {
        let w = window("{size=3x3 stride=2x2 pad=0_1x1_1 rhs_dilate=1x2}").unwrap();
        assert_eq!(w.dims.len(), 2);
        assert_eq!(w.dims[0].size, 3);
        assert_eq!(w.dims[0].stride, 2);
        assert_eq!((w.dims[0].pad_low, w.dims[0].pad_high), (0, 1));
        assert_eq!(w.dims[1].window_dilation, 2);
        assert!(window("{size=3x3 stride=2}").is_err());
    }

    #[test]
    fn parses_dim_labels() {
        let d = dim_labels("b01f_01io->b01f").unwrap();
        assert_eq!((d.input_batch, d.input_feature), (0, 3));
        assert_eq!(d.input_spatial.as_slice(), &[1, 2]);
        assert_eq!((d.kernel_input_feature, d.kernel_output_feature), (2, 3));
        assert_eq!(d.kernel_spatial.as_slice(), &[0, 1]);
        let d = dim_labels("bf0_0io->bf0").unwrap();
        assert_eq!(d.input_spatial.as_slice(), &[2]);
        assert!(dim_labels("b01_01io->b01f").is_err());
    }

    #[test]
    fn parses_slice_and_padding() {
        let s = slice("{[0:10:2], [2:5]}").unwrap();
        assert_eq!(s[0].stride, 2);
        assert_eq!(s[1].limit, 5);
        let p = padding("0_0x1_-1_2").unwrap();
        assert_eq!(p[1].high, -1);
        assert_eq!(p[1].interior, 2);
    }

    #[test]
    fn escapes_round_trip() {
        let s = "a\"b\\c\nd";
        assert_eq!(unescape(&escape(s)), s);
    }
}
