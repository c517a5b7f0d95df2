//! Reads an array-shape token that the grammar has already validated
//! (`f32[8,<=4,?]{2,1,0:T(8,128)(2,1)L(2)E(4)S(1)}`) into an [`ArrayShape`].

use super::attrs::{Cursor, ValueError};
use crate::ir::{ArrayShape, Dims, Layout, PrimitiveType, Tile, UNBOUNDED_DIM};

/// Parse an array shape token. Offsets in errors are relative to `text`.
pub fn array_shape(text: &str) -> Result<ArrayShape, ValueError> {
    if let Some(a) = array_shape_fast(text) {
        return Ok(a);
    }
    array_shape_general(text)
}

/// The printer's common form, `f32[8,7,7,512]{3,2,1,0}` (static dims, plain or no
/// layout, no blanks), read in one pass; `None` sends anything else to the general
/// reader, which also produces the errors. It returns `Some` only for text that the
/// grammar's `array_shape` rule matches exactly and that is a valid shape, so the
/// parser's fast path may use it to check a scanned token.
pub(crate) fn array_shape_fast(text: &str) -> Option<ArrayShape> {
    let b = text.as_bytes();
    let open = b.iter().position(|&c| c == b'[')?;
    let element_type = PrimitiveType::from_name(&text[..open])?;
    let mut i = open + 1;
    let mut dims = Dims::new();
    let num = |i: &mut usize| -> Option<i64> {
        let start = *i;
        let mut v: i64 = 0;
        while *i < b.len() && b[*i].is_ascii_digit() {
            v = v.checked_mul(10)?.checked_add((b[*i] - b'0') as i64)?;
            *i += 1;
        }
        (*i > start).then_some(v)
    };
    if b.get(i) != Some(&b']') {
        loop {
            dims.push(num(&mut i)?);
            match b.get(i)? {
                b',' => i += 1,
                b']' => break,
                _ => return None,
            }
        }
    }
    i += 1;
    let layout = if i == b.len() {
        None
    } else {
        if b.get(i) != Some(&b'{') {
            return None;
        }
        i += 1;
        let mut m2m = Dims::new();
        let mut seen: u64 = 0;
        // `{}` is not a layout in the grammar (a layout starts with a digit or `:`).
        if b.get(i) != Some(&b'}') || dims.is_empty() {
            loop {
                let d = num(&mut i)?;
                if d as usize >= dims.len() || d >= 64 || seen >> d & 1 == 1 {
                    return None;
                }
                seen |= 1 << d;
                m2m.push(d);
                match b.get(i)? {
                    b',' => i += 1,
                    b'}' => break,
                    _ => return None,
                }
            }
        }
        if i + 1 != b.len()
            || m2m.len() != dims.len()
            || (dims.is_empty() && !element_type.is_array())
        {
            return None;
        }
        Some(crate::ir::Layout {
            minor_to_major: m2m,
            ..Default::default()
        })
    };
    if !element_type.is_array() && !dims.is_empty() {
        return None;
    }
    Some(ArrayShape {
        element_type,
        dims,
        dynamic_mask: 0,
        layout,
    })
}

fn array_shape_general(text: &str) -> Result<ArrayShape, ValueError> {
    let mut c = Cursor::new(text);
    let ty = c.word()?;
    let element_type = match PrimitiveType::from_name(ty) {
        Some(t) => t,
        None => {
            c.pos = 0;
            return c.err(format!("unknown element type '{ty}'"));
        }
    };
    let mut a = ArrayShape {
        element_type,
        dims: Dims::new(),
        dynamic_mask: 0,
        layout: None,
    };
    c.expect(b'[')?;
    if !c.eat(b']') {
        loop {
            let i = a.dims.len();
            if c.eat(b'?') {
                a.dims.push(UNBOUNDED_DIM);
                if i < 64 {
                    a.dynamic_mask |= 1 << i;
                }
            } else if c.eat_str("<=") {
                a.dims.push(c.int()?);
                if i < 64 {
                    a.dynamic_mask |= 1 << i;
                }
            } else {
                let at = c.pos;
                let d = c.int()?;
                if d < 0 {
                    c.pos = at;
                    return c.err(format!("negative dimension size {d}"));
                }
                a.dims.push(d);
            }
            if c.eat(b']') {
                break;
            }
            c.expect(b',')?;
        }
    }
    if !element_type.is_array() && !a.dims.is_empty() {
        c.pos = 0;
        return c.err(format!("'{element_type}' shapes cannot have dimensions"));
    }
    c.skip_ws();
    if c.peek() == Some(b'{') {
        let lat = c.pos;
        let l = layout(&mut c)?;
        if !l.minor_to_major.is_empty() || !a.dims.is_empty() {
            if l.minor_to_major.len() != a.dims.len() {
                c.pos = lat;
                return c.err(format!(
                    "layout has {} dimensions but the shape has rank {}",
                    l.minor_to_major.len(),
                    a.dims.len()
                ));
            }
            let mut seen = vec![false; a.dims.len()];
            for &d in &l.minor_to_major {
                match usize::try_from(d).ok().and_then(|i| seen.get_mut(i)) {
                    Some(s) if !*s => *s = true,
                    _ => {
                        c.pos = lat;
                        return c
                            .err("layout minor_to_major is not a permutation of the dimensions");
                    }
                }
            }
        }
        a.layout = Some(l);
    }
    c.finish()?;
    Ok(a)
}

fn layout(c: &mut Cursor) -> Result<Layout, ValueError> {
    let mut l = Layout::default();
    c.expect(b'{')?;
    c.skip_ws();
    if c.peek().is_some_and(|b| b.is_ascii_digit()) {
        loop {
            l.minor_to_major.push(c.int()?);
            if !c.eat(b',') {
                break;
            }
        }
    }
    if c.eat(b':') {
        loop {
            c.skip_ws();
            match c.peek() {
                Some(b'}') | None => break,
                Some(b'T') => {
                    c.pos += 1;
                    while c.eat(b'(') {
                        let mut t = Tile::default();
                        loop {
                            if c.eat(b'*') {
                                t.dims.push(-1);
                            } else {
                                t.dims.push(c.int()?);
                            }
                            if !c.eat(b',') {
                                break;
                            }
                        }
                        c.expect(b')')?;
                        l.tiles.push(t);
                    }
                }
                Some(b'L') => l.tail_padding_alignment = paren_int(c)?,
                Some(b'E') => l.element_size_in_bits = paren_int(c)?,
                Some(b'S') if c.peek_at(1) == Some(b'(') => l.memory_space = paren_int(c)?,
                Some(_) => {
                    // D(..) #(..) *(..) SC(..)(..) P(..) M(..): kept verbatim.
                    let start = c.pos;
                    while c.peek().is_some_and(|b| b != b'(') {
                        c.pos += 1;
                    }
                    let mut depth = 0i32;
                    while let Some(b) = c.peek() {
                        if b == b'(' {
                            depth += 1;
                        } else if b == b')' {
                            depth -= 1;
                            if depth == 0 {
                                c.pos += 1;
                                if c.peek() != Some(b'(') {
                                    break;
                                }
                                continue;
                            }
                        }
                        c.pos += 1;
                    }
                    l.extra.push(c.slice(start, c.pos).to_string());
                }
            }
        }
    }
    c.expect(b'}')?;
    Ok(l)
}

fn paren_int(c: &mut Cursor) -> Result<i64, ValueError> {
    c.pos += 1;
    c.expect(b'(')?;
    let v = c.int()?;
    c.expect(b')')?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tiled_layout() {
        let a = array_shape("bf16[10,200]{1,0:T(8,128)(2,1)S(1)}").unwrap();
        assert_eq!(a.dims.as_slice(), &[10, 200]);
        let l = a.layout.as_ref().unwrap();
        assert_eq!(l.minor_to_major.as_slice(), &[1, 0]);
        assert_eq!(l.tiles.len(), 2);
        assert_eq!(l.tiles[1].dims.as_slice(), &[2, 1]);
        assert_eq!(l.memory_space, 1);
        assert_eq!(a.padded_byte_size(), 16 * 256 * 2);
    }

    #[test]
    fn reads_dynamic_dims_and_scalar_tiles() {
        let a = array_shape("s32[<=4,?]").unwrap();
        assert_eq!(a.dynamic_mask, 0b11);
        assert_eq!(a.dims[1], UNBOUNDED_DIM);
        let s = array_shape("f32[]{:T(256)}").unwrap();
        assert_eq!(s.layout.unwrap().tiles[0].dims.as_slice(), &[256]);
    }

    #[test]
    fn fast_and_general_readers_agree() {
        for t in [
            "f32[8,7,7,512]{3,2,1,0}",
            "f32[]",
            "pred[3]{0}",
            "s32[2,3]",
            "f32[ 8 , 7 ]{1,0}",
            "bf16[4,5]{0,1:T(8,128)(2,1)}",
            "u4[8]{0:E(4)}",
            "token[]",
        ] {
            let g = array_shape_general(t).unwrap();
            assert_eq!(array_shape(t).unwrap(), g, "{t}");
            if let Some(f) = array_shape_fast(t) {
                assert_eq!(f, g, "{t}");
            }
        }
    }

    #[test]
    fn rejects_bad_layouts() {
        assert!(array_shape("f32[2,3]{0}").is_err());
        assert!(array_shape("f32[2,3]{0,0}").is_err());
        assert!(array_shape("f31[2]").is_err());
    }
}
