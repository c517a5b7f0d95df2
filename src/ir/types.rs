//! Element (primitive) types of HLO shapes.

use serde::{Deserialize, Serialize};

/// An HLO element type. The discriminants are XLA's `PrimitiveType` proto numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(i32)]
pub enum PrimitiveType {
    Invalid = 0,
    Pred = 1,
    S1 = 30,
    S2 = 26,
    S4 = 21,
    S8 = 2,
    S16 = 3,
    S32 = 4,
    S64 = 5,
    U1 = 31,
    U2 = 27,
    U4 = 22,
    U8 = 6,
    U16 = 7,
    U32 = 8,
    U64 = 9,
    F16 = 10,
    F32 = 11,
    F64 = 12,
    Bf16 = 16,
    C64 = 15,
    C128 = 18,
    F8e5m2 = 19,
    F8e4m3 = 28,
    F8e4m3fn = 20,
    F8e4m3b11fnuz = 23,
    F8e3m4 = 29,
    F8e5m2fnuz = 24,
    F8e4m3fnuz = 25,
    F8e8m0fnu = 33,
    F4e2m1fn = 32,
    Tuple = 13,
    OpaqueType = 14,
    Token = 17,
    Buffer = 34,
}

use PrimitiveType::*;

/// Every array/token type with its text name, in lookup order.
pub const TYPE_NAMES: &[(&str, PrimitiveType)] = &[
    ("pred", Pred),
    ("s1", S1),
    ("s2", S2),
    ("s4", S4),
    ("s8", S8),
    ("s16", S16),
    ("s32", S32),
    ("s64", S64),
    ("u1", U1),
    ("u2", U2),
    ("u4", U4),
    ("u8", U8),
    ("u16", U16),
    ("u32", U32),
    ("u64", U64),
    ("f16", F16),
    ("f32", F32),
    ("f64", F64),
    ("bf16", Bf16),
    ("c64", C64),
    ("c128", C128),
    ("f8e5m2", F8e5m2),
    ("f8e4m3", F8e4m3),
    ("f8e4m3fn", F8e4m3fn),
    ("f8e4m3b11fnuz", F8e4m3b11fnuz),
    ("f8e3m4", F8e3m4),
    ("f8e5m2fnuz", F8e5m2fnuz),
    ("f8e4m3fnuz", F8e4m3fnuz),
    ("f8e8m0fnu", F8e8m0fnu),
    ("f4e2m1fn", F4e2m1fn),
    ("token", Token),
    ("opaque", OpaqueType),
];

impl PrimitiveType {
    /// Lowercase HLO text name (`f32`, `bf16`, `token`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Invalid => "invalid",
            Tuple => "tuple",
            Buffer => "buffer",
            _ => TYPE_NAMES
                .iter()
                .find(|(_, t)| *t == self)
                .map(|(n, _)| *n)
                .unwrap_or("invalid"),
        }
    }

    /// Parse a text name; `opaque_type` is accepted as an alias of `opaque`.
    pub fn from_name(s: &str) -> Option<Self> {
        // The common names first, as constant-length compares (the parser calls this
        // for every shape).
        match s {
            "f32" => return Some(F32),
            "bf16" => return Some(Bf16),
            "s32" => return Some(S32),
            "pred" => return Some(Pred),
            "f16" => return Some(F16),
            "u32" => return Some(U32),
            "opaque_type" => return Some(OpaqueType),
            _ => {}
        }
        TYPE_NAMES.iter().find(|(n, _)| *n == s).map(|(_, t)| *t)
    }

    /// XLA proto enum number.
    pub fn proto_number(self) -> i32 {
        self as i32
    }

    /// Type from an XLA proto enum number.
    pub fn from_proto_number(n: i32) -> Option<Self> {
        if n == Tuple as i32 {
            return Some(Tuple);
        }
        if n == Buffer as i32 {
            return Some(Buffer);
        }
        if n == Invalid as i32 {
            return Some(Invalid);
        }
        TYPE_NAMES
            .iter()
            .find(|(_, t)| *t as i32 == n)
            .map(|(_, t)| *t)
    }

    /// Storage width of one element in bits (0 for token/tuple/opaque).
    pub fn bit_width(self) -> u32 {
        match self {
            Pred | S8 | U8 => 8,
            S1 | U1 => 1,
            S2 | U2 => 2,
            S4 | U4 | F4e2m1fn => 4,
            S16 | U16 | F16 | Bf16 => 16,
            S32 | U32 | F32 => 32,
            S64 | U64 | F64 | C64 => 64,
            C128 => 128,
            F8e5m2 | F8e4m3 | F8e4m3fn | F8e4m3b11fnuz | F8e3m4 | F8e5m2fnuz | F8e4m3fnuz
            | F8e8m0fnu => 8,
            Invalid | Tuple | OpaqueType | Token | Buffer => 0,
        }
    }

    /// Bytes per element as XLA's `ByteSizeOfPrimitiveType` (sub-byte types take one byte).
    pub fn byte_size(self) -> u64 {
        let b = self.bit_width() as u64;
        if b == 0 {
            0
        } else {
            b.div_ceil(8)
        }
    }

    pub fn is_floating(self) -> bool {
        matches!(
            self,
            F16 | F32
                | F64
                | Bf16
                | F8e5m2
                | F8e4m3
                | F8e4m3fn
                | F8e4m3b11fnuz
                | F8e3m4
                | F8e5m2fnuz
                | F8e4m3fnuz
                | F8e8m0fnu
                | F4e2m1fn
        )
    }

    pub fn is_complex(self) -> bool {
        matches!(self, C64 | C128)
    }

    pub fn is_integral(self) -> bool {
        matches!(
            self,
            S1 | S2 | S4 | S8 | S16 | S32 | S64 | U1 | U2 | U4 | U8 | U16 | U32 | U64
        )
    }

    pub fn is_signed_integral(self) -> bool {
        matches!(self, S1 | S2 | S4 | S8 | S16 | S32 | S64)
    }

    /// True for types that hold array data (everything but tuple/token/opaque).
    pub fn is_array(self) -> bool {
        !matches!(self, Invalid | Tuple | OpaqueType | Token | Buffer)
    }
}

impl std::fmt::Display for PrimitiveType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
