//! Shapes and layouts: array shapes with optional (tiled) layouts, and tuples.

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use super::types::PrimitiveType;

/// Dimension list, inline up to rank 4 (NHWC, HWIO, `[batch, seq, heads, dim]`); higher
/// ranks spill to the heap. Four keeps shapes and layouts small: the compiler writes
/// ~20K of them per configuration.
pub type Dims = SmallVec<[i64; 4]>;

/// Size stored for an unbounded dynamic dimension (`?`), as in XLA.
pub const UNBOUNDED_DIM: i64 = i64::MIN;

/// One tile of a tiled layout, e.g. `(8,128)`; `*` (combine) is stored as -1.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Tile {
    pub dims: SmallVec<[i64; 2]>,
}

/// A physical layout: `{minor_to_major : T(..)(..) L(n) E(n) S(n) ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Layout {
    /// Physical dimension order, most-minor first.
    pub minor_to_major: Dims,
    /// Tiles, outermost first (`T(8,128)(2,1)` = two tiles). Inline: TPU layouts have
    /// one or two tiles of one or two dims, and the compiler builds one per array.
    pub tiles: SmallVec<[Tile; 2]>,
    /// `L(n)`: tail padding alignment in elements (0 = unset).
    pub tail_padding_alignment: i64,
    /// `E(n)`: element size in bits (0 = the type's natural size).
    pub element_size_in_bits: i64,
    /// `S(n)`: memory space (0 = default).
    pub memory_space: i64,
    /// Rare layout items kept verbatim (`D(..)`, `#(..)`, `*(..)`, `SC(..)`, `P(..)`,
    /// `M(..)`), each with its own letter prefix, in order.
    pub extra: Vec<String>,
}

impl Layout {
    /// Default (row-major) layout for a rank: minor_to_major = rank-1, ..., 0.
    pub fn row_major(rank: usize) -> Self {
        Layout {
            minor_to_major: (0..rank as i64).rev().collect(),
            ..Default::default()
        }
    }

    /// True if only minor_to_major is set (no tiles or other items).
    pub fn is_plain(&self) -> bool {
        self.tiles.is_empty()
            && self.tail_padding_alignment == 0
            && self.element_size_in_bits == 0
            && self.memory_space == 0
            && self.extra.is_empty()
    }
}

/// An array shape: element type, dimensions, dynamic flags and an optional layout.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ArrayShape {
    pub element_type: PrimitiveType,
    /// Sizes; for a bounded dynamic dim (`<=N`) the bound N, for `?` [`UNBOUNDED_DIM`].
    pub dims: Dims,
    /// Bit i set = dim i is dynamic (`<=N` or `?`).
    pub dynamic_mask: u64,
    pub layout: Option<Layout>,
}

/// An HLO shape.
// Arrays are almost every shape; boxing them would cost an allocation per shape.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Shape {
    Array(ArrayShape),
    Tuple(Vec<Shape>),
    /// `b(shape)`: a buffer shape (rare, 2026).
    Buffer(Box<Shape>),
}

impl ArrayShape {
    pub fn new(element_type: PrimitiveType, dims: &[i64]) -> Self {
        ArrayShape {
            element_type,
            dims: dims.iter().copied().collect(),
            dynamic_mask: 0,
            layout: None,
        }
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// Product of the dims (bounds for dynamic dims; unbounded counts as 1); 1 for scalars.
    pub fn element_count(&self) -> u64 {
        self.dims
            .iter()
            .map(|&d| if d < 0 { 1 } else { d as u64 })
            .fold(1u64, |a, b| a.saturating_mul(b))
    }

    pub fn is_dynamic_dim(&self, i: usize) -> bool {
        i < 64 && (self.dynamic_mask >> i) & 1 == 1
    }

    /// minor_to_major of the layout, or row-major when none is set.
    pub fn minor_to_major(&self) -> Dims {
        match self.explicit_minor_to_major() {
            Some(m2m) => m2m.into(),
            None => (0..self.dims.len() as i64).rev().collect(),
        }
    }

    /// The layout's minor_to_major when it names every dim; None when the array reads
    /// as row-major (no layout, or one of another rank): [`ArrayShape::minor_to_major`]
    /// without the copy.
    pub fn explicit_minor_to_major(&self) -> Option<&[i64]> {
        match &self.layout {
            Some(l) if l.minor_to_major.len() == self.dims.len() => Some(&l.minor_to_major),
            _ => None,
        }
    }

    /// Width of one element in bits: the layout's `E(n)` when set, else the type's
    /// storage width ([`PrimitiveType::bit_width`], pred = 8).
    pub fn element_bits(&self) -> u32 {
        self.layout
            .as_ref()
            .map(|l| l.element_size_in_bits)
            .filter(|&b| b > 0)
            .and_then(|b| u32::try_from(b).ok())
            .unwrap_or_else(|| self.element_type.bit_width())
    }

    /// Bytes as XLA's `ShapeUtil::ByteSizeOf` (ignores tiles; packed if `E(n)` is set).
    pub fn byte_size(&self) -> u64 {
        let n = self.element_count();
        match &self.layout {
            Some(l) if l.element_size_in_bits > 0 => {
                (n.saturating_mul(l.element_size_in_bits as u64)).div_ceil(8)
            }
            _ => n.saturating_mul(self.element_type.byte_size()),
        }
    }

    /// Bytes with tiled-layout padding (XLA's `ArraySize`): the first tile pads the
    /// most-minor physical dims ([`padded_physical_dims`]); L(n) rounds the element count.
    pub fn padded_byte_size(&self) -> u64 {
        let layout = match &self.layout {
            Some(l) if !l.tiles.is_empty() => l,
            _ => return self.byte_size(),
        };
        let padded = padded_physical_dims(&self.dims, &self.minor_to_major(), &layout.tiles);
        let mut count = padded.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64));
        if layout.tail_padding_alignment > 0 {
            let a = layout.tail_padding_alignment as u64;
            count = count.div_ceil(a).saturating_mul(a);
        }
        if layout.element_size_in_bits > 0 {
            (count.saturating_mul(layout.element_size_in_bits as u64)).div_ceil(8)
        } else {
            count.saturating_mul(self.element_type.byte_size())
        }
    }
}

/// The physical tiled shape of an array: its dims in physical order (major → minor, by
/// `m2m`), each of the most-minor ones rounded up to the first tile's dim (XLA's
/// `ArraySize`, spec §5.5). Tile dims beyond the rank count as size-1 dims padded to
/// the tile, so they lead the result (`f32[]{:T(256)}` → `[256]`). Unbounded dynamic
/// and negative dims count as 1. This is the one place the padded shape of a tensor is
/// computed: the IR's byte sizes, the layout passes and the kernel model's HBM bytes all
/// call it.
pub fn padded_physical_dims(dims: &[i64], m2m: &[i64], tiles: &[Tile]) -> Dims {
    let tile: &[i64] = tiles.first().map(|t| t.dims.as_slice()).unwrap_or(&[]);
    let r = tile.len();
    let rank = m2m.len();
    let size = |d: i64| match usize::try_from(d).ok().and_then(|d| dims.get(d)) {
        Some(&x) if x >= 0 => x,
        _ => 1,
    };
    if r == 0 && rank <= 4 {
        // Untiled and inline (most calls): written into the buffer whole.
        let mut buf = [0i64; 4];
        for (b, &d) in buf.iter_mut().zip(m2m.iter().rev()) {
            *b = size(d);
        }
        return Dims::from_buf_and_len(buf, rank);
    }
    let mut out = Dims::new();
    for i in (rank..r).rev() {
        let t = tile[r - 1 - i];
        if t > 0 {
            out.push(t);
        }
    }
    for (i, &d) in m2m.iter().enumerate().rev() {
        let size = size(d);
        let padded = match (i < r).then(|| tile[r - 1 - i]) {
            Some(t) if t > 0 => (size / t + i64::from(size % t != 0)).saturating_mul(t),
            _ => size,
        };
        out.push(padded);
    }
    out
}

/// An instruction's shape, shared copy-on-write (like [`crate::ir::SharedAttrs`]): the
/// compiler hands the same laid-out shape to every clone of an instruction and to
/// every compilation that gives the instruction the same layout, so cloning an
/// instruction copies a pointer instead of ~200 bytes. Reads go through `Deref`;
/// writes through `DerefMut` copy the shape first if it is shared.
#[derive(Clone)]
pub struct SharedShape(std::sync::Arc<Shape>);

impl SharedShape {
    pub fn new(shape: Shape) -> Self {
        SharedShape(std::sync::Arc::new(shape))
    }

    /// Whether both hold the very same shape (not just equal ones).
    pub fn same_as(&self, other: &SharedShape) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }

    /// The shape itself, copied only if it is shared.
    pub fn into_shape(self) -> Shape {
        std::sync::Arc::unwrap_or_clone(self.0)
    }
}

impl From<Shape> for SharedShape {
    fn from(s: Shape) -> Self {
        SharedShape::new(s)
    }
}

impl std::ops::Deref for SharedShape {
    type Target = Shape;
    fn deref(&self) -> &Shape {
        &self.0
    }
}

impl std::ops::DerefMut for SharedShape {
    fn deref_mut(&mut self) -> &mut Shape {
        std::sync::Arc::make_mut(&mut self.0)
    }
}

impl PartialEq for SharedShape {
    fn eq(&self, other: &SharedShape) -> bool {
        self.same_as(other) || *self.0 == *other.0
    }
}

impl Eq for SharedShape {}

impl PartialEq<Shape> for SharedShape {
    fn eq(&self, other: &Shape) -> bool {
        *self.0 == *other
    }
}

impl std::hash::Hash for SharedShape {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.hash(h)
    }
}

impl std::fmt::Debug for SharedShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for SharedShape {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for SharedShape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Shape::deserialize(d).map(SharedShape::new)
    }
}

impl Shape {
    pub fn array(element_type: PrimitiveType, dims: &[i64]) -> Self {
        Shape::Array(ArrayShape::new(element_type, dims))
    }

    pub fn scalar(element_type: PrimitiveType) -> Self {
        Shape::array(element_type, &[])
    }

    pub fn as_array(&self) -> Option<&ArrayShape> {
        match self {
            Shape::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_array_mut(&mut self) -> Option<&mut ArrayShape> {
        match self {
            Shape::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn is_tuple(&self) -> bool {
        matches!(self, Shape::Tuple(_))
    }

    /// Element type (`Tuple` for tuples, `Buffer` for buffer shapes).
    pub fn element_type(&self) -> PrimitiveType {
        match self {
            Shape::Array(a) => a.element_type,
            Shape::Tuple(_) => PrimitiveType::Tuple,
            Shape::Buffer(_) => PrimitiveType::Buffer,
        }
    }

    /// Dims of an array shape; empty for tuples.
    pub fn dims(&self) -> &[i64] {
        match self {
            Shape::Array(a) => &a.dims,
            _ => &[],
        }
    }

    pub fn rank(&self) -> usize {
        self.dims().len()
    }

    /// Element count of an array shape (1 for scalars), 0 for tuples.
    pub fn element_count(&self) -> u64 {
        match self {
            Shape::Array(a) => a.element_count(),
            _ => 0,
        }
    }

    /// Tuple element `i`.
    pub fn tuple_element(&self, i: usize) -> Option<&Shape> {
        match self {
            Shape::Tuple(v) => v.get(i),
            _ => None,
        }
    }

    /// Sub-shape at a shape index (`{}` = self).
    pub fn subshape(&self, index: &[i64]) -> Option<&Shape> {
        let mut s = self;
        for &i in index {
            s = s.tuple_element(usize::try_from(i).ok()?)?;
        }
        Some(s)
    }

    /// Array leaves in depth-first order.
    pub fn leaves(&self) -> Vec<&ArrayShape> {
        let mut out = Vec::new();
        fn walk<'a>(s: &'a Shape, out: &mut Vec<&'a ArrayShape>) {
            match s {
                Shape::Array(a) => out.push(a),
                Shape::Tuple(v) => v.iter().for_each(|e| walk(e, out)),
                Shape::Buffer(b) => walk(b, out),
            }
        }
        walk(self, &mut out);
        out
    }

    /// Σ ByteSizeOf over array leaves (tuple index tables excluded), as XLA's 2026
    /// cost analysis counts outputs.
    pub fn leaf_byte_size(&self) -> u64 {
        self.leaves().iter().map(|a| a.byte_size()).sum()
    }

    /// Same shape ignoring layouts (element type, dims, dynamic flags, tuple structure).
    pub fn compatible(&self, other: &Shape) -> bool {
        match (self, other) {
            (Shape::Array(a), Shape::Array(b)) => {
                a.element_type == b.element_type && a.dims == b.dims
            }
            (Shape::Tuple(a), Shape::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.compatible(y))
            }
            (Shape::Buffer(a), Shape::Buffer(b)) => a.compatible(b),
            _ => false,
        }
    }

    /// Fill a row-major layout into every array leaf that has none.
    pub fn fill_default_layouts(&mut self) {
        match self {
            Shape::Array(a) => {
                if a.layout.is_none() && a.element_type.is_array() {
                    a.layout = Some(Layout::row_major(a.rank()));
                }
            }
            Shape::Tuple(v) => v.iter_mut().for_each(|s| s.fill_default_layouts()),
            Shape::Buffer(b) => b.fill_default_layouts(),
        }
    }

    /// Remove all layouts (recursively).
    pub fn clear_layouts(&mut self) {
        match self {
            Shape::Array(a) => a.layout = None,
            Shape::Tuple(v) => v.iter_mut().for_each(|s| s.clear_layouts()),
            Shape::Buffer(b) => b.clear_layouts(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_shapes_copy_on_write() {
        let a = SharedShape::new(Shape::array(PrimitiveType::F32, &[8, 128]));
        let mut b = a.clone();
        assert!(b.same_as(&a));
        assert_eq!(b, a);
        assert_eq!(b.dims(), &[8, 128]);

        // Writing to the clone copies it first; the original keeps its shape.
        b.fill_default_layouts();
        assert!(!b.same_as(&a));
        assert_eq!(a.as_array().unwrap().layout, None);
        assert_eq!(
            b.as_array()
                .unwrap()
                .layout
                .as_ref()
                .unwrap()
                .minor_to_major[..],
            [1, 0]
        );
        assert_ne!(b, a);

        // Equal contents are equal without being the same shape.
        let c = SharedShape::new((*a).clone());
        assert!(!c.same_as(&a));
        assert_eq!(c, a);
        assert_eq!(c, Shape::array(PrimitiveType::F32, &[8, 128]));
        // The last holder gets the shape back without a copy.
        assert_eq!(c.into_shape(), Shape::array(PrimitiveType::F32, &[8, 128]));
    }

    #[test]
    fn shared_shapes_serialize_as_plain_shapes() {
        let s = Shape::Tuple(vec![
            Shape::array(PrimitiveType::Bf16, &[4]),
            Shape::scalar(PrimitiveType::S32),
        ]);
        let shared = SharedShape::from(s.clone());
        let json = serde_json::to_string(&shared).unwrap();
        assert_eq!(json, serde_json::to_string(&s).unwrap());
        let back: SharedShape = serde_json::from_str(&json).unwrap();
        assert_eq!(back, shared);
    }
}
