//! TPU tiled layouts (spec §5.5) and the layout algebra the passes need: physical
//! dimension orders, layouts that make a reshape or transpose a bitcast, and the
//! bitcast test with tiles.

use smallvec::SmallVec;

use crate::ir::{padded_physical_dims, Dims, Layout, PrimitiveType, Tile};

/// Row-major `minor_to_major` for a rank.
pub fn row_major(rank: usize) -> Dims {
    (0..rank as i64).rev().collect()
}

/// True if `m2m` is a permutation of `0..rank`.
pub fn is_permutation(m2m: &[i64], rank: usize) -> bool {
    if m2m.len() != rank {
        return false;
    }
    if rank <= 64 {
        // the dims seen, as bits
        let mut seen = 0u64;
        for &d in m2m {
            match usize::try_from(d) {
                Ok(d) if d < rank && seen & (1 << d) == 0 => seen |= 1 << d,
                _ => return false,
            }
        }
        return true;
    }
    let mut seen: SmallVec<[bool; 8]> = SmallVec::from_elem(false, rank);
    for &d in m2m {
        match usize::try_from(d).ok().and_then(|d| seen.get_mut(d)) {
            Some(s) if !*s => *s = true,
            _ => return false,
        }
    }
    true
}

/// The layout that stands for every layout of an array with the same bytes in memory:
/// its size-1 dims keep their places in `m2m` but are numbered in increasing order from
/// major to minor, as in a row-major layout. Two layouts that differ only in which
/// size-1 dim sits where lay out the same bytes (a size-1 dim moves no address), and
/// the cost model reads a layout through this one (`kernels::ops::physical_order`), so
/// that it gives them one cost and the kernel tables one key. None when `m2m` is its
/// own (fewer than two size-1 dims, or them in that order already), and when `m2m` is
/// no permutation of the dims (the model reads such a layout as row-major).
pub fn canonical_unit_order(dims: &[i64], m2m: &[i64]) -> Option<Dims> {
    let unit = |d: i64| usize::try_from(d).ok().and_then(|d| dims.get(d)) == Some(&1);
    if dims.iter().filter(|&&d| d == 1).count() < 2 || !is_permutation(m2m, dims.len()) {
        return None;
    }
    // the size-1 dims in increasing order, handed out from the major end
    let mut labels = (0..dims.len() as i64).filter(|&d| dims[d as usize] == 1);
    let mut out = Dims::from_slice(m2m);
    for slot in out.iter_mut().rev() {
        if unit(*slot) {
            *slot = labels.next()?;
        }
    }
    (out.as_slice() != m2m).then_some(out)
}

/// Physical dims, major → minor (untiled [`padded_physical_dims`]).
pub fn physical_dims(dims: &[i64], m2m: &[i64]) -> Dims {
    padded_physical_dims(dims, m2m, &[])
}

fn tile(d: &[i64]) -> Tile {
    Tile {
        dims: SmallVec::from_slice(d),
    }
}

/// The TPU tiling XLA's TPU backend attaches to an array of this element type, dims
/// and `minor_to_major` (spec §5.5; the table is in docs/passes.md):
///
/// * rank ≥ 2: 32-bit `T(s,128)` with `s` = 1, 2, 4 or 8 (the smallest that holds the
///   second-minor dim, capped at 8); 16-bit `T(8,128)(2,1)`; 8-bit and pred `T(8,128)(4,1)`;
/// * rank 1: 32-bit `T(128)`/`T(256)`/`T(1024)` by size, 16-bit `T(512)`/`T(1024)`,
///   8-bit `T(1024)`;
/// * scalars: f32 `T(256)`, other 32-bit `T(128)`, 16-bit `T(512)`, 8-bit `T(1024)`;
/// * 64-bit, complex, sub-byte and non-array types: untiled.
pub fn tpu_tiles(et: PrimitiveType, dims: &[i64], m2m: &[i64]) -> SmallVec<[Tile; 2]> {
    let mut out = SmallVec::new();
    if !et.is_array() || et.is_complex() {
        return out;
    }
    let bits = et.bit_width();
    if !matches!(bits, 8 | 16 | 32) {
        return out;
    }
    match dims.len() {
        0 => {
            let n = match bits {
                32 if et == PrimitiveType::F32 => 256,
                32 => 128,
                16 => 512,
                _ => 1024,
            };
            out.push(tile(&[n]));
        }
        1 => {
            let n = dims[0].max(1);
            let t = match bits {
                32 if n <= 128 => 128,
                32 if n <= 256 => 256,
                16 if n <= 512 => 512,
                _ => 1024,
            };
            out.push(tile(&[t]));
        }
        _ => {
            let second = m2m
                .get(1)
                .and_then(|&d| dims.get(d as usize))
                .copied()
                .unwrap_or(1);
            match bits {
                32 => {
                    let s = if second <= 1 {
                        1
                    } else if second <= 2 {
                        2
                    } else if second <= 4 {
                        4
                    } else {
                        8
                    };
                    out.push(tile(&[s, 128]));
                }
                16 => {
                    out.push(tile(&[8, 128]));
                    out.push(tile(&[2, 1]));
                }
                _ => {
                    out.push(tile(&[8, 128]));
                    out.push(tile(&[4, 1]));
                }
            }
        }
    }
    out
}

/// A TPU layout (minor_to_major plus tiles).
pub fn tpu_layout(et: PrimitiveType, dims: &[i64], m2m: &[i64]) -> Layout {
    Layout {
        minor_to_major: Dims::from_slice(m2m),
        tiles: tpu_tiles(et, dims, m2m),
        ..Default::default()
    }
}

/// Elements occupied with the first tile's padding (XLA's `ArraySize` in elements):
/// the product of [`padded_physical_dims`].
pub fn padded_elements(dims: &[i64], m2m: &[i64], tiles: &[Tile]) -> u64 {
    padded_physical_dims(dims, m2m, tiles)
        .iter()
        .fold(1u64, |a, &d| a.saturating_mul(d as u64))
}

/// Dimension groups of a reshape: for each non-degenerate input/output dim the index of
/// the smallest group of consecutive dims whose sizes multiply to the same number on
/// both sides (`usize::MAX` for size-1 dims). `None` if the element counts differ.
pub(crate) type Groups = SmallVec<[usize; 8]>;

pub(crate) fn reshape_groups(a: &[i64], b: &[i64]) -> Option<(Groups, Groups)> {
    let mut ga: Groups = SmallVec::from_elem(usize::MAX, a.len());
    let mut gb: Groups = SmallVec::from_elem(usize::MAX, b.len());
    // the first dim at or after k that is not of size 1
    let next = |d: &[i64], mut k: usize| {
        while d.get(k) == Some(&1) {
            k += 1;
        }
        k
    };
    let (mut i, mut j, mut g) = (next(a, 0), next(b, 0), 0usize);
    while i < a.len() && j < b.len() {
        let mut pa = a[i];
        ga[i] = g;
        i = next(a, i + 1);
        let mut pb = b[j];
        gb[j] = g;
        j = next(b, j + 1);
        while pa != pb {
            if pa < pb {
                pa = pa.checked_mul(*a.get(i)?)?;
                ga[i] = g;
                i = next(a, i + 1);
            } else {
                pb = pb.checked_mul(*b.get(j)?)?;
                gb[j] = g;
                j = next(b, j + 1);
            }
        }
        g += 1;
    }
    if i < a.len() || j < b.len() {
        return None;
    }
    Some((ga, gb))
}

/// Order of the groups in a physical layout, if every group's dims are contiguous and
/// in logical order (major → minor).
fn group_order(groups: &[usize], m2m: &[i64]) -> Option<SmallVec<[usize; 8]>> {
    let mut order: SmallVec<[usize; 8]> = SmallVec::new();
    let mut last: Option<(usize, usize)> = None; // (group, dim)
    for &d in m2m.iter().rev() {
        let d = d as usize;
        let g = *groups.get(d)?;
        if g == usize::MAX {
            continue;
        }
        match last {
            Some((lg, ld)) if lg == g => {
                if d < ld {
                    return None;
                }
            }
            _ => {
                if order.contains(&g) {
                    return None;
                }
                order.push(g);
            }
        }
        last = Some((g, d));
    }
    Some(order)
}

fn has_zero(d: &[i64]) -> bool {
    d.contains(&0)
}

/// Layout of the reshape result `to` that makes `reshape(from{from_m2m})` a bitcast
/// (ignoring tiles), with size-1 dims most-major. `None` if there is none.
pub fn reshape_layout(from: &[i64], from_m2m: &[i64], to: &[i64]) -> Option<Dims> {
    if has_zero(from) || has_zero(to) {
        return Some(row_major(to.len()));
    }
    let (ga, gb) = reshape_groups(from, to)?;
    let order = group_order(&ga, from_m2m)?;
    // Major → minor: size-1 dims first, then the groups in order, each in logical order.
    let mut major_to_minor: Dims = (0..to.len() as i64)
        .filter(|&d| to[d as usize] == 1)
        .collect();
    for g in order {
        for (d, &gd) in gb.iter().enumerate() {
            if gd == g {
                major_to_minor.push(d as i64);
            }
        }
    }
    if major_to_minor.len() != to.len() {
        return None;
    }
    major_to_minor.reverse();
    Some(major_to_minor)
}

/// True if `reshape(from{fm}) -> to{tm}` moves no data (ignoring tiles).
pub fn reshape_is_bitcast(from: &[i64], fm: &[i64], to: &[i64], tm: &[i64]) -> bool {
    if has_zero(from) || has_zero(to) {
        return true;
    }
    let Some((ga, gb)) = reshape_groups(from, to) else {
        return false;
    };
    match (group_order(&ga, fm), group_order(&gb, tm)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Output layout that makes `transpose(operand{in_m2m}), dimensions=perm` a bitcast.
pub fn transpose_output_layout(perm: &[i64], in_m2m: &[i64]) -> Option<Dims> {
    let mut inv: SmallVec<[i64; 8]> = SmallVec::from_elem(-1, perm.len());
    for (i, &p) in perm.iter().enumerate() {
        *inv.get_mut(usize::try_from(p).ok()?)? = i as i64;
    }
    in_m2m
        .iter()
        .map(|&d| usize::try_from(d).ok().and_then(|d| inv.get(d)).copied())
        .collect()
}

/// Operand layout that makes the transpose a bitcast given its output layout.
pub fn transpose_operand_layout(perm: &[i64], out_m2m: &[i64]) -> Option<Dims> {
    out_m2m
        .iter()
        .map(|&d| usize::try_from(d).ok().and_then(|d| perm.get(d)).copied())
        .collect()
}

/// True if the transpose moves no data (size-1 dims may move freely; ignoring tiles).
pub fn transpose_is_bitcast(
    perm: &[i64],
    in_dims: &[i64],
    in_m2m: &[i64],
    out_m2m: &[i64],
) -> bool {
    // Physical order of the non-degenerate operand dims, major → minor.
    let a: SmallVec<[i64; 8]> = in_m2m
        .iter()
        .rev()
        .copied()
        .filter(|&d| in_dims.get(d as usize).copied().unwrap_or(1) != 1)
        .collect();
    let b: SmallVec<[i64; 8]> = out_m2m
        .iter()
        .rev()
        .filter_map(|&d| perm.get(d as usize).copied())
        .filter(|&d| in_dims.get(d as usize).copied().unwrap_or(1) != 1)
        .collect();
    a == b
}

/// Whether two tiled arrays holding the same elements in the same linear order also
/// have the same bytes: same most-minor physical dim, same padded size, and the same
/// second-minor dim or both second-minor dims multiples of their tiles' row counts.
pub fn tiled_compatible(
    a_dims: &[i64],
    a_m2m: &[i64],
    a_tiles: &[Tile],
    b_dims: &[i64],
    b_m2m: &[i64],
    b_tiles: &[Tile],
) -> bool {
    if a_tiles.is_empty() && b_tiles.is_empty() {
        return true;
    }
    let padded_a = padded_elements(a_dims, a_m2m, a_tiles);
    if padded_a != padded_elements(b_dims, b_m2m, b_tiles) {
        return false;
    }
    // Arrays whose tiled bytes are their elements in linear order are compatible.
    if tiled_is_linear(a_dims, a_m2m, a_tiles) && tiled_is_linear(b_dims, b_m2m, b_tiles) {
        return true;
    }
    let minor = |d: &[i64], m: &[i64], k: usize| -> i64 {
        m.get(k)
            .and_then(|&x| d.get(x as usize))
            .copied()
            .unwrap_or(1)
    };
    if minor(a_dims, a_m2m, 0) != minor(b_dims, b_m2m, 0) {
        return false;
    }
    let (sa, sb) = (minor(a_dims, a_m2m, 1), minor(b_dims, b_m2m, 1));
    if sa == sb {
        return true;
    }
    let rows = |t: &[Tile]| -> i64 {
        t.first()
            .map(|t| {
                if t.dims.len() >= 2 {
                    t.dims[t.dims.len() - 2]
                } else {
                    1
                }
            })
            .unwrap_or(1)
            .max(1)
    };
    sa % rows(a_tiles) == 0 && sb % rows(b_tiles) == 0
}

/// Whether the tiled bytes of an array hold its elements in linear (row-major physical)
/// order: one tile level (no packing sub-tile) that is rank 1, or rank 2 whose
/// lane dim is the whole minor dim and whose row count divides the second-minor dim.
fn tiled_is_linear(dims: &[i64], m2m: &[i64], tiles: &[Tile]) -> bool {
    let dim = |k: usize| {
        m2m.get(k)
            .and_then(|&x| dims.get(x as usize))
            .copied()
            .unwrap_or(1)
    };
    match tiles {
        [] => true,
        [t] => match t.dims.as_slice() {
            [_] => true,
            [r, c] => dim(0) == *c && *r > 0 && dim(1) % r == 0,
            _ => false,
        },
        _ => false,
    }
}

/// An array as the bitcast test sees it: element type, logical dims, `minor_to_major`.
#[derive(Debug, Clone, Copy)]
pub struct Laid<'a> {
    /// Element type.
    pub et: PrimitiveType,
    /// Logical dims.
    pub dims: &'a [i64],
    /// Physical order, most-minor first.
    pub m2m: &'a [i64],
}

/// Whether a reshape (`perm` = `None`) or a transpose (`Some(dimensions)`) from `a` to
/// `b` moves no bytes on a TPU: the same element type, the same linear order of the
/// elements, and the same bytes under the TPU tiles ([`tiled_compatible`]). The one rule
/// for it: the layout pass turns such instructions into bitcasts, and the kernel model
/// costs a standalone reshape or transpose as a copy unless it holds.
pub fn is_tpu_bitcast(perm: Option<&[i64]>, a: Laid<'_>, b: Laid<'_>) -> bool {
    if a.et != b.et {
        return false;
    }
    let logical = match perm {
        Some(p) => transpose_is_bitcast(p, a.dims, a.m2m, b.m2m),
        None => reshape_is_bitcast(a.dims, a.m2m, b.dims, b.m2m),
    };
    logical && {
        let at = tpu_tiles(a.et, a.dims, a.m2m);
        let bt = tpu_tiles(b.et, b.dims, b.m2m);
        tiled_compatible(a.dims, a.m2m, &at, b.dims, b.m2m, &bt)
    }
}

/// [`layout_key`] of the one layout `m2m` of an array of `dims` as the cost model reads
/// it ([`canonical_unit_order`]); `packed` is `m2m`'s own key.
pub(crate) fn model_layout_key(dims: &[i64], m2m: &[i64], packed: u64) -> u64 {
    canonical_unit_order(dims, m2m)
        .and_then(|c| layout_key(&[c]))
        .unwrap_or(packed)
}

/// The layouts of a node with one array leaf of rank < 16, packed exactly into an
/// integer (rank, then one 4-bit digit per dimension); None for anything else.
pub(crate) fn layout_key(layouts: &[Dims]) -> Option<u64> {
    let [l] = layouts else { return None };
    if l.len() >= 16 {
        return None;
    }
    let mut k = (l.len() as u64) << 60;
    for (i, &d) in l.iter().enumerate() {
        if !(0..16).contains(&d) {
            return None;
        }
        k |= (d as u64) << (4 * i);
    }
    Some(k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use PrimitiveType::*;

    #[test]
    fn size_one_dims_are_numbered_from_major_to_minor() {
        // [1,1,1,C]: row-major is its own; every other order of the three size-1 dims
        // around C in the same places reads as it
        assert_eq!(canonical_unit_order(&[1, 1, 1, 64], &[3, 2, 1, 0]), None);
        assert_eq!(
            canonical_unit_order(&[1, 1, 1, 64], &[3, 0, 1, 2]).as_deref(),
            Some(&[3, 2, 1, 0][..])
        );
        // C minor-most or second-minor: the places of the size-1 dims are kept
        assert_eq!(
            canonical_unit_order(&[1, 1, 1, 64], &[1, 3, 0, 2]).as_deref(),
            Some(&[2, 3, 1, 0][..])
        );
        assert_eq!(canonical_unit_order(&[1, 1, 64, 64], &[1, 2, 3, 0]), None);
        assert_eq!(
            canonical_unit_order(&[1, 1, 64, 64], &[0, 2, 3, 1]).as_deref(),
            Some(&[1, 2, 3, 0][..])
        );
        // one size-1 dim, or none: nothing to choose
        assert_eq!(canonical_unit_order(&[8, 1, 56, 64], &[1, 3, 2, 0]), None);
        assert_eq!(canonical_unit_order(&[8, 56, 56, 64], &[0, 1, 2, 3]), None);
        // the same bytes: the physical dims and the tiles do not change
        for m2m in [[0, 3, 1, 2], [2, 3, 0, 1], [1, 0, 3, 2], [3, 1, 0, 2]] {
            let dims = [1, 1, 1, 256];
            let c = canonical_unit_order(&dims, &m2m).unwrap_or_else(|| Dims::from_slice(&m2m));
            assert!(is_permutation(&c, 4));
            assert_eq!(physical_dims(&dims, &c), physical_dims(&dims, &m2m));
            assert_eq!(tpu_tiles(F32, &dims, &c), tpu_tiles(F32, &dims, &m2m));
            assert_eq!(
                canonical_unit_order(&dims, &c),
                None,
                "{m2m:?}: canonical twice"
            );
        }
    }

    #[test]
    fn permutations_of_small_and_large_ranks() {
        assert!(is_permutation(&[], 0));
        assert!(is_permutation(&[1, 3, 0, 2], 4));
        assert!(!is_permutation(&[1, 3, 0, 1], 4), "a repeated dim");
        assert!(!is_permutation(&[1, 4, 0, 2], 4), "a dim past the rank");
        assert!(!is_permutation(&[1, -1, 0, 2], 4), "a negative dim");
        assert!(!is_permutation(&[1, 0], 3), "too short");
        // 64 dims fit the bit set, 70 do not: both paths agree
        for rank in [63usize, 64, 70] {
            let mut m: Vec<i64> = (0..rank as i64).rev().collect();
            assert!(is_permutation(&m, rank), "rank {rank}");
            m[rank / 2] = m[0];
            assert!(!is_permutation(&m, rank), "rank {rank}, repeated");
            m[rank / 2] = rank as i64;
            assert!(!is_permutation(&m, rank), "rank {rank}, past the rank");
        }
    }

    #[test]
    fn reshape_groups_pair_equal_products() {
        const ONE: usize = usize::MAX;
        let (ga, gb) = reshape_groups(&[8, 128, 768], &[1024, 768]).unwrap();
        assert_eq!((&ga[..], &gb[..]), (&[0, 0, 1][..], &[0, 1][..]));
        let (ga, gb) = reshape_groups(&[1, 6, 4], &[6, 2, 2]).unwrap();
        assert_eq!((&ga[..], &gb[..]), (&[ONE, 0, 1][..], &[0, 1, 1][..]));
        let (ga, gb) = reshape_groups(&[2, 3], &[3, 2]).unwrap();
        assert_eq!((&ga[..], &gb[..]), (&[0, 0][..], &[0, 0][..]));
        assert!(reshape_groups(&[6], &[7]).is_none());
        assert!(reshape_groups(&[6, 5], &[6]).is_none());
    }

    fn t(v: &[i64]) -> Tile {
        tile(v)
    }

    #[test]
    fn tiles_by_type_and_rank() {
        assert_eq!(
            tpu_tiles(F32, &[64, 256], &[1, 0]).as_slice(),
            &[t(&[8, 128])]
        );
        assert_eq!(
            tpu_tiles(F32, &[2, 1000], &[1, 0]).as_slice(),
            &[t(&[2, 128])]
        );
        assert_eq!(
            tpu_tiles(Bf16, &[16, 256], &[1, 0]).as_slice(),
            &[t(&[8, 128]), t(&[2, 1])]
        );
        assert_eq!(
            tpu_tiles(S8, &[16, 256], &[0, 1]).as_slice(),
            &[t(&[8, 128]), t(&[4, 1])]
        );
        assert_eq!(tpu_tiles(F32, &[], &[]).as_slice(), &[t(&[256])]);
        assert_eq!(tpu_tiles(S32, &[], &[]).as_slice(), &[t(&[128])]);
        assert_eq!(tpu_tiles(Pred, &[], &[]).as_slice(), &[t(&[1024])]);
        assert_eq!(tpu_tiles(F32, &[4096], &[0]).as_slice(), &[t(&[1024])]);
        assert!(tpu_tiles(F64, &[8, 8], &[1, 0]).is_empty());
    }

    #[test]
    fn padded_sizes_match_the_ir() {
        for (et, dims, m2m) in [
            (F32, vec![3i64, 5], vec![1i64, 0]),
            (Bf16, vec![10, 200], vec![1, 0]),
            (F32, vec![8, 112, 112, 64], vec![3, 0, 2, 1]),
            (S8, vec![7, 3, 129], vec![0, 2, 1]),
            (F32, vec![1000], vec![0]),
            (F32, vec![], vec![]),
        ] {
            let mut a = crate::ir::ArrayShape::new(et, &dims);
            a.layout = Some(tpu_layout(et, &dims, &m2m));
            let tiles = tpu_tiles(et, &dims, &m2m);
            assert_eq!(
                padded_elements(&dims, &m2m, &tiles) * et.byte_size(),
                a.padded_byte_size(),
                "{dims:?}"
            );
        }
        // bf16[10,200]{1,0:T(8,128)(2,1)} -> 16 x 256 elements (spec example).
        assert_eq!(
            padded_elements(&[10, 200], &[1, 0], &tpu_tiles(Bf16, &[10, 200], &[1, 0])),
            16 * 256
        );
    }

    #[test]
    fn reshape_layouts() {
        // [6] -> [2,3] row-major is a bitcast.
        assert!(reshape_is_bitcast(&[6], &[0], &[2, 3], &[1, 0]));
        assert!(!reshape_is_bitcast(&[6], &[0], &[2, 3], &[0, 1]));
        // [4,6]{0,1} -> [4,2,3]: the split dim 1 is major; output layout {0,2,1}.
        assert_eq!(
            reshape_layout(&[4, 6], &[0, 1], &[4, 2, 3])
                .unwrap()
                .as_slice(),
            &[0, 2, 1]
        );
        assert!(reshape_is_bitcast(&[4, 6], &[0, 1], &[4, 2, 3], &[0, 2, 1]));
        // Merging dims that are not adjacent physically has no bitcast layout.
        assert_eq!(reshape_layout(&[2, 3, 4], &[1, 2, 0], &[6, 4]), None);
        // Degenerate dims go most-major.
        assert_eq!(
            reshape_layout(&[64], &[0], &[1, 1, 1, 64])
                .unwrap()
                .as_slice(),
            &[3, 2, 1, 0]
        );
        // [4,8,8,64]{3,0,2,1} (H,W,N,C physically) -> [4,64,64] with the merged H*W major.
        assert!(reshape_is_bitcast(
            &[4, 8, 8, 64],
            &[3, 0, 2, 1],
            &[4, 64, 64],
            &[2, 0, 1]
        ));
        assert!(!reshape_is_bitcast(
            &[4, 8, 8, 64],
            &[3, 0, 2, 1],
            &[4, 64, 64],
            &[2, 1, 0]
        ));
    }

    #[test]
    fn transposes() {
        // transpose [A,B] -> [B,A] with dimensions={1,0}: operand {1,0} → output {0,1}.
        let out = transpose_output_layout(&[1, 0], &[1, 0]).unwrap();
        assert_eq!(out.as_slice(), &[0, 1]);
        assert_eq!(
            transpose_operand_layout(&[1, 0], &out).unwrap().as_slice(),
            &[1, 0]
        );
        assert!(transpose_is_bitcast(&[1, 0], &[3, 5], &[1, 0], &[0, 1]));
        assert!(!transpose_is_bitcast(&[1, 0], &[3, 5], &[1, 0], &[1, 0]));
        // Moving a size-1 dim is free.
        assert!(transpose_is_bitcast(
            &[1, 0, 2],
            &[1, 5, 7],
            &[2, 1, 0],
            &[2, 1, 0]
        ));
    }

    #[test]
    fn tiled_bitcasts() {
        let t8 = [t(&[8, 128])];
        // [16,128] -> [2,8,128]: same bytes.
        assert!(tiled_compatible(
            &[16, 128],
            &[1, 0],
            &t8,
            &[2, 8, 128],
            &[2, 1, 0],
            &t8
        ));
        // f32[16,128]{T(8,128)} -> f32[2048]{T(1024)}: both hold the elements in linear
        // order (each 8x128 tile is 8 whole rows).
        assert!(tiled_compatible(
            &[16, 128],
            &[1, 0],
            &t8,
            &[2048],
            &[0],
            &[t(&[1024])]
        ));
        // bf16 T(8,128)(2,1) packs row pairs into words: not linear.
        assert!(!tiled_compatible(
            &[16, 128],
            &[1, 0],
            &[t(&[8, 128]), t(&[2, 1])],
            &[2048],
            &[0],
            &[t(&[1024])]
        ));
        // [10,128] -> [2,5,128]: padding differs.
        assert!(!tiled_compatible(
            &[10, 128],
            &[1, 0],
            &t8,
            &[2, 5, 128],
            &[2, 1, 0],
            &t8
        ));
        // [8,256] vs [8,2,128]: the minor dim changes.
        assert!(!tiled_compatible(
            &[8, 256],
            &[1, 0],
            &t8,
            &[8, 2, 128],
            &[2, 1, 0],
            &[t(&[2, 128])]
        ));
        // [256] -> [1,1,1,256].
        assert!(tiled_compatible(
            &[256],
            &[0],
            &[t(&[256])],
            &[1, 1, 1, 256],
            &[3, 2, 1, 0],
            &[t(&[1, 128])]
        ));
    }
}
