//! `LiteralProto` → the literal text XLA prints inside `constant(...)`, so a
//! constant read from a proto equals the same constant read from HLO text
//! (the IR keeps literals as text).
//!
//! Follows XLA's printer: floats by `RoundTripFpToString` (`%.6g` for f32,
//! falling back to `%.9g` when that does not round-trip; `%.15g`/`%.17g` for
//! f64; `%.{max_digits10}g` for bf16/f16), NaN payloads as `nan(0x..)`,
//! pred arrays as `0`/`1`, complex numbers as `(re, im)`, arrays in logical
//! (row-major) order as `{a, b}` / `{ {a, b}, {c, d} }`, tuples as
//! `( x, y )`, and arrays of more than 10 elements elided as `{...}` (XLA's
//! default when printing a module).

use std::fmt::Write;

use super::xla;
use crate::ir::{PrimitiveType, Shape};

/// Arrays with more elements than this print as `{...}`.
pub const MAX_PRINTED_ELEMENTS: u64 = 10;

/// Why a literal could not be printed.
pub type LiteralError = String;

/// C's `printf("%.{prec}g", v)` for finite and infinite values.
pub fn format_g(v: f64, prec: usize) -> String {
    let prec = prec.max(1);
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let e = format!("{:.*e}", prec - 1, v);
    let (mant, exp) = match e.split_once('e') {
        Some(x) => x,
        None => return e,
    };
    let x: i32 = exp.parse().unwrap_or(0);
    if x < -4 || x >= prec as i32 {
        let mant = trim_zeros(mant);
        let sign = if x < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", x.unsigned_abs())
    } else {
        let decimals = (prec as i32 - 1 - x).max(0) as usize;
        trim_zeros(&format!("{v:.decimals$}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

fn nan_payload(out: &mut String, bits: u64, payload_bits: u32) {
    let mask = (1u64 << payload_bits) - 1;
    let payload = bits & mask;
    if payload != 1u64 << (payload_bits - 1) {
        let _ = write!(out, "(0x{payload:x})");
    }
}

/// XLA's `RoundTripFpToString(float)`.
pub fn f32_text(v: f32) -> String {
    let mut s = format_g(f64::from(v), 6);
    if s.parse::<f32>().ok() != Some(v) {
        s = format_g(f64::from(v), 9);
    }
    if v.is_nan() {
        nan_payload(&mut s, u64::from(v.to_bits()), 23);
    }
    s
}

/// XLA's `RoundTripFpToString(double)`.
pub fn f64_text(v: f64) -> String {
    let mut s = format_g(v, 15);
    if s.parse::<f64>().ok() != Some(v) {
        s = format_g(v, 17);
    }
    if v.is_nan() {
        nan_payload(&mut s, v.to_bits(), 52);
    }
    s
}

/// bfloat16 bits → text (`%.4g` of the value, NaN payload on 7 bits).
pub fn bf16_text(bits: u16) -> String {
    let v = f32::from_bits(u32::from(bits) << 16);
    let mut s = format_g(f64::from(v), 4);
    if v.is_nan() {
        nan_payload(&mut s, u64::from(bits), 7);
    }
    s
}

/// IEEE half bits → f32.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // subnormal: normalise
            let mut e: i32 = -14;
            let mut m = m;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (((e + 127) as u32) << 23) | ((m & 0x3ff) << 13)
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// IEEE half bits → text (`%.5g`, NaN payload on 10 bits).
pub fn f16_text(bits: u16) -> String {
    let v = f16_to_f32(bits);
    let mut s = format_g(f64::from(v), 5);
    if v.is_nan() {
        nan_payload(&mut s, u64::from(bits), 10);
    }
    s
}

/// One element, as text, from a typed data array.
enum Data<'a> {
    Pred(&'a [bool]),
    I64(Vec<i64>),
    U64(&'a [u64]),
    F32(&'a [f32]),
    F64(&'a [f64]),
    Bf16(Vec<u16>),
    F16(Vec<u16>),
    C64(&'a [f32]),
    C128(&'a [f64]),
}

impl Data<'_> {
    fn len(&self) -> usize {
        match self {
            Data::Pred(v) => v.len(),
            Data::I64(v) => v.len(),
            Data::U64(v) => v.len(),
            Data::F32(v) => v.len(),
            Data::F64(v) => v.len(),
            Data::Bf16(v) | Data::F16(v) => v.len(),
            Data::C64(v) => v.len() / 2,
            Data::C128(v) => v.len() / 2,
        }
    }

    fn text(&self, i: usize, in_array: bool) -> Option<String> {
        Some(match self {
            Data::Pred(v) => {
                let b = *v.get(i)?;
                match (in_array, b) {
                    (true, b) => if b { "1" } else { "0" }.to_string(),
                    (false, b) => b.to_string(),
                }
            }
            Data::I64(v) => v.get(i)?.to_string(),
            Data::U64(v) => v.get(i)?.to_string(),
            Data::F32(v) => f32_text(*v.get(i)?),
            Data::F64(v) => f64_text(*v.get(i)?),
            Data::Bf16(v) => bf16_text(*v.get(i)?),
            Data::F16(v) => f16_text(*v.get(i)?),
            Data::C64(v) => format!(
                "({}, {})",
                f32_text(*v.get(2 * i)?),
                f32_text(*v.get(2 * i + 1)?)
            ),
            Data::C128(v) => format!(
                "({}, {})",
                f64_text(*v.get(2 * i)?),
                f64_text(*v.get(2 * i + 1)?)
            ),
        })
    }
}

fn le16(b: &[u8]) -> Vec<u16> {
    b.chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

fn data_of(lit: &xla::LiteralProto, ty: PrimitiveType) -> Result<Data<'_>, LiteralError> {
    use PrimitiveType as T;
    Ok(match ty {
        T::Pred => Data::Pred(&lit.preds),
        T::S8 => Data::I64(lit.s8s.iter().map(|&b| i64::from(b as i8)).collect()),
        T::U8 => Data::I64(lit.u8s.iter().map(|&b| i64::from(b)).collect()),
        T::S16 => Data::I64(
            le16(&lit.s16s)
                .into_iter()
                .map(|v| i64::from(v as i16))
                .collect(),
        ),
        T::U16 => Data::I64(le16(&lit.u16s).into_iter().map(i64::from).collect()),
        T::S32 => Data::I64(lit.s32s.iter().map(|&v| i64::from(v)).collect()),
        T::U32 => Data::I64(lit.u32s.iter().map(|&v| i64::from(v)).collect()),
        T::S64 => Data::I64(lit.s64s.clone()),
        T::U64 => Data::U64(&lit.u64s),
        T::S4 => Data::I64(
            lit.s4s
                .iter()
                .map(|&b| i64::from(((b << 4) as i8) >> 4))
                .collect(),
        ),
        T::U4 => Data::I64(lit.u4s.iter().map(|&b| i64::from(b & 0xf)).collect()),
        T::F32 => Data::F32(&lit.f32s),
        T::F64 => Data::F64(&lit.f64s),
        T::Bf16 => Data::Bf16(le16(&lit.bf16s)),
        T::F16 => Data::F16(le16(&lit.f16s)),
        T::C64 => Data::C64(&lit.c64s),
        T::C128 => Data::C128(&lit.c128s),
        other => return Err(format!("constants of type {other} are not supported")),
    })
}

/// Text of a constant's literal for the IR (`Attrs::literal`): what XLA
/// prints between the parentheses of `constant(...)`. `shape` is the
/// instruction's result shape (dims, element type and layout of the data).
pub fn literal_text(lit: &xla::LiteralProto, shape: &Shape) -> Result<String, LiteralError> {
    let mut out = String::new();
    write_literal(&mut out, lit, shape, true)?;
    Ok(out)
}

fn write_literal(
    out: &mut String,
    lit: &xla::LiteralProto,
    shape: &Shape,
    top: bool,
) -> Result<(), LiteralError> {
    match shape {
        Shape::Tuple(elems) => {
            if elems.len() != lit.tuple_literals.len() {
                return Err(format!(
                    "tuple literal has {} elements, shape has {}",
                    lit.tuple_literals.len(),
                    elems.len()
                ));
            }
            out.push_str("( ");
            for (i, (s, l)) in elems.iter().zip(&lit.tuple_literals).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_literal(out, l, s, false)?;
            }
            out.push_str(" )");
            Ok(())
        }
        Shape::Buffer(_) => Err("buffer constants are not supported".to_string()),
        Shape::Array(a) => {
            if a.element_type == PrimitiveType::Token {
                out.push_str("token");
                return Ok(());
            }
            let count = a.element_count();
            if top && a.rank() > 0 && count > MAX_PRINTED_ELEMENTS {
                out.push_str("{...}");
                return Ok(());
            }
            let data = match data_of(lit, a.element_type) {
                Ok(d) => d,
                // f8/f6/f4 values are not decoded: mark the value unknown,
                // as the text form does for elided constants.
                Err(_) => {
                    out.push_str("{...}");
                    return Ok(());
                }
            };
            if data.len() as u64 != count {
                return Err(format!(
                    "literal holds {} values but its shape {}[{}] needs {count}",
                    data.len(),
                    a.element_type,
                    a.dims
                        .iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                ));
            }
            if a.rank() == 0 {
                out.push_str(&data.text(0, false).ok_or("missing scalar value")?);
                return Ok(());
            }
            // Physical position of a logical index: the data follows the
            // literal's layout (minor_to_major), the text is row-major.
            let m2m = a.minor_to_major();
            let dims: Vec<usize> = a.dims.iter().map(|&d| d.max(0) as usize).collect();
            let mut strides = vec![0usize; dims.len()];
            let mut s = 1usize;
            for &d in m2m.iter() {
                let d = d as usize;
                if let Some(st) = strides.get_mut(d) {
                    *st = s;
                }
                s = s.saturating_mul(dims.get(d).copied().unwrap_or(1));
            }
            let mut idx = Vec::with_capacity(dims.len());
            print_rec(out, &data, &dims, &strides, &mut idx)?;
            Ok(())
        }
    }
}

fn print_rec(
    out: &mut String,
    data: &Data<'_>,
    dims: &[usize],
    strides: &[usize],
    idx: &mut Vec<usize>,
) -> Result<(), LiteralError> {
    let rank = dims.len();
    let depth = idx.len();
    if depth == rank {
        let pos: usize = idx.iter().zip(strides).map(|(i, s)| i * s).sum();
        out.push_str(&data.text(pos, true).ok_or("literal index out of range")?);
        return Ok(());
    }
    let n = dims[depth];
    let remaining = rank - depth;
    // XLA's brace_to_string (oneline form).
    let open = if rank == 1 {
        "{".to_string()
    } else if remaining == 1 {
        if n <= 1 { "{" } else { "{ " }.to_string()
    } else if rank > 3 && depth > 0 {
        format!(
            "{{ /*i{}={}*/{}",
            depth - 1,
            idx[depth - 1],
            if n > 0 { " " } else { "" }
        )
    } else {
        "{ ".to_string()
    };
    let close = if rank == 1 {
        "}"
    } else if remaining == 1 {
        if n <= 1 {
            "}"
        } else {
            " }"
        }
    } else {
        " }"
    };
    out.push_str(&open);
    for i in 0..n {
        idx.push(i);
        print_rec(out, data, dims, strides, idx)?;
        idx.pop();
        if i + 1 < n {
            out.push_str(", ");
        }
    }
    out.push_str(close);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printf_g() {
        assert_eq!(format_g(0.1, 6), "0.1");
        assert_eq!(format_g(1e-5, 6), "1e-05");
        assert_eq!(format_g(123456.0, 6), "123456");
        assert_eq!(format_g(1234567.0, 6), "1.23457e+06");
        assert_eq!(format_g(0.0001, 6), "0.0001");
        assert_eq!(format_g(640.0, 6), "640");
        assert_eq!(format_g(-0.5, 6), "-0.5");
        assert_eq!(format_g(1e100, 6), "1e+100");
    }

    #[test]
    fn xla_float_text() {
        assert_eq!(f32_text(0.797_884_6), "0.797884583");
        assert_eq!(f32_text(0.044715), "0.044715");
        assert_eq!(f32_text(1.001e-5), "1.001e-05");
        assert_eq!(f32_text(f32::NEG_INFINITY), "-inf");
        assert_eq!(f32_text(f32::NAN), "nan");
        assert_eq!(f32_text(f32::from_bits(0x7fc0_0001)), "nan(0x400001)");
        assert_eq!(f32_text(0.0015625), "0.0015625");
        assert_eq!(f32_text(3.402_823_5e38), "3.40282347e+38");
        assert_eq!(f64_text(0.1), "0.1");
        assert_eq!(bf16_text(0x3f80), "1");
        assert_eq!(bf16_text(0x3dcd), "0.1001");
        assert_eq!(f16_text(0x3c00), "1");
        assert_eq!(f16_text(0x0001), "5.9605e-08");
    }

    #[test]
    fn arrays_and_elision() {
        use crate::ir::{ArrayShape, Layout};
        let mut a = ArrayShape::new(PrimitiveType::S32, &[2, 2]);
        a.layout = Some(Layout::row_major(2));
        let lit = xla::LiteralProto {
            s32s: vec![1, 2, 3, 4],
            ..Default::default()
        };
        assert_eq!(
            literal_text(&lit, &Shape::Array(a.clone())).unwrap(),
            "{ { 1, 2 }, { 3, 4 } }"
        );
        // column-major data prints in logical order
        a.layout = Some(Layout {
            minor_to_major: [0, 1].into_iter().collect(),
            ..Layout::default()
        });
        assert_eq!(
            literal_text(&lit, &Shape::Array(a)).unwrap(),
            "{ { 1, 3 }, { 2, 4 } }"
        );
        let v = Shape::array(PrimitiveType::S32, &[4]);
        let lit4 = xla::LiteralProto {
            s32s: vec![17, 29, 16, 24],
            ..Default::default()
        };
        assert_eq!(literal_text(&lit4, &v).unwrap(), "{17, 29, 16, 24}");
        let big = Shape::array(PrimitiveType::S32, &[11]);
        assert_eq!(
            literal_text(&xla::LiteralProto::default(), &big).unwrap(),
            "{...}"
        );
        let p = xla::LiteralProto {
            preds: vec![true],
            ..Default::default()
        };
        assert_eq!(
            literal_text(&p, &Shape::scalar(PrimitiveType::Pred)).unwrap(),
            "true"
        );
        assert!(literal_text(&p, &v).is_err());
        let f8 = Shape::scalar(PrimitiveType::F8e4m3fn);
        assert_eq!(literal_text(&p, &f8).unwrap(), "{...}");
    }
}
