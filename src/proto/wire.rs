//! A small zero-copy reader of the protobuf wire format, used by the fast
//! `HloModuleProto` path ([`super::view`]). Every read is bounds-checked and
//! returns a [`WireError`] instead of panicking.

use std::fmt;

/// What went wrong at the wire level; `offset` is relative to the message
/// being read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// Byte offset of the problem inside the (sub-)message.
    pub offset: usize,
    /// Description.
    pub msg: &'static str,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.msg, self.offset)
    }
}

impl std::error::Error for WireError {}

/// Value of one field on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireValue<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 5.
    Fixed32(u32),
    /// Wire type 2: string, bytes, sub-message or packed repeated scalars.
    Len(&'a [u8]),
}

impl<'a> WireValue<'a> {
    /// The value as an `int64` / `int32` / `uint64` / enum (varint, two's
    /// complement; int32 negatives are sign-extended by writers).
    pub fn as_i64(self) -> Option<i64> {
        match self {
            WireValue::Varint(v) => Some(v as i64),
            _ => None,
        }
    }

    /// The value as a `bool`.
    pub fn as_bool(self) -> Option<bool> {
        match self {
            WireValue::Varint(v) => Some(v != 0),
            _ => None,
        }
    }

    /// The payload of a length-delimited field.
    pub fn as_bytes(self) -> Option<&'a [u8]> {
        match self {
            WireValue::Len(b) => Some(b),
            _ => None,
        }
    }
}

/// Cursor over the fields of one message.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reader over the fields of the message `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn err<T>(&self, msg: &'static str) -> Result<T, WireError> {
        Err(WireError {
            offset: self.pos,
            msg,
        })
    }

    #[inline(always)]
    fn varint(&mut self) -> Result<u64, WireError> {
        // fast paths: one-byte varints (tags of fields 1-15, small numbers,
        // lengths < 128) and two-byte ones (tags of fields 16-2047)
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
            if let Some(&c) = self.buf.get(self.pos + 1) {
                if c < 0x80 {
                    self.pos += 2;
                    return Ok(u64::from(b & 0x7f) | (u64::from(c) << 7));
                }
            }
        }
        self.varint_slow()
    }

    #[inline(never)]
    fn varint_slow(&mut self) -> Result<u64, WireError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return self.err("truncated varint");
            };
            self.pos += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        self.err("varint longer than 10 bytes")
    }

    #[inline(always)]
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        match self
            .pos
            .checked_add(n)
            .and_then(|end| self.buf.get(self.pos..end))
        {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => self.err("field runs past the end of its message"),
        }
    }

    /// Next `(field number, value)`, or `None` at the end of the message.
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn next(&mut self) -> Result<Option<(u32, WireValue<'a>)>, WireError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = key >> 3;
        if number == 0 || number > u64::from(u32::MAX >> 3) {
            return self.err("invalid field number");
        }
        let value = match key & 7 {
            0 => WireValue::Varint(self.varint()?),
            1 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                WireValue::Fixed64(u64::from_le_bytes(a))
            }
            2 => {
                let len = self.varint()?;
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                WireValue::Len(self.take(len)?)
            }
            5 => {
                let b = self.take(4)?;
                let mut a = [0u8; 4];
                a.copy_from_slice(b);
                WireValue::Fixed32(u32::from_le_bytes(a))
            }
            _ => return self.err("unsupported wire type (group or invalid)"),
        };
        Ok(Some((number as u32, value)))
    }
}

/// Appends the values of a repeated varint field (`int64`, `int32`, enum,
/// `bool`), packed (one length-delimited run) or not (one varint).
#[inline]
pub fn push_varints<E: Extend<i64>>(v: WireValue<'_>, out: &mut E) -> Result<(), WireError> {
    match v {
        WireValue::Varint(x) => {
            out.extend(std::iter::once(x as i64));
            Ok(())
        }
        WireValue::Len(b) => {
            let mut r = Reader::new(b);
            while r.pos < b.len() {
                let x = r.varint()?;
                out.extend(std::iter::once(x as i64));
            }
            Ok(())
        }
        _ => Err(WireError {
            offset: 0,
            msg: "wrong wire type for a repeated integer",
        }),
    }
}

/// Reads a string field (must be UTF-8).
pub fn as_str(v: WireValue<'_>) -> Result<&str, WireError> {
    match v {
        WireValue::Len(b) => std::str::from_utf8(b).map_err(|_| WireError {
            offset: 0,
            msg: "string is not valid UTF-8",
        }),
        _ => Err(WireError {
            offset: 0,
            msg: "wrong wire type for a string",
        }),
    }
}

/// Reads an integer field.
pub fn as_int(v: WireValue<'_>) -> Result<i64, WireError> {
    v.as_i64().ok_or(WireError {
        offset: 0,
        msg: "wrong wire type for an integer",
    })
}

/// Reads a sub-message field.
pub fn as_msg(v: WireValue<'_>) -> Result<&[u8], WireError> {
    v.as_bytes().ok_or(WireError {
        offset: 0,
        msg: "wrong wire type for a message",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_all_wire_types() {
        // field 1 varint 300, field 2 "hi", field 3 fixed32 1.0f, field 4 fixed64 7
        let mut b = vec![0x08, 0xac, 0x02, 0x12, 2, b'h', b'i', 0x1d];
        b.extend_from_slice(&1.0f32.to_le_bytes());
        b.push(0x21);
        b.extend_from_slice(&7u64.to_le_bytes());
        let mut r = Reader::new(&b);
        assert_eq!(r.next().unwrap(), Some((1, WireValue::Varint(300))));
        assert_eq!(r.next().unwrap(), Some((2, WireValue::Len(b"hi"))));
        assert_eq!(
            r.next().unwrap(),
            Some((3, WireValue::Fixed32(1.0f32.to_bits())))
        );
        assert_eq!(r.next().unwrap(), Some((4, WireValue::Fixed64(7))));
        assert_eq!(r.next().unwrap(), None);
    }

    #[test]
    fn packed_and_unpacked_and_negative() {
        let mut v: Vec<i64> = Vec::new();
        push_varints(WireValue::Len(&[1, 2, 0x96, 0x01]), &mut v).unwrap();
        push_varints(WireValue::Varint(u64::MAX), &mut v).unwrap();
        assert_eq!(v, vec![1, 2, 150, -1]);
        assert!(push_varints(WireValue::Len(&[0x80]), &mut v).is_err());
    }

    #[test]
    fn errors_not_panics() {
        for bad in [
            &[0x0a, 5, 1][..],
            &[0x08],
            &[0x0b],
            &[0x00],
            &[0x0d, 1, 2],
            &[0xff; 11],
        ] {
            let mut r = Reader::new(bad);
            assert!(r.next().is_err(), "{bad:?}");
        }
    }
}
