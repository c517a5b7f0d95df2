//! NPY / NPZ input and output for TpuGraphs files.
//!
//! * [`NpyArray`]: a typed, C-ordered, little-endian array with its shape.
//! * [`NpzWriter`]: writes an `.npz` (a ZIP of `<key>.npy` members) to a
//!   temporary file in the target folder and renames it into place on
//!   [`NpzWriter::finish`]. Members are stored (no compression) by default;
//!   ZIP64 is switched on per member when it, or the archive, passes 4 GiB.
//!   Large arrays can be streamed with [`NpzWriter::begin_array`].
//! * [`NpzReader`]: reads stored or deflated members, NPY versions 1.0, 2.0
//!   and 3.0, little-endian C-order arrays of the five dtypes TpuGraphs uses.
//!   Bad input gives an [`NpzError`] naming the file and member; it never
//!   panics and never allocates more than the archive can hold.
//! * [`summarize_npz`]: counts and schema check of a TpuGraphs file
//!   (spec `tpugraphs_format.md` §1 and §7), backing `tpusim inspect`.
//!
//! NPY headers are written exactly as NumPy's `np.save` writes them
//! (`{'descr': '<f4', 'fortran_order': False, 'shape': (n, 140), }`, the
//! same spare spaces for growth, space padding and a final `\n` so the data
//! start is 64-byte aligned), so a member's bytes equal `np.save` output.

use std::collections::BTreeSet;
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use indexmap::IndexMap;
use serde::Serialize;
use zip::result::ZipError;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipArchive, ZipWriter};

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// Everything that can go wrong reading or writing NPY/NPZ data.
#[derive(Debug, thiserror::Error)]
pub enum NpzError {
    /// An operating-system I/O error on `path`.
    #[error("{path}: {op}: {err}")]
    Io {
        /// File concerned.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// Underlying error (in the message, so not a `source`: one line says it all).
        err: io::Error,
    },
    /// The ZIP container itself is unreadable.
    #[error("{path}: not a readable npz/zip archive: {err}")]
    Zip {
        /// File concerned.
        path: PathBuf,
        /// Underlying error.
        err: ZipError,
    },
    /// The ZIP container could not be written (other than an I/O error, which is
    /// [`NpzError::Io`]).
    #[error("{path}: writing the npz archive: {err}")]
    ZipWrite {
        /// Output file concerned.
        path: PathBuf,
        /// Underlying error.
        err: ZipError,
    },
    /// A member is not a valid NPY array (bad magic, header, dtype, size, CRC...).
    #[error("{path}: member '{member}': {reason}")]
    Member {
        /// File concerned.
        path: PathBuf,
        /// Member name inside the archive.
        member: String,
        /// What is wrong.
        reason: String,
    },
    /// A requested array is not in the archive.
    #[error("{path}: no array named '{name}' (members: {available})")]
    MissingArray {
        /// File concerned.
        path: PathBuf,
        /// Array name asked for.
        name: String,
        /// Comma-separated list of the member names present.
        available: String,
    },
    /// Shape and data length disagree, or the shape overflows.
    #[error("array shape {shape:?} needs {expected} elements but {actual} were given")]
    ShapeMismatch {
        /// Shape given.
        shape: Vec<usize>,
        /// Product of the shape (saturated at `u64::MAX`).
        expected: u64,
        /// Number of elements supplied.
        actual: u64,
    },
    /// The writer was used wrongly (duplicate name, wrong dtype, incomplete
    /// streamed array, use after a failure).
    #[error("{path}: {reason}")]
    Writer {
        /// Output file concerned.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Result alias for this module.
pub type Result<T, E = NpzError> = std::result::Result<T, E>;

// ---------------------------------------------------------------------------
// Dtypes and arrays
// ---------------------------------------------------------------------------

/// The element types TpuGraphs files use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// `<f4`, float32.
    F32,
    /// `<f8`, float64.
    F64,
    /// `<i4`, int32.
    I32,
    /// `<i8`, int64.
    I64,
    /// `|u1`, uint8.
    U8,
}

impl DType {
    /// NumPy descriptor string written in NPY headers (`<f4`, `|u1`, ...).
    pub fn descr(self) -> &'static str {
        match self {
            DType::F32 => "<f4",
            DType::F64 => "<f8",
            DType::I32 => "<i4",
            DType::I64 => "<i8",
            DType::U8 => "|u1",
        }
    }

    /// NumPy dtype name (`float32`, `uint8`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::U8 => 1,
        }
    }

    /// Parses a descriptor. Accepts the little-endian (`<`), not-applicable
    /// (`|`) and native (`=`, this crate only supports little-endian hosts'
    /// files) byte-order marks. Big-endian and other types give `Err` with a
    /// reason.
    pub fn from_descr(descr: &str) -> Result<DType, NpyHeaderError> {
        let (order, code) = match descr.as_bytes().first() {
            Some(b'<' | b'|' | b'=' | b'>') => descr.split_at(1),
            _ => ("", descr),
        };
        let dt = match code {
            "f4" => DType::F32,
            "f8" => DType::F64,
            "i4" => DType::I32,
            "i8" => DType::I64,
            "u1" => DType::U8,
            _ => {
                return Err(NpyHeaderError(format!(
                    "unsupported dtype descriptor '{descr}' (supported: <f4 <f8 <i4 <i8 |u1)"
                )))
            }
        };
        if order == ">" && dt != DType::U8 {
            return Err(NpyHeaderError(format!(
                "big-endian dtype '{descr}' is not supported"
            )));
        }
        Ok(dt)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The element buffer of an [`NpyArray`], one variant per dtype.
#[derive(Debug, Clone, PartialEq)]
pub enum ArrayData {
    /// float32 elements.
    F32(Vec<f32>),
    /// float64 elements.
    F64(Vec<f64>),
    /// int32 elements.
    I32(Vec<i32>),
    /// int64 elements.
    I64(Vec<i64>),
    /// uint8 elements.
    U8(Vec<u8>),
}

impl ArrayData {
    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        match self {
            ArrayData::F32(_) => DType::F32,
            ArrayData::F64(_) => DType::F64,
            ArrayData::I32(_) => DType::I32,
            ArrayData::I64(_) => DType::I64,
            ArrayData::U8(_) => DType::U8,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            ArrayData::F32(v) => v.len(),
            ArrayData::F64(v) => v.len(),
            ArrayData::I32(v) => v.len(),
            ArrayData::I64(v) => v.len(),
            ArrayData::U8(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` converted to f64 (`None` when out of range). Integers
    /// beyond 2^53 lose precision.
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        match self {
            ArrayData::F32(v) => v.get(i).map(|&x| f64::from(x)),
            ArrayData::F64(v) => v.get(i).copied(),
            ArrayData::I32(v) => v.get(i).map(|&x| f64::from(x)),
            ArrayData::I64(v) => v.get(i).map(|&x| x as f64),
            ArrayData::U8(v) => v.get(i).map(|&x| f64::from(x)),
        }
    }

    /// All elements as i64 when the dtype is an integer type, else `None`.
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        match self {
            ArrayData::I32(v) => Some(v.iter().map(|&x| i64::from(x)).collect()),
            ArrayData::I64(v) => Some(v.clone()),
            ArrayData::U8(v) => Some(v.iter().map(|&x| i64::from(x)).collect()),
            ArrayData::F32(_) | ArrayData::F64(_) => None,
        }
    }

    /// All elements converted to f64.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self {
            ArrayData::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            ArrayData::F64(v) => v.clone(),
            ArrayData::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            ArrayData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            ArrayData::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
        }
    }
}

/// Element types that can live in an [`NpyArray`]. Sealed: implemented for
/// `f32`, `f64`, `i32`, `i64` and `u8`.
pub trait NpyElement: Copy + sealed::Sealed + 'static {
    /// The NPY dtype of this Rust type.
    const DTYPE: DType;
    /// Appends the little-endian bytes of `values` to `out`.
    fn extend_le_bytes(values: &[Self], out: &mut Vec<u8>);
    /// Decodes whole little-endian elements from `bytes` (length a multiple
    /// of the element size) and appends them to `out`.
    fn extend_from_le_bytes(bytes: &[u8], out: &mut Vec<Self>);
    /// Wraps a vector into [`ArrayData`].
    fn into_data(values: Vec<Self>) -> ArrayData;
    /// Borrows the elements if `data` has this type.
    fn from_data(data: &ArrayData) -> Option<&[Self]>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
    impl Sealed for u8 {}
}

macro_rules! impl_element {
    ($t:ty, $dt:expr, $var:ident, $n:literal) => {
        impl NpyElement for $t {
            const DTYPE: DType = $dt;
            // Both directions write into storage sized up front, element by element
            // without a capacity check, a loop the compiler vectorises.
            fn extend_le_bytes(values: &[Self], out: &mut Vec<u8>) {
                let start = out.len();
                out.resize(start + values.len() * $n, 0);
                for (d, v) in out[start..].chunks_exact_mut($n).zip(values) {
                    d.copy_from_slice(&v.to_le_bytes());
                }
            }
            fn extend_from_le_bytes(bytes: &[u8], out: &mut Vec<Self>) {
                out.extend(bytes.chunks_exact($n).map(|c| {
                    let mut a = [0u8; $n];
                    a.copy_from_slice(c);
                    <$t>::from_le_bytes(a)
                }));
            }
            fn into_data(values: Vec<Self>) -> ArrayData {
                ArrayData::$var(values)
            }
            fn from_data(data: &ArrayData) -> Option<&[Self]> {
                match data {
                    ArrayData::$var(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}

impl_element!(f32, DType::F32, F32, 4);
impl_element!(f64, DType::F64, F64, 8);
impl_element!(i32, DType::I32, I32, 4);
impl_element!(i64, DType::I64, I64, 8);
impl_element!(u8, DType::U8, U8, 1);

/// Number of elements of `shape`, or `None` on overflow.
pub fn shape_elements(shape: &[usize]) -> Option<u64> {
    shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
}

/// A typed C-order array with its shape; the element count always equals
/// the product of the shape.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyArray {
    shape: Vec<usize>,
    data: ArrayData,
}

impl NpyArray {
    /// Builds an array, checking that `data` holds exactly `prod(shape)`
    /// elements.
    pub fn new(shape: Vec<usize>, data: ArrayData) -> Result<Self> {
        let expected = shape_elements(&shape).unwrap_or(u64::MAX);
        let actual = data.len() as u64;
        if expected != actual {
            return Err(NpzError::ShapeMismatch {
                shape,
                expected,
                actual,
            });
        }
        Ok(NpyArray { shape, data })
    }

    /// Builds an array from a typed vector (see [`NpyArray::new`]).
    pub fn from_vec<T: NpyElement>(shape: Vec<usize>, values: Vec<T>) -> Result<Self> {
        Self::new(shape, T::into_data(values))
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// The elements.
    pub fn data(&self) -> &ArrayData {
        &self.data
    }

    /// Consumes the array, returning shape and elements.
    pub fn into_parts(self) -> (Vec<usize>, ArrayData) {
        (self.shape, self.data)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Borrows the elements as `&[T]` if the dtype is `T`.
    pub fn as_slice<T: NpyElement>(&self) -> Option<&[T]> {
        T::from_data(&self.data)
    }

    /// Size of the raw data in bytes.
    pub fn nbytes(&self) -> u64 {
        self.data.len() as u64 * self.dtype().size() as u64
    }
}

// ---------------------------------------------------------------------------
// NPY header
// ---------------------------------------------------------------------------

/// NPY magic string.
const NPY_MAGIC: &[u8; 6] = b"\x93NUMPY";
/// NumPy's `ARRAY_ALIGN`.
const ARRAY_ALIGN: usize = 64;
/// NumPy's `GROWTH_AXIS_MAX_DIGITS` (spare header room for growing axis 0).
const GROWTH_AXIS_MAX_DIGITS: usize = 21;
/// Longest header this reader accepts (NumPy's default limit is 10,000).
const MAX_HEADER_LEN: usize = 1 << 20;

/// The parsed header of an NPY member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NpyHeader {
    /// Element type.
    pub dtype: DType,
    /// Shape (C order).
    pub shape: Vec<usize>,
    /// NPY format version `(major, minor)`.
    pub version: (u8, u8),
    /// Total header size in bytes (magic to the first data byte).
    pub header_len: usize,
}

impl NpyHeader {
    /// Number of elements, `None` on overflow.
    pub fn elements(&self) -> Option<u64> {
        shape_elements(&self.shape)
    }

    /// Data size in bytes, `None` on overflow.
    pub fn data_bytes(&self) -> Option<u64> {
        self.elements()?.checked_mul(self.dtype.size() as u64)
    }
}

/// Python `repr` of a shape tuple: `()`, `(5,)`, `(5, 140)`.
fn shape_repr(shape: &[usize]) -> String {
    match shape {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        _ => {
            let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            format!("({})", parts.join(", "))
        }
    }
}

/// Encodes the NPY header (magic, version, length, dict, padding) exactly
/// as NumPy's `np.save` does: version 1.0 unless the header needs more than
/// 65,535 bytes (then 2.0); the data start is 64-byte aligned.
pub fn encode_npy_header(dtype: DType, shape: &[usize]) -> Vec<u8> {
    let shape_s = shape_repr(shape);
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
        dtype.descr(),
        shape_s
    );
    if let Some(first) = shape.first() {
        let digits = first.to_string().len();
        dict.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(digits)));
    }
    let hlen = dict.len() + 1;
    let wrap = |len_bytes: usize| {
        let pre = NPY_MAGIC.len() + 2 + len_bytes;
        let pad = ARRAY_ALIGN - (pre + hlen) % ARRAY_ALIGN;
        (pad, hlen + pad)
    };
    let (pad, total) = wrap(2);
    let mut out = Vec::with_capacity(total + 12);
    out.extend_from_slice(NPY_MAGIC);
    if let Ok(total16) = u16::try_from(total) {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&total16.to_le_bytes());
        out.extend_from_slice(dict.as_bytes());
        out.extend(std::iter::repeat_n(b' ', pad));
    } else {
        let (pad, total) = wrap(4);
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(total as u32).to_le_bytes());
        out.extend_from_slice(dict.as_bytes());
        out.extend(std::iter::repeat_n(b' ', pad));
    }
    out.push(b'\n');
    out
}

/// Tokens of the Python-literal subset used in NPY headers.
#[derive(Debug, PartialEq)]
enum Tok {
    Str(String),
    Int(u64),
    Ident(String),
    Punct(char),
}

fn tokenize(s: &str) -> Result<Vec<Tok>, NpyHeaderError> {
    let mut toks = Vec::new();
    let mut it = s.char_indices().peekable();
    while let Some(&(_, c)) = it.peek() {
        if c.is_whitespace() {
            it.next();
        } else if c == '\'' || c == '"' {
            it.next();
            let mut val = String::new();
            let mut closed = false;
            for (_, d) in it.by_ref() {
                if d == c {
                    closed = true;
                    break;
                }
                val.push(d);
            }
            if !closed {
                return Err("unterminated string in header".into());
            }
            toks.push(Tok::Str(val));
        } else if c.is_ascii_digit() {
            let mut v: u64 = 0;
            while let Some(&(_, d)) = it.peek() {
                if let Some(dig) = d.to_digit(10) {
                    v = v
                        .checked_mul(10)
                        .and_then(|v| v.checked_add(u64::from(dig)))
                        .ok_or("integer in header overflows")?;
                    it.next();
                } else {
                    break;
                }
            }
            // Python 2 long suffix, e.g. `(3L, 4L)`.
            if let Some(&(_, 'L' | 'l')) = it.peek() {
                it.next();
            }
            toks.push(Tok::Int(v));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut id = String::new();
            while let Some(&(_, d)) = it.peek() {
                if d.is_ascii_alphanumeric() || d == '_' {
                    id.push(d);
                    it.next();
                } else {
                    break;
                }
            }
            toks.push(Tok::Ident(id));
        } else if "{}():,[]".contains(c) {
            toks.push(Tok::Punct(c));
            it.next();
        } else {
            return Err(NpyHeaderError(format!(
                "unexpected character {c:?} in header"
            )));
        }
    }
    Ok(toks)
}

/// Parses the header dictionary text (`{'descr': ..., 'fortran_order': ...,
/// 'shape': (...), }`).
fn parse_header_dict(text: &str) -> Result<(DType, bool, Vec<usize>), NpyHeaderError> {
    let toks = tokenize(text)?;
    let mut pos = 0usize;
    let next = |pos: &mut usize| -> Option<&Tok> {
        let t = toks.get(*pos);
        *pos += 1;
        t
    };
    if next(&mut pos) != Some(&Tok::Punct('{')) {
        return Err("header is not a dict".into());
    }
    let mut descr: Option<DType> = None;
    let mut fortran: Option<bool> = None;
    let mut shape: Option<Vec<usize>> = None;
    loop {
        let key = match next(&mut pos) {
            Some(Tok::Punct('}')) => break,
            Some(Tok::Str(k)) => k.clone(),
            other => {
                return Err(NpyHeaderError(format!(
                    "expected a key in header dict, found {other:?}"
                )))
            }
        };
        if next(&mut pos) != Some(&Tok::Punct(':')) {
            return Err(NpyHeaderError(format!("expected ':' after key '{key}'")));
        }
        match key.as_str() {
            "descr" => match next(&mut pos) {
                Some(Tok::Str(d)) => descr = Some(DType::from_descr(d)?),
                Some(Tok::Punct('[')) => {
                    return Err("structured dtypes are not supported".into());
                }
                other => return Err(NpyHeaderError(format!("bad 'descr' value {other:?}"))),
            },
            "fortran_order" => match next(&mut pos) {
                Some(Tok::Ident(b)) if b == "True" => fortran = Some(true),
                Some(Tok::Ident(b)) if b == "False" => fortran = Some(false),
                other => {
                    return Err(NpyHeaderError(format!(
                        "bad 'fortran_order' value {other:?}"
                    )))
                }
            },
            "shape" => {
                if next(&mut pos) != Some(&Tok::Punct('(')) {
                    return Err("'shape' is not a tuple".into());
                }
                let mut dims = Vec::new();
                loop {
                    match next(&mut pos) {
                        Some(Tok::Punct(')')) => break,
                        Some(Tok::Int(v)) => {
                            dims.push(usize::try_from(*v).map_err(|_| "dimension too large")?);
                            match next(&mut pos) {
                                Some(Tok::Punct(',')) => {}
                                Some(Tok::Punct(')')) => break,
                                other => {
                                    return Err(NpyHeaderError(format!(
                                        "bad token in shape: {other:?}"
                                    )))
                                }
                            }
                        }
                        other => {
                            return Err(NpyHeaderError(format!("bad token in shape: {other:?}")))
                        }
                    }
                }
                shape = Some(dims);
            }
            other => {
                return Err(NpyHeaderError(format!(
                    "unexpected key '{other}' in header"
                )))
            }
        }
        match next(&mut pos) {
            Some(Tok::Punct(',')) => {}
            Some(Tok::Punct('}')) => break,
            other => {
                return Err(NpyHeaderError(format!(
                    "expected ',' or '}}' in header, found {other:?}"
                )))
            }
        }
    }
    if pos != toks.len() {
        return Err("trailing text after header dict".into());
    }
    match (descr, fortran, shape) {
        (Some(d), Some(f), Some(s)) => Ok((d, f, s)),
        _ => Err("header lacks one of 'descr', 'fortran_order', 'shape'".into()),
    }
}

/// Why an NPY header could not be read (callers attach the file and member names).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NpyHeaderError(pub String);

impl From<&str> for NpyHeaderError {
    fn from(s: &str) -> Self {
        NpyHeaderError(s.to_string())
    }
}

/// Reads and parses an NPY header from `r` (positioned at the magic).
/// Returns `Err(reason)`; callers attach file and member names.
pub fn read_npy_header<R: Read>(r: &mut R) -> Result<NpyHeader, NpyHeaderError> {
    let mut pre = [0u8; 8];
    read_full(r, &mut pre).map_err(|e| NpyHeaderError(format!("cannot read NPY preamble: {e}")))?;
    if &pre[..6] != NPY_MAGIC {
        return Err("not an NPY array (bad magic)".into());
    }
    let version = (pre[6], pre[7]);
    let (len, prefix) = match version.0 {
        1 => {
            let mut b = [0u8; 2];
            read_full(r, &mut b)
                .map_err(|e| NpyHeaderError(format!("cannot read header length: {e}")))?;
            (usize::from(u16::from_le_bytes(b)), 10)
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            read_full(r, &mut b)
                .map_err(|e| NpyHeaderError(format!("cannot read header length: {e}")))?;
            let l = usize::try_from(u32::from_le_bytes(b)).unwrap_or(usize::MAX);
            (l, 12)
        }
        v => {
            return Err(NpyHeaderError(format!(
                "unsupported NPY version {v}.{}",
                version.1
            )))
        }
    };
    if len > MAX_HEADER_LEN {
        return Err(NpyHeaderError(format!(
            "NPY header of {len} bytes is too long"
        )));
    }
    let mut buf = vec![0u8; len];
    read_full(r, &mut buf).map_err(|e| NpyHeaderError(format!("cannot read NPY header: {e}")))?;
    let text = if version.0 == 3 {
        String::from_utf8(buf).map_err(|_| NpyHeaderError::from("NPY 3.0 header is not UTF-8"))?
    } else {
        buf.iter().map(|&b| char::from(b)).collect()
    };
    let (dtype, fortran, shape) = parse_header_dict(&text)?;
    if fortran && shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Err("Fortran-order arrays are not supported".into());
    }
    // Checked: a shape whose size wraps past 2^64 bytes is not believed.
    if shape_elements(&shape)
        .and_then(|n| n.checked_mul(dtype.size() as u64))
        .is_none()
    {
        return Err(NpyHeaderError(format!(
            "shape {} of {dtype} needs more than 2^64 bytes",
            shape_repr(&shape)
        )));
    }
    Ok(NpyHeader {
        dtype,
        shape,
        version,
        header_len: prefix + len,
    })
}

/// Reads until `buf` is full; fails with `UnexpectedEof` if the data ends.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("data ends after {got} of {} bytes", buf.len()),
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Fills as much of `buf` as the reader provides; returns the count (less
/// than `buf.len()` only at end of data).
fn read_some<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

// ---------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------

/// How members are stored in the ZIP container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// No compression, like `np.savez` (the default).
    #[default]
    Stored,
    /// Deflate, like `np.savez_compressed`.
    Deflated,
}

/// Members at or above this many bytes get ZIP64 size fields.
const ZIP64_MEMBER_THRESHOLD: u64 = u32::MAX as u64;
/// Elements converted per write call when streaming.
const WRITE_CHUNK_BYTES: usize = 1 << 20;

/// Writes an `.npz` archive atomically: data go to a hidden temporary file
/// in the destination folder, [`NpzWriter::finish`] syncs and renames it.
/// Dropping an unfinished writer deletes the temporary file.
///
/// Output bytes depend only on the arrays written, their order and the
/// [`Compression`] (timestamps are fixed to 1980-01-01), so equal inputs give
/// byte-identical files.
pub struct NpzWriter {
    zip: Option<ZipWriter<Sink>>,
    /// Shared with the [`Sink`]: set when the archive is abandoned.
    discard: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The temporary file (None once renamed into place).
    out: Option<crate::atomic::AtomicFile>,
    final_path: PathBuf,
    compression: Compression,
    names: BTreeSet<String>,
    /// The streamed array being written, if one is open.
    open: Option<OpenArray>,
    /// Set after any failure; every later call fails with this reason.
    failed: Option<String>,
    buf: Vec<u8>,
}

impl fmt::Debug for NpzWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NpzWriter")
            .field("final_path", &self.final_path)
            .field("out", &self.out)
            .field("compression", &self.compression)
            .field("members", &self.names)
            .finish()
    }
}

impl NpzWriter {
    /// Starts a stored (uncompressed) archive that will become `path`.
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        Self::create_with(path, Compression::Stored)
    }

    /// Starts an archive with the given member compression.
    pub fn create_with(path: impl AsRef<Path>, compression: Compression) -> Result<Self> {
        let final_path = path.as_ref().to_path_buf();
        let out = crate::atomic::AtomicFile::create(&final_path).map_err(|err| NpzError::Io {
            path: final_path.clone(),
            op: "create temporary file",
            err,
        })?;
        let file = out.file_handle().map_err(|err| NpzError::Io {
            path: final_path.clone(),
            op: "create temporary file",
            err,
        })?;
        let discard = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let zip = ZipWriter::new(Sink::new(
            BufWriter::with_capacity(1 << 20, file),
            discard.clone(),
        ));
        Ok(NpzWriter {
            zip: Some(zip),
            discard,
            out: Some(out),
            final_path,
            compression,
            names: BTreeSet::new(),
            open: None,
            failed: None,
            buf: Vec::new(),
        })
    }

    /// Final path of the archive.
    pub fn path(&self) -> &Path {
        &self.final_path
    }

    fn usage(&self, reason: impl Into<String>) -> NpzError {
        NpzError::Writer {
            path: self.final_path.clone(),
            reason: reason.into(),
        }
    }

    fn check_ready(&self) -> Result<()> {
        if let Some(f) = &self.failed {
            return Err(self.usage(format!("writer unusable after an earlier error: {f}")));
        }
        if let Some(a) = &self.open {
            return Err(self.usage(format!(
                "streamed array '{}' was not completed (ArrayWriter::finish not called)",
                a.member
            )));
        }
        Ok(())
    }

    fn fail<T>(&mut self, err: NpzError) -> Result<T> {
        self.failed = Some(err.to_string());
        Err(err)
    }

    /// Errors while writing name the file being made (its temporary file goes away).
    fn zip_err(&self, err: ZipError) -> NpzError {
        match err {
            ZipError::Io(e) => self.io_err("write archive", e),
            err => NpzError::ZipWrite {
                path: self.final_path.clone(),
                err,
            },
        }
    }

    fn io_err(&self, op: &'static str, err: io::Error) -> NpzError {
        NpzError::Io {
            path: self.final_path.clone(),
            op,
            err,
        }
    }

    /// Starts member `name` (`.npy` appended unless present) and writes its
    /// NPY header. Returns the member name and data size in bytes.
    fn start_member(&mut self, name: &str, dtype: DType, shape: &[usize]) -> Result<(String, u64)> {
        self.check_ready()?;
        let member = if name.ends_with(".npy") {
            name.to_string()
        } else {
            format!("{name}.npy")
        };
        if member == ".npy" {
            return Err(self.usage("array name is empty"));
        }
        if self.names.contains(&member) {
            return Err(self.usage(format!("array '{member}' written twice")));
        }
        let data_bytes = shape_elements(shape)
            .and_then(|n| n.checked_mul(dtype.size() as u64))
            .ok_or_else(|| self.usage(format!("shape {shape:?} of '{member}' overflows")))?;
        let header = encode_npy_header(dtype, shape);
        let total = data_bytes + header.len() as u64;
        // Deflate can grow incompressible data slightly; keep a margin.
        let large = total.saturating_add(total / 1000 + 4096) >= ZIP64_MEMBER_THRESHOLD;
        let method = match self.compression {
            Compression::Stored => CompressionMethod::Stored,
            Compression::Deflated => CompressionMethod::Deflated,
        };
        let options = SimpleFileOptions::default()
            .compression_method(method)
            .last_modified_time(DateTime::default())
            .unix_permissions(0o644)
            .large_file(large);
        let Some(zip) = self.zip.as_mut() else {
            return Err(self.usage("writer already finished"));
        };
        if let Err(e) = zip.start_file(member.as_str(), options) {
            let err = self.zip_err(e);
            return self.fail(err);
        }
        if let Err(e) = zip.write_all(&header) {
            let err = self.io_err("write npy header", e);
            return self.fail(err);
        }
        self.names.insert(member.clone());
        Ok((member, data_bytes))
    }

    fn write_elements<T: NpyElement>(&mut self, values: &[T]) -> Result<()> {
        let per = (WRITE_CHUNK_BYTES / T::DTYPE.size()).max(1);
        let mut buf = std::mem::take(&mut self.buf);
        let mut result = Ok(());
        for chunk in values.chunks(per) {
            buf.clear();
            T::extend_le_bytes(chunk, &mut buf);
            let w = match self.zip.as_mut() {
                Some(z) => z.write_all(&buf),
                None => Err(io::Error::other("writer already finished")),
            };
            if let Err(e) = w {
                result = Err(self.io_err("write array data", e));
                break;
            }
        }
        self.buf = buf;
        match result {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    /// Adds a whole array as member `<name>.npy`.
    pub fn add_array(&mut self, name: &str, array: &NpyArray) -> Result<()> {
        self.start_member(name, array.dtype(), array.shape())?;
        match array.data() {
            ArrayData::F32(v) => self.write_elements(v),
            ArrayData::F64(v) => self.write_elements(v),
            ArrayData::I32(v) => self.write_elements(v),
            ArrayData::I64(v) => self.write_elements(v),
            ArrayData::U8(v) => self.write_elements(v),
        }
    }

    /// Adds an array from a typed slice and shape (no copy into an
    /// [`NpyArray`] needed).
    pub fn add_slice<T: NpyElement>(
        &mut self,
        name: &str,
        shape: &[usize],
        values: &[T],
    ) -> Result<()> {
        let expected = shape_elements(shape).unwrap_or(u64::MAX);
        if expected != values.len() as u64 {
            return Err(NpzError::ShapeMismatch {
                shape: shape.to_vec(),
                expected,
                actual: values.len() as u64,
            });
        }
        self.start_member(name, T::DTYPE, shape)?;
        self.write_elements(values)
    }

    /// Starts a streamed array: the header with the final `shape` is written
    /// now, the elements follow in any number of [`ArrayWriter::write`]
    /// calls (C order), and [`ArrayWriter::finish`] checks that exactly
    /// `prod(shape)` elements arrived. No other member can be added while
    /// it is open; an array left incomplete makes the writer unusable.
    pub fn begin_array(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
    ) -> Result<ArrayWriter<'_>> {
        self.begin_streamed(name, dtype, shape)?;
        Ok(ArrayWriter { writer: self })
    }

    /// [`NpzWriter::begin_array`] without the borrow: the array stays open in the writer
    /// ([`NpzWriter::write_streamed`], [`NpzWriter::end_streamed`]), so that it can be
    /// filled by whoever holds the writer, a piece at a time.
    pub fn begin_streamed(&mut self, name: &str, dtype: DType, shape: &[usize]) -> Result<()> {
        let (member, bytes) = self.start_member(name, dtype, shape)?;
        self.open = Some(OpenArray {
            member,
            dtype,
            remaining: bytes / dtype.size() as u64,
        });
        Ok(())
    }

    /// Appends elements (C order) to the open streamed array. `T` must match the
    /// declared dtype and the total must not exceed the declared shape.
    pub fn write_streamed<T: NpyElement>(&mut self, values: &[T]) -> Result<()> {
        let Some(a) = &self.open else {
            return Err(self.usage("no streamed array is open"));
        };
        if T::DTYPE != a.dtype {
            return Err(self.usage(format!(
                "array '{}' is {} but {} elements were written",
                a.member,
                a.dtype,
                T::DTYPE
            )));
        }
        let n = values.len() as u64;
        if n > a.remaining {
            return Err(self.usage(format!(
                "array '{}': {} elements written but only {} remain in the declared shape",
                a.member, n, a.remaining
            )));
        }
        self.write_elements(values)?;
        if let Some(a) = &mut self.open {
            a.remaining -= n;
        }
        Ok(())
    }

    /// Elements the open streamed array still expects (0 when none is open).
    pub fn streamed_remaining(&self) -> u64 {
        self.open.as_ref().map_or(0, |a| a.remaining)
    }

    /// Completes the open streamed array; fails if elements are missing.
    pub fn end_streamed(&mut self) -> Result<()> {
        match &self.open {
            None => Err(self.usage("no streamed array is open")),
            Some(a) if a.remaining != 0 => {
                let err = self.usage(format!(
                    "array '{}' finished with {} elements missing",
                    a.member, a.remaining
                ));
                self.fail(err)
            }
            Some(_) => {
                self.open = None;
                Ok(())
            }
        }
    }

    /// Writes the ZIP directory, syncs the file and renames it to the final
    /// path. On error the temporary file is removed.
    pub fn finish(mut self) -> Result<PathBuf> {
        self.seal()?;
        self.rename_into_place()
    }

    /// Like [`NpzWriter::finish`], but the complete temporary file must first pass the
    /// TpuGraphs schema check of [`summarize_npz`] (the one `tpusim inspect` reports): a
    /// file that breaks it is deleted, never renamed into place, and the error lists
    /// every violation.
    pub fn finish_valid(mut self) -> Result<PathBuf> {
        self.seal()?;
        let tmp = match &self.out {
            Some(o) => o.temporary_path().to_path_buf(),
            None => return Err(self.usage("writer already finished")),
        };
        let summary = summarize_npz(&tmp)?;
        if !summary.violations.is_empty() {
            return Err(self.usage(format!(
                "the written file breaks the TpuGraphs schema, so it was not kept: {}",
                summary.violations.join("; ")
            )));
        }
        self.rename_into_place()
    }

    /// Writes the central directory and syncs the temporary file.
    fn seal(&mut self) -> Result<()> {
        self.check_ready()?;
        let Some(zip) = self.zip.take() else {
            return Err(self.usage("writer already finished"));
        };
        let sink = zip.finish().map_err(|e| self.zip_err(e))?;
        let file = sink
            .inner
            .into_inner()
            .map_err(|e| self.io_err("flush archive", e.into_error()))?;
        file.sync_all()
            .map_err(|e| self.io_err("sync archive", e))?;
        Ok(())
    }

    fn rename_into_place(mut self) -> Result<PathBuf> {
        let Some(out) = self.out.take() else {
            return Err(self.usage("writer already finished"));
        };
        out.commit().map_err(|err| NpzError::Io {
            path: self.final_path.clone(),
            op: "rename temporary file into place",
            err,
        })?;
        Ok(self.final_path.clone())
    }
}

impl Drop for NpzWriter {
    fn drop(&mut self) {
        if self.out.is_some() {
            // ZipWriter's own Drop finalises the archive (and prints any error of
            // that): into a sink that now discards, since the file goes away with
            // `out`.
            self.discard.store(true, Ordering::Relaxed);
            drop(self.zip.take());
        }
    }
}

/// The writer under an [`NpzWriter`]'s ZIP writer: the temporary file, until the first
/// I/O error or until the archive is abandoned; from then on writes and seeks only move
/// a cursor (the ZIP writer sees a consistent file, nothing more is written), so that the
/// ZIP writer's drop has no error to print: the first error is the one reported.
struct Sink {
    inner: BufWriter<File>,
    discard: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Position and length as the ZIP writer sees them.
    pos: u64,
    len: u64,
}

impl Sink {
    fn new(inner: BufWriter<File>, discard: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Self {
        Sink {
            inner,
            discard,
            pos: 0,
            len: 0,
        }
    }

    fn discarding(&self) -> bool {
        self.discard.load(Ordering::Relaxed)
    }

    fn failed<T>(&self, r: io::Result<T>) -> io::Result<T> {
        if r.is_err() {
            self.discard.store(true, Ordering::Relaxed);
        }
        r
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = if self.discarding() {
            buf.len()
        } else {
            let r = self.inner.write(buf);
            self.failed(r)?
        };
        self.pos += n as u64;
        self.len = self.len.max(self.pos);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        if self.discarding() {
            return Ok(());
        }
        let r = self.inner.flush();
        self.failed(r)
    }
}

impl Seek for Sink {
    fn seek(&mut self, to: io::SeekFrom) -> io::Result<u64> {
        if !self.discarding() {
            let r = self.inner.seek(to);
            self.pos = self.failed(r)?;
            self.len = self.len.max(self.pos);
            return Ok(self.pos);
        }
        let base = match to {
            io::SeekFrom::Start(n) => Some(n),
            io::SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            io::SeekFrom::End(d) => self.len.checked_add_signed(d),
        };
        self.pos = base.ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        Ok(self.pos)
    }
}

/// A streamed array of an [`NpzWriter`]: its member name, dtype and the elements it
/// still expects.
#[derive(Debug)]
struct OpenArray {
    member: String,
    dtype: DType,
    remaining: u64,
}

/// An array being streamed into an [`NpzWriter`]; see
/// [`NpzWriter::begin_array`].
#[derive(Debug)]
pub struct ArrayWriter<'a> {
    writer: &'a mut NpzWriter,
}

impl ArrayWriter<'_> {
    /// Appends elements (C order). `T` must match the declared dtype and the
    /// total must not exceed the declared shape.
    pub fn write<T: NpyElement>(&mut self, values: &[T]) -> Result<()> {
        self.writer.write_streamed(values)
    }

    /// Elements still expected.
    pub fn remaining(&self) -> u64 {
        self.writer.streamed_remaining()
    }

    /// Completes the array; fails if elements are missing.
    pub fn finish(self) -> Result<()> {
        self.writer.end_streamed()
    }
}

/// Writes `arrays` (name, array) to `path` atomically.
pub fn write_npz(
    path: impl AsRef<Path>,
    arrays: &[(&str, &NpyArray)],
    compression: Compression,
) -> Result<()> {
    let mut w = NpzWriter::create_with(path, compression)?;
    for (name, arr) in arrays {
        w.add_array(name, arr)?;
    }
    w.finish()?;
    Ok(())
}

// ---------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------

/// A borrowed chunk of decoded elements passed to [`NpzReader::visit`].
#[derive(Debug, Clone, Copy)]
pub enum ArrayChunk<'a> {
    /// float32 elements.
    F32(&'a [f32]),
    /// float64 elements.
    F64(&'a [f64]),
    /// int32 elements.
    I32(&'a [i32]),
    /// int64 elements.
    I64(&'a [i64]),
    /// uint8 elements.
    U8(&'a [u8]),
}

/// Bytes decoded per step when reading.
const READ_CHUNK_BYTES: usize = 1 << 20;

/// Reads arrays from an `.npz` archive (stored or deflated members).
pub struct NpzReader<R: Read + Seek> {
    path: PathBuf,
    archive: ZipArchive<R>,
    archive_len: u64,
}

impl<R: Read + Seek> fmt::Debug for NpzReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NpzReader")
            .field("path", &self.path)
            .field("members", &self.archive.len())
            .finish()
    }
}

impl NpzReader<BufReader<File>> {
    /// Opens an npz file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|err| NpzError::Io {
            path: path.to_path_buf(),
            op: "open",
            err,
        })?;
        Self::from_reader(BufReader::with_capacity(1 << 20, file), path)
    }
}

impl<R: Read + Seek> NpzReader<R> {
    /// Reads an archive from any seekable reader; `label` names it in
    /// errors.
    pub fn from_reader(mut reader: R, label: impl AsRef<Path>) -> Result<Self> {
        let path = label.as_ref().to_path_buf();
        let archive_len = reader
            .seek(io::SeekFrom::End(0))
            .map_err(|err| NpzError::Io {
                path: path.clone(),
                op: "seek",
                err,
            })?;
        reader.rewind().map_err(|err| NpzError::Io {
            path: path.clone(),
            op: "seek",
            err,
        })?;
        let archive = ZipArchive::new(reader).map_err(|err| NpzError::Zip {
            path: path.clone(),
            err,
        })?;
        Ok(NpzReader {
            path,
            archive,
            archive_len,
        })
    }

    /// Path (or label) of the archive.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Array names in archive order (member names without `.npy`).
    pub fn names(&self) -> Vec<String> {
        self.archive
            .file_names()
            .map(|n| n.strip_suffix(".npy").unwrap_or(n).to_string())
            .collect()
    }

    fn member_err(&self, member: &str, reason: impl Into<String>) -> NpzError {
        NpzError::Member {
            path: self.path.clone(),
            member: member.to_string(),
            reason: reason.into(),
        }
    }

    fn index_of(&self, name: &str) -> Result<usize> {
        let with = format!("{name}.npy");
        self.archive
            .index_for_name(&with)
            .or_else(|| self.archive.index_for_name(name))
            .ok_or_else(|| NpzError::MissingArray {
                path: self.path.clone(),
                name: name.to_string(),
                available: self.archive.file_names().collect::<Vec<_>>().join(", "),
            })
    }

    /// Reads only the NPY header of array `name`.
    pub fn header(&mut self, name: &str) -> Result<NpyHeader> {
        let idx = self.index_of(name)?;
        self.header_at(idx)
    }

    fn header_at(&mut self, idx: usize) -> Result<NpyHeader> {
        let path = self.path.clone();
        let mut f = self.archive.by_index(idx).map_err(|err| NpzError::Zip {
            path: path.clone(),
            err,
        })?;
        let member = f.name().to_string();
        let declared = f.size();
        let h = read_npy_header(&mut f).map_err(|reason| NpzError::Member {
            path: path.clone(),
            member: member.clone(),
            reason: reason.0,
        })?;
        // The header alone is believed only as far as the member can hold its data.
        let data = h.data_bytes().unwrap_or(u64::MAX);
        let room = declared.saturating_sub(h.header_len as u64);
        if data > room {
            return Err(NpzError::Member {
                path,
                member,
                reason: format!(
                    "truncated: header promises {data} data bytes for shape {} {} but the member holds {room}",
                    shape_repr(&h.shape),
                    h.dtype
                ),
            });
        }
        Ok(h)
    }

    /// Streams array `name` in chunks of decoded elements (C order) without
    /// holding it whole; returns its header. The data length and the ZIP
    /// CRC are checked at the end.
    pub fn visit<F>(&mut self, name: &str, mut f: F) -> Result<NpyHeader>
    where
        F: FnMut(ArrayChunk<'_>) -> Result<()>,
    {
        let idx = self.index_of(name)?;
        self.read_member(idx, |h, bytes, scratch| match h.dtype {
            DType::F32 => decode_visit::<f32>(bytes, scratch, |v| f(ArrayChunk::F32(v))),
            DType::F64 => decode_visit::<f64>(bytes, scratch, |v| f(ArrayChunk::F64(v))),
            DType::I32 => decode_visit::<i32>(bytes, scratch, |v| f(ArrayChunk::I32(v))),
            DType::I64 => decode_visit::<i64>(bytes, scratch, |v| f(ArrayChunk::I64(v))),
            DType::U8 => f(ArrayChunk::U8(bytes)),
        })
        .map(|(h, _)| h)
    }

    /// Reads array `name` whole.
    pub fn read(&mut self, name: &str) -> Result<NpyArray> {
        let idx = self.index_of(name)?;
        self.read_index(idx).map(|(_, a)| a)
    }

    /// Reads every member, keyed by array name (without `.npy`), in archive
    /// order.
    pub fn read_all(&mut self) -> Result<IndexMap<String, NpyArray>> {
        let mut out = IndexMap::new();
        for idx in 0..self.archive.len() {
            let (member, arr) = self.read_index(idx)?;
            let key = member.strip_suffix(".npy").unwrap_or(&member).to_string();
            if out.insert(key, arr).is_some() {
                return Err(self.member_err(&member, "duplicate array name"));
            }
        }
        Ok(out)
    }

    fn read_index(&mut self, idx: usize) -> Result<(String, NpyArray)> {
        let mut data: Option<ArrayData> = None;
        let (header, member) = self.read_member(idx, |h, bytes, scratch| {
            let hint_cap = scratch.hint;
            let cap = hint_cap / h.dtype.size();
            let d = data.get_or_insert_with(|| match h.dtype {
                DType::F32 => ArrayData::F32(Vec::with_capacity(cap)),
                DType::F64 => ArrayData::F64(Vec::with_capacity(cap)),
                DType::I32 => ArrayData::I32(Vec::with_capacity(cap)),
                DType::I64 => ArrayData::I64(Vec::with_capacity(cap)),
                DType::U8 => ArrayData::U8(Vec::with_capacity(cap)),
            });
            match d {
                ArrayData::F32(v) => f32::extend_from_le_bytes(bytes, v),
                ArrayData::F64(v) => f64::extend_from_le_bytes(bytes, v),
                ArrayData::I32(v) => i32::extend_from_le_bytes(bytes, v),
                ArrayData::I64(v) => i64::extend_from_le_bytes(bytes, v),
                ArrayData::U8(v) => v.extend_from_slice(bytes),
            }
            Ok(())
        })?;
        let data = data.unwrap_or_else(|| match header.dtype {
            DType::F32 => ArrayData::F32(Vec::new()),
            DType::F64 => ArrayData::F64(Vec::new()),
            DType::I32 => ArrayData::I32(Vec::new()),
            DType::I64 => ArrayData::I64(Vec::new()),
            DType::U8 => ArrayData::U8(Vec::new()),
        });
        let arr = NpyArray::new(header.shape.clone(), data)
            .map_err(|e| self.member_err(&member, e.to_string()))?;
        Ok((member, arr))
    }

    /// Core reading loop: parses the header, then hands element-aligned byte
    /// chunks to `sink`, checking the exact data length and the CRC.
    fn read_member<F>(&mut self, idx: usize, mut sink: F) -> Result<(NpyHeader, String)>
    where
        F: FnMut(&NpyHeader, &[u8], &mut ScratchBuf) -> Result<()>,
    {
        let path = self.path.clone();
        let archive_len = self.archive_len;
        let mut f = self.archive.by_index(idx).map_err(|err| NpzError::Zip {
            path: path.clone(),
            err,
        })?;
        let member = f.name().to_string();
        let merr = |reason: String| NpzError::Member {
            path: path.clone(),
            member: member.clone(),
            reason,
        };
        if f.is_dir() {
            return Err(merr("is a directory, not an array".into()));
        }
        let header = read_npy_header(&mut f).map_err(|e| merr(e.0))?;
        let expected = header
            .data_bytes()
            .ok_or_else(|| merr(format!("shape {:?} overflows", header.shape)))?;
        // Upper bound on what the member can really hold, to size buffers.
        let declared = f.size().saturating_sub(header.header_len as u64);
        let physical = match f.compression() {
            CompressionMethod::Stored => archive_len,
            _ => f.compressed_size().saturating_mul(1100),
        };
        let plausible = expected.min(declared).min(physical);
        if expected > declared {
            return Err(merr(format!(
                "truncated: header promises {expected} data bytes for shape {:?} {} but the member holds {declared}",
                header.shape, header.dtype
            )));
        }
        let item = header.dtype.size();
        let chunk = (READ_CHUNK_BYTES / item).max(1) * item;
        let mut buf = vec![
            0u8;
            chunk
                .min(usize::try_from(plausible).unwrap_or(chunk))
                .max(item)
        ];
        let mut scratch = ScratchBuf::default();
        let mut left = expected;
        let mut first = true;
        while left > 0 {
            let want = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
            let got = read_some(&mut f, &mut buf[..want])
                .map_err(|e| merr(format!("read error: {e}")))?;
            if got < want {
                return Err(merr(format!(
                    "truncated: data ends after {} of {expected} bytes",
                    expected - left + got as u64
                )));
            }
            if first {
                scratch.hint = usize::try_from(plausible).unwrap_or(0);
                first = false;
            }
            sink(&header, &buf[..got], &mut scratch)?;
            left -= got as u64;
        }
        // Reach end of member: validates the CRC and rejects trailing bytes.
        let mut tail = [0u8; 64];
        let extra = read_some(&mut f, &mut tail).map_err(|e| merr(format!("read error: {e}")))?;
        if extra > 0 {
            return Err(merr(format!(
                "{} bytes after the {expected} data bytes of shape {:?} {}",
                if extra == tail.len() {
                    "64 or more".to_string()
                } else {
                    extra.to_string()
                },
                header.shape,
                header.dtype
            )));
        }
        drop(f);
        Ok((header, member))
    }

    /// Summarises this archive as a TpuGraphs file (see [`summarize_npz`]).
    pub fn summarize(&mut self) -> Result<NpzSummary> {
        summarize_reader(self)
    }
}

/// Reusable decode buffer for [`NpzReader::visit`].
#[derive(Default)]
struct ScratchBuf {
    hint: usize,
    f32: Vec<f32>,
    f64: Vec<f64>,
    i32: Vec<i32>,
    i64: Vec<i64>,
}

trait ScratchOf: NpyElement {
    fn scratch(s: &mut ScratchBuf) -> &mut Vec<Self>;
}
impl ScratchOf for f32 {
    fn scratch(s: &mut ScratchBuf) -> &mut Vec<Self> {
        &mut s.f32
    }
}
impl ScratchOf for f64 {
    fn scratch(s: &mut ScratchBuf) -> &mut Vec<Self> {
        &mut s.f64
    }
}
impl ScratchOf for i32 {
    fn scratch(s: &mut ScratchBuf) -> &mut Vec<Self> {
        &mut s.i32
    }
}
impl ScratchOf for i64 {
    fn scratch(s: &mut ScratchBuf) -> &mut Vec<Self> {
        &mut s.i64
    }
}

fn decode_visit<T: ScratchOf>(
    bytes: &[u8],
    scratch: &mut ScratchBuf,
    mut f: impl FnMut(&[T]) -> Result<()>,
) -> Result<()> {
    let v = T::scratch(scratch);
    v.clear();
    T::extend_from_le_bytes(bytes, v);
    f(v)
}

/// Reads every array of an npz file.
pub fn read_npz(path: impl AsRef<Path>) -> Result<IndexMap<String, NpyArray>> {
    NpzReader::open(path)?.read_all()
}

// ---------------------------------------------------------------------------
// TpuGraphs summary and schema check
// ---------------------------------------------------------------------------

/// Which TpuGraphs collection a file belongs to, told by its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GraphKind {
    /// Has `config_feat` (tile:xla).
    Tile,
    /// Has `node_config_feat` (layout:*).
    Layout,
    /// Neither.
    Unknown,
}

impl fmt::Display for GraphKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GraphKind::Tile => "tile",
            GraphKind::Layout => "layout",
            GraphKind::Unknown => "unknown",
        })
    }
}

/// Name, dtype and shape of one member.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArrayInfo {
    /// Array name (member without `.npy`).
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<usize>,
}

/// Counts and schema violations of a TpuGraphs npz (spec §1, §7; the same
/// checks as `shared/tools/check_tpugraphs_npz.py`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NpzSummary {
    /// File inspected.
    pub path: PathBuf,
    /// Tile, layout or unknown.
    pub kind: GraphKind,
    /// Every member, in archive order.
    pub arrays: Vec<ArrayInfo>,
    /// n: rows of `node_feat`.
    pub nodes: Option<usize>,
    /// m: rows of `edge_index`.
    pub edges: Option<usize>,
    /// c: configurations (`config_feat` rows, or `node_config_feat` axis 0).
    pub configs: Option<usize>,
    /// nc: configurable nodes (layout only).
    pub config_nodes: Option<usize>,
    /// Number of entries in `node_splits` (layout only).
    pub splits: Option<usize>,
    /// Smallest `config_runtime` (ns).
    pub runtime_min: Option<f64>,
    /// Largest `config_runtime` (ns).
    pub runtime_max: Option<f64>,
    /// Smallest `config_runtime_normalizers` (tile).
    pub normalizer_min: Option<f64>,
    /// Largest `config_runtime_normalizers` (tile).
    pub normalizer_max: Option<f64>,
    /// Schema violations; empty when the file conforms.
    pub violations: Vec<String>,
}

impl NpzSummary {
    /// True when no schema violation was found.
    pub fn is_valid(&self) -> bool {
        self.violations.is_empty()
    }
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

impl fmt::Display for NpzSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |v: Option<usize>| v.map_or("-".to_string(), |v| v.to_string());
        writeln!(f, "file:    {}", self.path.display())?;
        writeln!(f, "kind:    {}", self.kind)?;
        write!(
            f,
            "graph:   {} nodes, {} edges, {} configs",
            opt(self.nodes),
            opt(self.edges),
            opt(self.configs)
        )?;
        if self.kind == GraphKind::Layout {
            write!(
                f,
                ", {} configurable nodes, {} splits",
                opt(self.config_nodes),
                opt(self.splits)
            )?;
        }
        writeln!(f)?;
        if let (Some(lo), Some(hi)) = (self.runtime_min, self.runtime_max) {
            writeln!(f, "runtime: min {} ns, max {} ns", fmt_num(lo), fmt_num(hi))?;
        }
        if let (Some(lo), Some(hi)) = (self.normalizer_min, self.normalizer_max) {
            writeln!(
                f,
                "normalizers: min {} ns, max {} ns",
                fmt_num(lo),
                fmt_num(hi)
            )?;
        }
        writeln!(f, "arrays:")?;
        let width = self.arrays.iter().map(|a| a.name.len()).max().unwrap_or(0);
        for a in &self.arrays {
            writeln!(
                f,
                "  {:<width$}  {:<7}  {}",
                a.name,
                a.dtype.name(),
                shape_repr(&a.shape)
            )?;
        }
        if self.violations.is_empty() {
            write!(f, "schema:  OK")
        } else {
            write!(f, "schema:  {} violation(s)", self.violations.len())?;
            for v in &self.violations {
                write!(f, "\n  - {v}")?;
            }
            Ok(())
        }
    }
}

/// Number of opcode ids (0..=120), spec §3.
const N_OPCODES: i64 = 121;

const TILE_KEYS: [&str; 6] = [
    "node_feat",
    "node_opcode",
    "edge_index",
    "config_feat",
    "config_runtime",
    "config_runtime_normalizers",
];
const LAYOUT_KEYS: [&str; 7] = [
    "node_feat",
    "node_opcode",
    "edge_index",
    "node_config_feat",
    "node_config_ids",
    "node_splits",
    "config_runtime",
];

/// Opens `path` and summarises it as a TpuGraphs file: kind (tile or layout,
/// from the keys), n, m, c, nc, runtime range and every schema violation of
/// spec §7 (required keys, dtypes, shape agreement, index ranges, edge order,
/// value ranges). Unreadable files give `Err`; readable files that break the
/// schema give `Ok` with `violations` filled.
pub fn summarize_npz(path: impl AsRef<Path>) -> Result<NpzSummary> {
    NpzReader::open(path)?.summarize()
}

/// True for NaN, zero and negative values (NumPy's `not (x > 0)`).
fn not_positive(x: f64) -> bool {
    x.is_nan() || x <= 0.0
}

fn min_max(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, x| match acc {
        None => Some((x, x)),
        Some((lo, hi)) => Some((
            if x < lo || x.is_nan() { x } else { lo },
            if x > hi || x.is_nan() { x } else { hi },
        )),
    })
}

/// Whether a chunk held values, and a NaN.
struct Seen {
    len: usize,
    nan: bool,
}

impl Seen {
    fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The least and greatest of `c`'s values that are not NaN (`f64::INFINITY` and
/// `-INFINITY` when there are none), and whether one is NaN. In eight lanes, which the
/// compiler turns into vector instructions: the file's largest array is read through
/// here before the file is kept. Min and max do not depend on the order the values
/// come in (bar the sign of a zero, which no range check tells apart).
fn value_range<T>(c: &[T], f: impl Fn(&T) -> f64) -> (f64, f64, Seen) {
    const L: usize = 8;
    let mut lo = [f64::INFINITY; L];
    let mut hi = [f64::NEG_INFINITY; L];
    let mut nan = [false; L];
    // (a NaN fails both comparisons and is counted apart)
    #[inline(always)]
    fn lane(v: f64, lo: &mut f64, hi: &mut f64, nan: &mut bool) {
        *lo = if v < *lo { v } else { *lo };
        *hi = if v > *hi { v } else { *hi };
        *nan |= v.is_nan();
    }
    let mut chunks = c.chunks_exact(L);
    // a whole row of lanes at a time, inline: one call a row would not be vectorised
    for x in &mut chunks {
        for k in 0..L {
            lane(f(&x[k]), &mut lo[k], &mut hi[k], &mut nan[k]);
        }
    }
    for (k, v) in chunks.remainder().iter().enumerate() {
        lane(f(v), &mut lo[k], &mut hi[k], &mut nan[k]);
    }
    let fold = |a: [f64; L], pick: fn(f64, f64) -> f64| a.into_iter().fold(a[0], pick);
    let seen = Seen {
        len: c.len(),
        nan: nan.iter().any(|&n| n),
    };
    (fold(lo, f64::min), fold(hi, f64::max), seen)
}

fn summarize_reader<R: Read + Seek>(r: &mut NpzReader<R>) -> Result<NpzSummary> {
    let names = r.names();
    let mut arrays = Vec::with_capacity(names.len());
    for (idx, name) in names.iter().enumerate() {
        let h = r.header_at(idx)?;
        arrays.push(ArrayInfo {
            name: name.clone(),
            dtype: h.dtype,
            shape: h.shape,
        });
    }
    let info = |k: &str| arrays.iter().find(|a| a.name == k).cloned();
    let has = |k: &str| arrays.iter().any(|a| a.name == k);
    let kind = if has("config_feat") {
        GraphKind::Tile
    } else if has("node_config_feat") {
        GraphKind::Layout
    } else {
        GraphKind::Unknown
    };
    let mut s = NpzSummary {
        path: r.path().to_path_buf(),
        kind,
        arrays: arrays.clone(),
        nodes: None,
        edges: None,
        configs: None,
        config_nodes: None,
        splits: None,
        runtime_min: None,
        runtime_max: None,
        normalizer_min: None,
        normalizer_max: None,
        violations: Vec::new(),
    };
    let mut violations = Vec::new();
    let v = &mut violations;
    let dims = |k: &str| info(k).map(|a| a.shape);

    // Counts (filled even when the schema is broken).
    let nf_shape = dims("node_feat");
    let n = nf_shape.as_ref().and_then(|s| (s.len() == 2).then(|| s[0]));
    s.nodes = n.or_else(|| dims("node_opcode").and_then(|s| s.first().copied()));
    s.edges = dims("edge_index").and_then(|s| s.first().copied());
    match kind {
        GraphKind::Tile => s.configs = dims("config_feat").and_then(|s| s.first().copied()),
        GraphKind::Layout => {
            let ncf = dims("node_config_feat");
            s.configs = ncf.as_ref().and_then(|s| s.first().copied());
            s.config_nodes = ncf.as_ref().and_then(|s| s.get(1).copied());
            s.splits = dims("node_splits").map(|s| s.iter().product());
        }
        GraphKind::Unknown => {}
    }
    // Members read whole below (the rest are read through at the end).
    let mut read: Vec<&str> = Vec::new();
    if has("config_runtime") {
        let a = r.read("config_runtime")?;
        read.push("config_runtime");
        if let Some((lo, hi)) = min_max((0..a.len()).filter_map(|i| a.data().get_f64(i))) {
            s.runtime_min = Some(lo);
            s.runtime_max = Some(hi);
        }
    }
    if has("config_runtime_normalizers") {
        let a = r.read("config_runtime_normalizers")?;
        read.push("config_runtime_normalizers");
        if let Some((lo, hi)) = min_max((0..a.len()).filter_map(|i| a.data().get_f64(i))) {
            s.normalizer_min = Some(lo);
            s.normalizer_max = Some(hi);
        }
    }

    if kind == GraphKind::Unknown {
        v.push("neither config_feat (tile) nor node_config_feat (layout) present".into());
        s.violations = violations;
        return Ok(s);
    }
    let required: &[&str] = if kind == GraphKind::Tile {
        &TILE_KEYS
    } else {
        &LAYOUT_KEYS
    };
    let missing: Vec<&str> = required.iter().copied().filter(|k| !has(k)).collect();
    if !missing.is_empty() {
        let mut sorted = missing.clone();
        sorted.sort_unstable();
        let list: Vec<String> = sorted.iter().map(|k| format!("'{k}'")).collect();
        v.push(format!("{kind}: missing keys [{}]", list.join(", ")));
        s.violations = violations;
        return Ok(s);
    }

    let is = |k: &str, dt: DType| info(k).is_some_and(|a| a.dtype == dt);
    let desc = |k: &str| {
        info(k).map_or(String::new(), |a| {
            format!("{} {}", a.dtype, shape_repr(&a.shape))
        })
    };
    // Python's checker uses n = -1 when node_feat is not 2-D.
    let n_f = n.map_or(-1.0, |n| n as f64);

    // node_feat
    let nf_ok_shape = nf_shape
        .as_ref()
        .is_some_and(|s| s.len() == 2 && s[1] == 140);
    if !(is("node_feat", DType::F32) && nf_ok_shape) {
        v.push(format!(
            "node_feat must be float32 (n,140), is {}",
            desc("node_feat")
        ));
    }
    // node_opcode
    let op_shape_ok = dims("node_opcode").is_some_and(|s| s.len() == 1 && Some(s[0]) == n);
    if !(is("node_opcode", DType::U8) && op_shape_ok) {
        v.push(format!(
            "node_opcode must be uint8 (n,), is {}",
            desc("node_opcode")
        ));
    }
    let op = r.read("node_opcode")?;
    read.push("node_opcode");
    match op.data().to_i64_vec() {
        Some(ids) => {
            if ids.iter().any(|&x| x >= N_OPCODES) {
                v.push("node_opcode holds an id above 120".into());
            }
        }
        None => {
            if (0..op.len()).any(|i| op.data().get_f64(i).is_some_and(|x| x >= N_OPCODES as f64)) {
                v.push("node_opcode holds an id above 120".into());
            }
        }
    }

    // edge_index
    let ei_shape = dims("edge_index").unwrap_or_default();
    let ei_shape_ok = ei_shape.len() == 2 && ei_shape[1] == 2;
    if !(is("edge_index", DType::I64) && ei_shape_ok) {
        v.push(format!(
            "edge_index must be int64 (m,2), is {}",
            desc("edge_index")
        ));
    }
    if ei_shape_ok && ei_shape[0] > 0 {
        let ei = r.read("edge_index")?;
        read.push("edge_index");
        let vals: Vec<f64> = ei.data().to_f64_vec();
        let pairs: Vec<(f64, f64)> = vals.chunks_exact(2).map(|p| (p[0], p[1])).collect();
        if !pairs
            .iter()
            .all(|&(a, b)| a >= 0.0 && b >= 0.0 && a < n_f && b < n_f)
        {
            v.push("edge_index refers to a node outside 0..n-1".into());
        }
        if !pairs.iter().all(|&(u, w)| u > w) {
            v.push(
                "edge_index rows must be [user, operand] with user > operand (nodes in post order)"
                    .into(),
            );
        }
        if !pairs
            .windows(2)
            .all(|w| (w[0].0, w[0].1) <= (w[1].0, w[1].1))
        {
            v.push("edge_index rows must be sorted by (user, operand)".into());
        }
        let mut sorted = pairs.clone();
        sorted.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            v.push("edge_index has duplicate rows".into());
        }
    }

    // node_feat values (after the edge checks, in the Python checker's order)
    if nf_ok_shape && n.is_some_and(|n| n > 0) {
        let nf = r.read("node_feat")?;
        read.push("node_feat");
        let d = nf.data();
        let rows = nf.shape()[0];
        let mut root_bad = false;
        let mut onehot_bad = false;
        let mut nonfinite = false;
        for row in 0..rows {
            let base = row * 140;
            let root = d.get_f64(base).unwrap_or(0.0);
            if root != 0.0 && root != 1.0 {
                root_bad = true;
            }
            let sum: f64 = (2..21).filter_map(|c| d.get_f64(base + c)).sum();
            if sum > 1.0 {
                onehot_bad = true;
            }
        }
        for i in 0..d.len() {
            if !d.get_f64(i).is_some_and(f64::is_finite) {
                nonfinite = true;
                break;
            }
        }
        if root_bad {
            v.push("node_feat[:,0] (is_root) must be 0 or 1".into());
        }
        if onehot_bad {
            v.push("node_feat[:,2:21] element-type one-hot has more than one 1".into());
        }
        if nonfinite {
            v.push("node_feat holds NaN or inf".into());
        }
    }

    match kind {
        GraphKind::Tile => {
            let cf = dims("config_feat").unwrap_or_default();
            let cf_ok = cf.len() == 2 && cf[1] == 24;
            let c = if cf.len() == 2 { Some(cf[0]) } else { None };
            if !(is("config_feat", DType::F32) && cf_ok) {
                v.push(format!(
                    "config_feat must be float32 (c,24), is {}",
                    desc("config_feat")
                ));
            }
            for k in ["config_runtime", "config_runtime_normalizers"] {
                let ok = dims(k).is_some_and(|s| s.len() == 1 && Some(s[0]) == c);
                if !(is(k, DType::I64) && ok) {
                    v.push(format!("{k} must be int64 (c,), is {}", desc(k)));
                }
            }
            if c.is_none_or(|c| c < 2) {
                v.push(
                    "a tile file needs at least 2 configs (the loaders drop files with fewer)"
                        .into(),
                );
            }
            if s.runtime_min.is_some_and(not_positive) {
                v.push("config_runtime must be positive nanoseconds".into());
            }
            if s.normalizer_min.is_some_and(not_positive) {
                v.push("config_runtime_normalizers must be positive nanoseconds".into());
            }
        }
        GraphKind::Layout => {
            let ncf = dims("node_config_feat").unwrap_or_default();
            let ncf_ok = ncf.len() == 3 && ncf[2] == 18;
            if !(is("node_config_feat", DType::F32) && ncf_ok) {
                v.push(format!(
                    "node_config_feat must be float32 (c,nc,18), is {}",
                    desc("node_config_feat")
                ));
            }
            let c = if ncf.len() == 3 { Some(ncf[0]) } else { None };
            let nc = if ncf.len() == 3 { Some(ncf[1]) } else { None };
            let ids_ok = dims("node_config_ids").is_some_and(|s| s.len() == 1 && Some(s[0]) == nc);
            if !(is("node_config_ids", DType::I64) && ids_ok) {
                v.push(format!(
                    "node_config_ids must be int64 (nc,), is {}",
                    desc("node_config_ids")
                ));
            }
            if nc.is_none_or(|nc| nc < 1) {
                v.push("a layout file needs at least one configurable node".into());
            }
            let ids = r.read("node_config_ids")?.data().to_f64_vec();
            read.push("node_config_ids");
            if !ids.is_empty() {
                let in_range = ids.iter().all(|&x| x >= 0.0 && x < n_f);
                let ascending = ids.windows(2).all(|w| w[1] > w[0]);
                if !(in_range && ascending) {
                    v.push("node_config_ids must be ascending node indices < n".into());
                }
            }
            // Stream node_config_feat (can exceed 4 GiB) for its value range.
            let mut lo = f64::INFINITY;
            let mut hi = f64::NEG_INFINITY;
            let mut nan = false;
            let mut any = false;
            r.visit("node_config_feat", |chunk| {
                let (l, h, n) = match chunk {
                    ArrayChunk::F32(c) => value_range(c, |&x| f64::from(x)),
                    ArrayChunk::F64(c) => value_range(c, |&x| x),
                    ArrayChunk::I32(c) => value_range(c, |&x| f64::from(x)),
                    ArrayChunk::I64(c) => value_range(c, |&x| x as f64),
                    ArrayChunk::U8(c) => value_range(c, |&x| f64::from(x)),
                };
                any |= !n.is_empty();
                nan |= n.nan;
                lo = lo.min(l);
                hi = hi.max(h);
                Ok(())
            })?;
            read.push("node_config_feat");
            if any && (nan || lo < -1.0 || hi > 5.0) {
                v.push("node_config_feat values must lie in -1..5".into());
            }
            let sp = dims("node_splits").unwrap_or_default();
            if !(is("node_splits", DType::I64) && sp.len() == 2 && sp[0] == 1) {
                v.push(format!(
                    "node_splits must be int64 (1,s), is {}",
                    desc("node_splits")
                ));
            }
            let rt_ok = dims("config_runtime").is_some_and(|s| s.len() == 1 && Some(s[0]) == c);
            if !(is("config_runtime", DType::I64) && rt_ok) {
                v.push(format!(
                    "config_runtime must be int64 (c,), is {}",
                    desc("config_runtime")
                ));
            }
            if c.is_none_or(|c| c < 2) {
                v.push("a layout file needs at least 2 configs".into());
            }
            if s.runtime_min.is_some_and(not_positive) {
                v.push("config_runtime must be positive nanoseconds".into());
            }
        }
        GraphKind::Unknown => {}
    }
    // Every member read through once (data length, CRC), also those the checks above
    // did not need: a file `inspect` passes is readable whole.
    for name in names.iter().filter(|n| !read.contains(&n.as_str())) {
        r.visit(name, |_| Ok(()))?;
    }
    s.violations = violations;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::value_range;

    #[test]
    fn the_value_range_is_the_range_of_every_lane_and_the_tail() {
        // 19 values: two rows of eight lanes and a tail of three; the extremes sit in
        // different lanes and in the tail.
        let v: Vec<f32> = (0..19).map(|i| ((i * 7) % 11) as f32 - 3.0).collect();
        let (lo, hi, seen) = value_range(&v, |&x| f64::from(x));
        assert_eq!((lo, hi, seen.len, seen.nan), (-3.0, 7.0, 19, false));
        let mut w = v.clone();
        w[18] = -9.5; // in the tail
        w[5] = 12.25; // in a lane
        w[10] = f32::NAN;
        let (lo, hi, seen) = value_range(&w, |&x| f64::from(x));
        assert_eq!((lo, hi, seen.nan), (-9.5, 12.25, true));
        // integers, and nothing at all
        let (lo, hi, seen) = value_range(&[-1i64, 4, 0, 2], |&x| x as f64);
        assert_eq!(
            (lo, hi, seen.nan, seen.is_empty()),
            (-1.0, 4.0, false, false)
        );
        let (lo, hi, seen) = value_range::<u8>(&[], |&x| f64::from(x));
        assert_eq!(
            (lo, hi, seen.is_empty()),
            (f64::INFINITY, f64::NEG_INFINITY, true)
        );
        // only NaN: no range, and the NaN is seen
        let (lo, hi, seen) = value_range(&[f64::NAN; 3], |&x| x);
        assert_eq!((lo, hi, seen.nan), (f64::INFINITY, f64::NEG_INFINITY, true));
    }
}
