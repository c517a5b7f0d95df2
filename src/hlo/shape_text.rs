//! Reads an array-shape token that the grammar has already validated
//! (`f32[8,<=4,?]{2,1,0:T(8,128)(2,1)L(2)E(4)S(1)}`) into an [`ArrayShape`].

use super::attrs::{Cursor, ValueError};
use crate::ir::{ArrayShape, Dims, Layout, PrimitiveType, Tile, UNBOUNDED_DIM};

/// Parse an array shape token. Offsets in errors are relative to `text`.
pub fn array_shape(text: &str) -> Result<ArrayShape, ValueError> {
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
    fn rejects_bad_layouts() {
        assert!(array_shape("f32[2,3]{0}").is_err());
        assert!(array_shape("f32[2,3]{0,0}").is_err());
        assert!(array_shape("f31[2]").is_err());
    }
}
