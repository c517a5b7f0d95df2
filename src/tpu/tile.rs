//! Tile configurations: resolution against a kernel, the compiler-default
//! tile, and enumeration / seeded sampling of valid configurations.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;

use super::error::ModelError;
use smallvec::SmallVec;

use super::kernel::{
    DimMap, KernelDesc, KernelKind, MxuRole, ReduceAxis, ReductionKind, TensorDesc, MAX_DIMS,
};
use super::model::{dim_bit, footprint_with, input_reads, input_tile_bytes, vmem_footprint};
use super::target::TpuTarget;
use crate::ir::PrimitiveType;
use crate::passes::tiling::{row_major, tpu_tiles};
use crate::rng::SplitMix64;

/// Tile sizes in TpuGraphs `TileSizeConfig` form, with the semantics of the real TPU
/// tuning data (spec `tpugraphs_real_configs.md` §3): every bound **counts tiles of a
/// tensor's physical tiled shape**, in physical order major → minor. The most-minor
/// physical dims are counted in units of the tensor's layout tile (8 rows × 128 lanes
/// for `T(8,128)`, 1,024 for a rank-1 `T(1024)`: [`tile_units`]), every other dim in
/// elements. A bound need not divide its extent; the last tile along a dim is partial.
///
/// * `output_bounds` tile the kernel's *iteration-space tensor* ([`bounds_tensor`]): a
///   reduction's reduced operand, any other kernel's output (a convolution or matmul
///   kernel: the convolution's output). Empty = compiler default.
/// * `kernel_bounds` tile the kernel operand (`KernelDesc::kernel_operand`: the
///   convolution filter / matmul right-hand side). Entries on its reduction dims (K,
///   window taps) set their tile; entries on output dims are ignored (`output_bounds`
///   decides). Empty = default.
/// * `input_bounds` tile input 0, for reduction dims that neither list sets. Empty in
///   real data (the compiler infers it); empty = default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TileConfig {
    /// Tile counts over the iteration-space tensor.
    pub output_bounds: Vec<i64>,
    /// Tile counts over the kernel operand.
    pub kernel_bounds: Vec<i64>,
    /// Tile counts over input 0.
    pub input_bounds: Vec<i64>,
}

/// One tile-count unit per physical dim of a tensor ([`tile_units`]).
pub type TileUnits = SmallVec<[i64; MAX_DIMS]>;

/// The [`tile_units`] of the tensors a kernel's bounds count tiles of (at most three:
/// the bounds tensor, the kernel operand, input 0), each found once.
#[derive(Default)]
struct BoundUnits<'d>(SmallVec<[(&'d TensorDesc, TileUnits); 3]>);

impl<'d> BoundUnits<'d> {
    /// The unit of physical dim `j` of `t`.
    fn unit(&mut self, t: &'d TensorDesc, j: usize) -> i64 {
        let k = match self.0.iter().position(|(x, _)| std::ptr::eq(*x, t)) {
            Some(k) => k,
            None => {
                self.0.push((t, tile_units(t)));
                self.0.len() - 1
            }
        };
        self.0[k].1[j]
    }
}

/// Tile-count units of a tensor's physical dims (major → minor): the dims of its TPU
/// layout's first tile on the minor dims (the tiling [`tpu_tiles`] gives the array:
/// `(s,128)` for 32-bit with s = 1…8 rows by the second-minor extent, `(8,128)` for
/// 16- and 8-bit, `T(128)`…`T(1024)` for rank 1), 1 on every other dim.
pub fn tile_units(t: &TensorDesc) -> TileUnits {
    let r = t.dims.len();
    let mut u: TileUnits = smallvec::smallvec![1; r];
    let et = match t.storage_bits() {
        32 => PrimitiveType::F32,
        16 => PrimitiveType::Bf16,
        8 => PrimitiveType::S8,
        _ => return u,
    };
    if let Some(tile) = tpu_tiles(et, &t.dims, &row_major(r)).first() {
        let k = tile.dims.len().min(r);
        for (j, &td) in tile.dims[tile.dims.len() - k..].iter().enumerate() {
            u[r - k + j] = td.max(1);
        }
    }
    u
}

/// Extents of a tensor's physical dims in tiles (`⌈dim / unit⌉`, [`tile_units`]): the
/// largest bound each dim takes.
pub fn tile_extents(t: &TensorDesc) -> SmallVec<[i64; MAX_DIMS]> {
    t.dims
        .iter()
        .zip(tile_units(t))
        .map(|(&d, u)| (d.max(1) + u - 1) / u)
        .collect()
}

/// The tensor `output_bounds` count tiles of, and the iteration dim each of its physical
/// dims is: a reduction's reduced operand (the input indexed by every iteration dim, one
/// each), any other kernel's output (physical dim `i` = iteration dim `i`).
pub fn bounds_tensor(desc: &KernelDesc) -> (&TensorDesc, SmallVec<[Option<usize>; MAX_DIMS]>) {
    let n = desc.n_iter();
    if matches!(desc.kind, KernelKind::Reduction) {
        for inp in &desc.inputs {
            let mut seen = [false; MAX_DIMS];
            let all = inp.dims.len() == n
                && inp.dims.iter().all(|m| match *m {
                    DimMap::Iter(d) if d < n && d < MAX_DIMS && !seen[d] => {
                        seen[d] = true;
                        true
                    }
                    _ => false,
                });
            if all {
                let map = inp
                    .dims
                    .iter()
                    .map(|m| match *m {
                        DimMap::Iter(d) => Some(d),
                        _ => None,
                    })
                    .collect();
                return (&inp.tensor, map);
            }
        }
    }
    let map = (0..desc.output_rank()).map(Some).collect();
    (&desc.output, map)
}

impl TileConfig {
    /// The "let the compiler choose" configuration.
    pub fn default_config() -> Self {
        Self::default()
    }

    /// The TpuGraphs-form config (tile counts) of per-iteration-dim tile sizes `sizes`
    /// in elements (output dims then reduction dims).
    pub fn from_sizes(desc: &KernelDesc, sizes: &[i64]) -> Self {
        let r = desc.output_rank();
        let at = |d: usize| sizes.get(d).copied().unwrap_or(1).max(1);
        let bound_of = |m: &DimMap, size: i64| -> i64 {
            match *m {
                DimMap::Iter(d) => at(d).min(size),
                DimMap::Window {
                    out,
                    win,
                    stride,
                    dilation,
                } => ((at(out) - 1) * stride + (at(win) - 1) * dilation + 1).min(size),
                DimMap::Full => size,
                DimMap::Outer { iter, inner } => ((at(iter) + inner - 1) / inner.max(1)).min(size),
            }
        };
        let counts = |t: &TensorDesc, elems: &mut dyn Iterator<Item = i64>| -> Vec<i64> {
            elems
                .zip(tile_units(t))
                .map(|(e, u)| (e.max(1) + u - 1) / u)
                .collect()
        };
        // An operand's tile in counts: each of its dims' element bound, in its units.
        let operand_counts = |inp: &super::kernel::InputDesc| {
            counts(
                &inp.tensor,
                &mut inp
                    .dims
                    .iter()
                    .zip(&inp.tensor.dims)
                    .map(|(m, &s)| bound_of(m, s)),
            )
        };
        let mut covered = [false; MAX_DIMS];
        let (bt, map) = bounds_tensor(desc);
        let output_bounds = counts(
            bt,
            &mut bt.dims.iter().zip(&map).map(|(&size, m)| match *m {
                Some(d) => {
                    if let Some(c) = covered.get_mut(d) {
                        *c = true;
                    }
                    at(d).min(size)
                }
                None => size,
            }),
        );
        let mut kernel_bounds = Vec::new();
        if let Some(ko) = desc.kernel_operand.and_then(|k| desc.inputs.get(k)) {
            for m in &ko.dims {
                if let DimMap::Iter(d) = *m {
                    if let Some(c) = covered.get_mut(d) {
                        *c = true;
                    }
                }
            }
            kernel_bounds = operand_counts(ko);
        }
        let needs_input = (r..desc.n_iter()).any(|d| !covered.get(d).copied().unwrap_or(true));
        let mut input_bounds = Vec::new();
        if needs_input {
            if let Some(i0) = desc.inputs.first() {
                input_bounds = operand_counts(i0);
            }
        }
        Self {
            output_bounds,
            kernel_bounds,
            input_bounds,
        }
    }
}

fn check_bound(
    field: &'static str,
    index: usize,
    value: i64,
    extent: i64,
) -> Result<(), ModelError> {
    if value < 1 || value > extent {
        Err(ModelError::BoundOutOfRange {
            field,
            index,
            value,
            extent,
        })
    } else {
        Ok(())
    }
}

/// Sets `t[d]` (elements) from the tile counts `bounds` over `tensor`'s physical dims,
/// for the dims `iter_of` maps to an iteration dim that `take` accepts and that is not
/// set yet. Every bound is checked against its dim's extent in tiles.
fn apply_counts(
    field: &'static str,
    bounds: &[i64],
    tensor: &TensorDesc,
    iter_of: impl Fn(usize) -> Option<usize>,
    take: impl Fn(usize) -> bool,
    t: &mut [i64; MAX_DIMS],
) -> Result<(), ModelError> {
    if bounds.len() != tensor.dims.len() {
        return Err(ModelError::BoundsLength {
            field,
            expected: tensor.dims.len(),
            got: bounds.len(),
        });
    }
    let units = tile_units(tensor);
    for (j, (&b, &size)) in bounds.iter().zip(&tensor.dims).enumerate() {
        let u = units[j];
        check_bound(field, j, b, (size.max(1) + u - 1) / u)?;
        if let Some(d) = iter_of(j) {
            if d < MAX_DIMS && take(d) && t[d] == 0 {
                t[d] = b.saturating_mul(u).min(size).max(1);
            }
        }
    }
    Ok(())
}

/// The element tile sizes a config sets (0 = not set), without defaults.
fn configured_sizes(
    desc: &KernelDesc,
    cfg: &TileConfig,
    t: &mut [i64; MAX_DIMS],
) -> Result<(), ModelError> {
    let r = desc.output_rank();
    let n = desc.n_iter();
    *t = [0; MAX_DIMS];
    if !cfg.output_bounds.is_empty() {
        let (bt, map) = bounds_tensor(desc);
        apply_counts(
            "output_bounds",
            &cfg.output_bounds,
            bt,
            |j| map[j],
            |d| d < n,
            t,
        )?;
    }
    if !cfg.kernel_bounds.is_empty() {
        let Some(ko) = desc.kernel_operand.and_then(|k| desc.inputs.get(k)) else {
            return Err(ModelError::BoundsLength {
                field: "kernel_bounds",
                expected: 0,
                got: cfg.kernel_bounds.len(),
            });
        };
        let iter = |j: usize| match ko.dims.get(j) {
            Some(&DimMap::Iter(d)) => Some(d),
            _ => None,
        };
        apply_counts(
            "kernel_bounds",
            &cfg.kernel_bounds,
            &ko.tensor,
            iter,
            |d| d >= r && d < n,
            t,
        )?;
    }
    if !cfg.input_bounds.is_empty() {
        let Some(i0) = desc.inputs.first() else {
            return Err(ModelError::BoundsLength {
                field: "input_bounds",
                expected: 0,
                got: cfg.input_bounds.len(),
            });
        };
        let iter = |j: usize| match i0.dims.get(j) {
            Some(&DimMap::Iter(d)) => Some(d),
            _ => None,
        };
        apply_counts(
            "input_bounds",
            &cfg.input_bounds,
            &i0.tensor,
            iter,
            |d| d >= r && d < n,
            t,
        )?;
        for (d, td) in t.iter_mut().enumerate().take(n).skip(r) {
            if *td != 0 {
                *td = (*td).min(desc.iter_extent(d));
            }
        }
    }
    Ok(())
}

/// Resolves a config to per-iteration-dim tile sizes in elements (allocation-free):
/// what the config sets, and the compiler's default tile ([`default_sizes`]) for the
/// rest.
pub(crate) fn resolve_sizes(
    desc: &KernelDesc,
    cfg: &TileConfig,
    target: &TpuTarget,
    t: &mut [i64; MAX_DIMS],
) -> Result<(), ModelError> {
    let n = desc.n_iter();
    configured_sizes(desc, cfg, t)?;
    if t[..n].contains(&0) {
        let mut def = [0i64; MAX_DIMS];
        default_sizes(desc, target, &mut def);
        for d in 0..n {
            if t[d] == 0 {
                t[d] = def[d];
            }
        }
    }
    Ok(())
}

/// Which bound sets the tile of iteration dim `d` (the field and the index in it), by
/// the precedence [`resolve_sizes`] applies: `output_bounds` over the iteration-space
/// tensor, then `kernel_bounds` (reduction dims), then `input_bounds`; `None` when no
/// list reaches the dim (its tile is the default).
pub fn bound_of_dim(desc: &KernelDesc, d: usize) -> Option<(&'static str, usize)> {
    bound_of_dim_in(desc, &bounds_tensor(desc).1, d)
}

/// [`bound_of_dim`] given the iteration dims of the [`bounds_tensor`]'s dims (`map`).
fn bound_of_dim_in(
    desc: &KernelDesc,
    map: &[Option<usize>],
    d: usize,
) -> Option<(&'static str, usize)> {
    let r = desc.output_rank();
    if let Some(j) = map.iter().position(|&m| m == Some(d)) {
        return Some(("output_bounds", j));
    }
    if d < r {
        return None;
    }
    let find = |inp: Option<&super::kernel::InputDesc>| {
        inp.and_then(|i| i.dims.iter().position(|m| *m == DimMap::Iter(d)))
    };
    if let Some(j) = find(desc.kernel_operand.and_then(|k| desc.inputs.get(k))) {
        return Some(("kernel_bounds", j));
    }
    find(desc.inputs.first()).map(|j| ("input_bounds", j))
}

/// The tensor and the physical dim of it whose bound sets iteration dim `d`
/// ([`bound_of_dim`]), given the [`bounds_tensor`] `bt` of `desc`.
fn bounded_dim<'d>(
    desc: &'d KernelDesc,
    bt: &(&'d TensorDesc, SmallVec<[Option<usize>; MAX_DIMS]>),
    d: usize,
) -> Option<(&'d TensorDesc, usize)> {
    match bound_of_dim_in(desc, &bt.1, d)? {
        ("output_bounds", j) => Some((bt.0, j)),
        ("kernel_bounds", j) => desc
            .kernel_operand
            .and_then(|k| desc.inputs.get(k))
            .map(|i| (&i.tensor, j)),
        (_, j) => desc.inputs.first().map(|i| (&i.tensor, j)),
    }
}

impl TileConfig {
    /// The bound `field[index]`, if the list has it.
    pub fn bound(&self, field: &str, index: usize) -> Option<i64> {
        match field {
            "output_bounds" => self.output_bounds.get(index),
            "kernel_bounds" => self.kernel_bounds.get(index),
            "input_bounds" => self.input_bounds.get(index),
            _ => None,
        }
        .copied()
    }
}

/// The element tile sizes of every iteration dim that `cfg` stands for on `desc`: what
/// the model evaluates (the default tile where the config is silent).
pub fn tile_sizes(
    desc: &KernelDesc,
    cfg: &TileConfig,
    target: &TpuTarget,
) -> Result<Vec<i64>, ModelError> {
    let mut t = [0i64; MAX_DIMS];
    resolve_sizes(desc, cfg, target, &mut t)?;
    Ok(t[..desc.n_iter().min(MAX_DIMS)].to_vec())
}

/// Hardware alignment of iteration dim `d`: lanes for the minor dim, the
/// sublane tile for the second-minor dim, the MXU width for N and K, 1 else.
pub fn dim_alignment(desc: &KernelDesc, target: &TpuTarget, d: usize) -> i64 {
    let r = desc.output_rank();
    let lanes = i64::from(target.lanes);
    let mxu = i64::from(target.mxu_size);
    if d < r {
        let mxu_role = match &desc.kind {
            KernelKind::Mxu(s) => s.roles.get(d).copied(),
            _ => None,
        };
        if r == 1 {
            return lanes * i64::from(target.sublanes);
        }
        if d + 1 == r {
            return if mxu_role == Some(MxuRole::N) {
                mxu.max(lanes)
            } else {
                lanes
            };
        }
        if d + 2 == r {
            return target.sublane_tile(desc.output.elem_bits);
        }
        return 1;
    }
    let in_bits = desc
        .inputs
        .first()
        .map(|i| i.tensor.elem_bits)
        .unwrap_or(32);
    match desc.reduction_dims.get(d - r).map(|x| x.kind) {
        Some(ReductionKind::Contraction) => mxu,
        Some(ReductionKind::Reduce(ReduceAxis::Lanes)) => lanes,
        Some(ReductionKind::Reduce(ReduceAxis::Sublanes)) => target.sublane_tile(in_bits),
        _ => 1,
    }
}

/// Alignment the operands' physical tiling asks of iteration dim `d` in the default
/// tile: a dim that indexes an input's minor (lane) dim keeps multiples of the lane
/// count, one that indexes its second-minor dim multiples of the sublane tile. Cutting
/// such a dim finer does not shrink the input's padded tile (the (8, 128) tile pads
/// it back), it only multiplies the steps that fetch it.
fn operand_alignment(desc: &KernelDesc, target: &TpuTarget, d: usize) -> i64 {
    let mut a = 1;
    for inp in &desc.inputs {
        let k = inp.dims.len();
        // A window dim of the input is indexed by its output dim and its taps.
        let indexes = |j: usize| {
            let hit = match inp.dims.get(j) {
                Some(&DimMap::Iter(i)) => i == d,
                Some(&DimMap::Window { out, win, .. }) => out == d || win == d,
                _ => false,
            };
            hit && inp.tensor.dims.get(j).is_some_and(|&s| s > 1)
        };
        if k >= 1 && indexes(k - 1) {
            a = a.max(i64::from(target.lanes));
        }
        if k >= 2 && indexes(k - 2) {
            a = a.max(target.sublane_tile(inp.tensor.elem_bits));
        }
    }
    a
}

/// Shrink class of a dim in the default-tile search (lower shrinks first).
fn shrink_class(desc: &KernelDesc, d: usize, t: i64) -> u8 {
    let r = desc.output_rank();
    match &desc.kind {
        KernelKind::Mxu(spec) => {
            if d < r {
                match spec.roles.get(d) {
                    Some(MxuRole::Batch) => 0,
                    _ => 1,
                }
            } else {
                match desc.reduction_dims.get(d - r).map(|x| x.kind) {
                    Some(ReductionKind::Contraction) if t > 512 => 0,
                    Some(ReductionKind::Contraction) => 3,
                    // A filter gradient's window (part of its contraction, and the
                    // extent of both inputs' tiles): cut it before M and N.
                    _ if desc.is_big_window(d) => 0,
                    _ => 2,
                }
            }
        }
        _ => {
            if d < r {
                if d + 1 == r {
                    2
                } else if d + 2 == r {
                    1
                } else {
                    0
                }
            } else {
                match desc.reduction_dims.get(d - r).map(|x| x.kind) {
                    Some(ReductionKind::Reduce(ReduceAxis::Lanes)) => 2,
                    Some(ReductionKind::Reduce(ReduceAxis::Sublanes)) => 1,
                    _ => 0,
                }
            }
        }
    }
}

fn halve(t: i64, a: i64) -> i64 {
    let h = (t + 1) / 2;
    ((h + a - 1) / a) * a
}

/// Default tile sizes (allocation-free): start from the whole iteration
/// space and halve (keeping hardware alignment) until the double-buffered
/// footprint fits the scoped VMEM limit. MXU kernels first cut batch dims,
/// K down to 512 and the window taps of a filter gradient
/// ([`KernelDesc::is_big_window`]), then the larger of M/N (balanced tiles
/// maximise intensity), then other window taps, then K further. Other kernels cut major
/// dims first, then the sublane dim, and keep the lane dim whole longest. Dims that
/// index an input's two minor physical dims keep its tile alignment
/// ([`operand_alignment`]) unless nothing else fits.
pub(crate) fn default_sizes(desc: &KernelDesc, target: &TpuTarget, t: &mut [i64; MAX_DIMS]) {
    search_default_sizes(desc, target, t);
    // The compiler's tile is a tile configuration like any other: each size is what
    // some tile count stands for ([`TileConfig`]), so that the default and the config
    // `default_tile` writes for it are the same tile.
    // (What `configured_sizes(from_sizes(t))` gives, without allocating.)
    let bt = bounds_tensor(desc);
    let mut units = BoundUnits::default();
    for (d, td) in t.iter_mut().enumerate().take(desc.n_iter()) {
        if let Some((tensor, j)) = bounded_dim(desc, &bt, d) {
            let (u, size) = (units.unit(tensor, j), tensor.dims[j]);
            *td = (((*td).clamp(1, size.max(1)) + u - 1) / u * u)
                .min(size)
                .max(1);
        }
    }
}

/// The halving search of [`default_sizes`], in elements.
fn search_default_sizes(desc: &KernelDesc, target: &TpuTarget, t: &mut [i64; MAX_DIMS]) {
    let n = desc.n_iter().min(MAX_DIMS);
    let mut hw = [1i64; MAX_DIMS];
    let mut align = [1i64; MAX_DIMS];
    for d in 0..n {
        t[d] = desc.iter_extent(d).max(1);
        hw[d] = dim_alignment(desc, target, d).max(1);
        align[d] = hw[d].max(operand_alignment(desc, target, d));
    }
    let fp = vmem_footprint(desc, target, &t[..n]);
    if fp <= target.vmem_limit_bytes {
        return;
    }
    // Dims the operands' tiling asks to keep are cut only when nothing else makes the
    // tiles fit (then the search starts again from the whole space). Whether a search
    // fits is known before it runs: see [`smallest_tile`].
    let (mut small, mut small_hw) = ([1i64; MAX_DIMS], [1i64; MAX_DIMS]);
    if fits(
        desc,
        target,
        smallest_tile(&t[..n], &align[..n], &mut small),
    ) {
        shrink_to_fit(desc, target, &mut t[..n], &align[..n], fp);
    } else if fits(
        desc,
        target,
        smallest_tile(&t[..n], &hw[..n], &mut small_hw),
    ) {
        shrink_to_fit(desc, target, &mut t[..n], &hw[..n], fp);
    } else {
        t[..n].copy_from_slice(&small_hw[..n]);
    }
}

/// The tile [`shrink_to_fit`] ends at when nothing fits, into `out`: every dim of `t`
/// halved ([`halve`]) as long as that cuts it, which is its alignment, or its size when
/// smaller, in whatever order the dims are cut. The footprint only grows with each
/// dim, so the halving finds a tile that fits exactly when this one fits, and ends
/// here when it does not.
fn smallest_tile<'o>(t: &[i64], align: &[i64], out: &'o mut [i64; MAX_DIMS]) -> &'o [i64] {
    for (d, (&td, &a)) in t.iter().zip(align).enumerate() {
        out[d] = td.min(a);
    }
    &out[..t.len()]
}

/// Halve dims (lowest [`shrink_class`] first, then the largest tile) down to their
/// alignment until the footprint (`fp` at `t`) fits VMEM; false if it still does not.
fn shrink_to_fit(
    desc: &KernelDesc,
    target: &TpuTarget,
    t: &mut [i64],
    align: &[i64],
    mut fp: u64,
) -> bool {
    let limit = target.vmem_limit_bytes;
    // Bytes each possible cut saves (None: the dim is at its alignment), and the
    // footprint after it (the next step's footprint when that cut is taken).
    let mut saved = [None::<u64>; MAX_DIMS];
    let mut after = [0u64; MAX_DIMS];
    // Each input's tile bytes at `t`, once computed, kept while no dim it reads is cut:
    // a trial cut of dim d computes anew only the inputs that read d.
    let reads: SmallVec<[u64; 8]> = desc.inputs.iter().map(input_reads).collect();
    let mut kept: SmallVec<[Option<f64>; 8]> = SmallVec::from_elem(None, reads.len());
    // Each iteration halves one dim, so the loop ends after Σ log2(extent) steps.
    for _ in 0..(64 * MAX_DIMS) {
        if fp <= limit {
            return true;
        }
        // A cut that saves less than half of the best one is not considered (halving
        // N does not shrink an LHS that fills VMEM). When no single cut saves bytes
        // (padding can absorb one halving), every possible cut is.
        let mut most = 0;
        for d in 0..t.len() {
            let nt = halve(t[d], align[d]);
            saved[d] = (nt < t[d]).then(|| {
                let old = std::mem::replace(&mut t[d], nt);
                let cut: &[i64] = t;
                let bit = dim_bit(d);
                // (an input that does not read d has the same bytes at `cut` as at `t`)
                after[d] = footprint_with(desc, target, cut, |k, inp| {
                    if reads[k] & bit != 0 {
                        input_tile_bytes(inp, cut, target)
                    } else {
                        *kept[k].get_or_insert_with(|| input_tile_bytes(inp, cut, target))
                    }
                });
                debug_assert_eq!(after[d], vmem_footprint(desc, target, cut));
                t[d] = old;
                fp.saturating_sub(after[d])
            });
            most = most.max(saved[d].unwrap_or(0));
        }
        let mut best: Option<(u8, f64, usize)> = None;
        for d in 0..t.len() {
            match saved[d] {
                Some(s) if s * 2 >= most => {}
                _ => continue,
            }
            let class = shrink_class(desc, d, t[d]);
            let score = t[d] as f64;
            let better = match best {
                None => true,
                Some((bc, bs, _)) => class < bc || (class == bc && score > bs),
            };
            if better {
                best = Some((class, score, d));
            }
        }
        match best {
            Some((_, _, d)) => {
                t[d] = halve(t[d], align[d]);
                fp = after[d];
                let bit = dim_bit(d);
                for (k, r) in kept.iter_mut().zip(&reads) {
                    if r & bit != 0 {
                        *k = None;
                    }
                }
            }
            None => return false,
        }
    }
    false
}

/// The tile an XLA-like compiler would pick by default (see [`default_sizes`]).
pub fn default_tile(desc: &KernelDesc, target: &TpuTarget) -> TileConfig {
    let mut t = [0i64; MAX_DIMS];
    default_sizes(desc, target, &mut t);
    TileConfig::from_sizes(desc, &t[..desc.n_iter().min(MAX_DIMS)])
}

/// Candidate tile sizes per iteration dim: hardware-aligned powers of two
/// (`align·2^i` below the extent) plus the full extent.
pub fn tile_candidates(desc: &KernelDesc, target: &TpuTarget) -> Vec<Vec<i64>> {
    (0..desc.n_iter().min(MAX_DIMS))
        .map(|d| {
            let e = desc.iter_extent(d).max(1);
            let a = dim_alignment(desc, target, d).max(1);
            let mut v = Vec::new();
            let mut x = a;
            while x < e {
                v.push(x);
                x = x.saturating_mul(2);
            }
            v.push(e);
            v
        })
        .collect()
}

fn fits(desc: &KernelDesc, target: &TpuTarget, sizes: &[i64]) -> bool {
    vmem_footprint(desc, target, sizes) <= target.vmem_limit_bytes
}

/// All VMEM-feasible configs from [`tile_candidates`] in lexicographic
/// order (first dim slowest), at most `limit` of them.
pub fn enumerate_tiles(desc: &KernelDesc, target: &TpuTarget, limit: usize) -> Vec<TileConfig> {
    let cands = tile_candidates(desc, target);
    let n = cands.len();
    let mut out = Vec::new();
    if n == 0 {
        if limit > 0 {
            out.push(TileConfig::from_sizes(desc, &[]));
        }
        return out;
    }
    let mut idx = vec![0usize; n];
    let mut sizes = vec![0i64; n];
    loop {
        for d in 0..n {
            sizes[d] = cands[d][idx[d]];
        }
        if out.len() >= limit {
            break;
        }
        if fits(desc, target, &sizes) {
            out.push(TileConfig::from_sizes(desc, &sizes));
        }
        // odometer increment, last dim fastest
        let mut d = n;
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < cands[d].len() {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// Per iteration dim, the element size of every tile count its bound can take (1 up to
/// the dim's extent in tiles, [`bound_of_dim`]): the sizes a tile configuration can
/// express, divisors of the extent or not (the real search measures e.g. 3, 7, 11 and
/// 16 of 32). A dim no bound reaches keeps its default size.
pub fn count_candidates(desc: &KernelDesc, target: &TpuTarget) -> Vec<Vec<i64>> {
    let n = desc.n_iter().min(MAX_DIMS);
    let mut def = [0i64; MAX_DIMS];
    default_sizes(desc, target, &mut def);
    let bt = bounds_tensor(desc);
    let mut units = BoundUnits::default();
    (0..n)
        .map(|d| match bounded_dim(desc, &bt, d) {
            Some((t, j)) => {
                let (u, size) = (units.unit(t, j), t.dims[j].max(1));
                (1..=(size + u - 1) / u)
                    .map(|c| (c * u).min(size))
                    .collect()
            }
            None => vec![def[d].max(1)],
        })
        .collect()
}

/// Up to `count` distinct VMEM-feasible configs, each dim's tile count drawn uniformly
/// from [`count_candidates`], deterministic for a given `seed` (gives up after
/// `50·count` draws when the feasible space is small).
pub fn sample_tiles(
    desc: &KernelDesc,
    target: &TpuTarget,
    count: usize,
    seed: u64,
) -> Vec<TileConfig> {
    let cands = count_candidates(desc, target);
    let mut rng = SplitMix64::new(seed);
    let mut seen: HashSet<Vec<i64>> = HashSet::new();
    let mut out = Vec::new();
    let mut sizes = vec![0i64; cands.len()];
    for _ in 0..count.saturating_mul(50) {
        if out.len() >= count {
            break;
        }
        for (s, c) in sizes.iter_mut().zip(&cands) {
            *s = c.get(rng.below(c.len())).copied().unwrap_or(1);
        }
        if !fits(desc, target, &sizes) || seen.contains(&sizes) {
            continue;
        }
        seen.insert(sizes.clone());
        out.push(TileConfig::from_sizes(desc, &sizes));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tpu::kernel::{Conv2dShape, MxuPrecision, OpCounts, TensorDesc};

    fn roundtrip(desc: &KernelDesc, sizes: &[i64]) {
        let t = TpuTarget::v3();
        let cfg = TileConfig::from_sizes(desc, sizes);
        let mut back = [0i64; MAX_DIMS];
        resolve_sizes(desc, &cfg, &t, &mut back).unwrap();
        assert_eq!(&back[..sizes.len()], sizes, "{cfg:?}");
    }

    #[test]
    fn from_sizes_resolves_back() {
        let mm = KernelDesc::matmul("mm", 1, 1024, 512, 2048, 16, 16, MxuPrecision::Bf16).unwrap();
        roundtrip(&mm, &[256, 512, 128]);
        let c = KernelDesc::conv2d(
            "c",
            Conv2dShape {
                n: 8,
                h: 32,
                w: 32,
                c_in: 64,
                c_out: 128,
                kh: 3,
                kw: 3,
                stride: 1,
                pad: 1,
            },
            16,
            16,
            MxuPrecision::Bf16,
        )
        .unwrap();
        roundtrip(&c, &[2, 8, 16, 128, 3, 1, 64]);
        let r = KernelDesc::reduction("r", &[64, 4096], &[1], 32, OpCounts::cheap(1.0)).unwrap();
        roundtrip(&r, &[32, 1024]);
        // A reduction's bounds tile its reduced operand f32[64,4096]: (8, 128) tiles.
        let cfg = TileConfig::from_sizes(&r, &[32, 1024]);
        assert_eq!(cfg.output_bounds, vec![4, 8]);
        assert!(cfg.kernel_bounds.is_empty());
        assert!(cfg.input_bounds.is_empty());
    }

    /// The halving finds a tile that fits exactly when the smallest tile it can reach
    /// fits, and ends at that tile when it does not ([`smallest_tile`]): what lets
    /// [`search_default_sizes`] skip a search that would fail. Checked over kernels
    /// that fit, fit only with the operands' alignment dropped, or never fit, on VMEM
    /// limits from the smallest to v3's.
    #[test]
    fn the_halving_fails_exactly_when_the_smallest_tile_does_not_fit() {
        let descs = [
            KernelDesc::matmul("mm", 1, 4096, 4096, 4096, 16, 32, MxuPrecision::Bf16).unwrap(),
            KernelDesc::matmul("bmm", 64, 512, 8192, 1024, 32, 32, MxuPrecision::F32High).unwrap(),
            KernelDesc::matmul("thin", 1, 8, 1 << 20, 8, 32, 32, MxuPrecision::F32High).unwrap(),
            KernelDesc::elementwise("e", &[64, 3000, 5000], 32, 3, OpCounts::cheap(1.0)).unwrap(),
            KernelDesc::elementwise("wide", &[7, 1 << 22], 32, 9, OpCounts::cheap(1.0)).unwrap(),
            KernelDesc::copy_transpose("tr", &[512, 9, 4096], &[2, 0, 1], 16).unwrap(),
            KernelDesc::reduction("r", &[1 << 16, 4096], &[1], 32, OpCounts::cheap(1.0)).unwrap(),
        ];
        let (mut found_any, mut failed) = (0, Vec::new());
        for limit in [1u64 << 20, 2 << 20, 4 << 20, 16 << 20] {
            let mut target = TpuTarget::v3();
            target.vmem_limit_bytes = limit;
            for desc in &descs {
                let n = desc.n_iter().min(MAX_DIMS);
                let whole: Vec<i64> = (0..n).map(|d| desc.iter_extent(d).max(1)).collect();
                let hw: Vec<i64> = (0..n)
                    .map(|d| dim_alignment(desc, &target, d).max(1))
                    .collect();
                let align: Vec<i64> = (0..n)
                    .map(|d| hw[d].max(operand_alignment(desc, &target, d)))
                    .collect();
                for (which, a) in [("operands'", &align), ("hardware", &hw)] {
                    let mut t = whole.clone();
                    let fp = vmem_footprint(desc, &target, &t);
                    let found = shrink_to_fit(desc, &target, &mut t, a, fp);
                    let mut small = [0i64; MAX_DIMS];
                    let smallest = smallest_tile(&whole, a, &mut small);
                    let what = format!("{} at {limit} B, {which} alignment", desc.name);
                    assert_eq!(found, fits(desc, &target, smallest), "{what}");
                    if found {
                        found_any += 1;
                        assert!(fits(desc, &target, &t), "{what}");
                    } else {
                        assert_eq!(t, smallest, "{what}");
                        failed.push(what);
                    }
                }
            }
        }
        assert!(found_any > 40, "{found_any}");
        // both ways out of the first search: the hardware's alignment alone fits, or
        // nothing does
        let at_1m = |name: &str, which: &str| {
            let f = format!("{name} at 1048576 B, {which} alignment");
            failed.contains(&f)
        };
        assert!(
            at_1m("tr", "operands'") && !at_1m("tr", "hardware"),
            "{failed:?}"
        );
        assert!(
            at_1m("r", "operands'") && at_1m("r", "hardware"),
            "{failed:?}"
        );
    }

    /// The two kernels of the spec's table that have a simple desc here: counts of
    /// (8, 128) tiles on the two minor physical dims, elements elsewhere; a bound need
    /// not divide its extent, and the last tile is partial.
    #[test]
    fn bounds_count_tiles_of_the_physical_shape() {
        let t = TpuTarget::v3();
        // fusion.232: reduce of f32[32,26,26,192]{3,0,2,1}, physical (26,26,32,192).
        let r = KernelDesc::reduction(
            "r",
            &[26, 26, 32, 192],
            &[0, 1, 2],
            32,
            OpCounts::cheap(1.0),
        )
        .unwrap();
        let (bt, _) = bounds_tensor(&r);
        assert_eq!(bt.dims[..], [26, 26, 32, 192]);
        assert_eq!(tile_units(bt).to_vec(), vec![1, 1, 8, 128]);
        assert_eq!(tile_extents(bt).to_vec(), vec![26, 26, 4, 2]);
        let cfg = TileConfig {
            output_bounds: vec![2, 26, 4, 2],
            ..Default::default()
        };
        // Sizes are per iteration dim (the output 192, then the reduced 26, 26, 32).
        assert_eq!(tile_sizes(&r, &cfg, &t).unwrap(), vec![192, 2, 26, 32]);
        let cfg = TileConfig {
            output_bounds: vec![3, 26, 3, 1],
            ..Default::default()
        };
        assert_eq!(tile_sizes(&r, &cfg, &t).unwrap(), vec![128, 3, 26, 24]);
        for (bad, msg) in [
            (
                vec![27, 26, 4, 2],
                "`output_bounds[0]` = 27 is outside 1..=26",
            ),
            (vec![1, 1, 5, 1], "`output_bounds[2]` = 5 is outside 1..=4"),
            (vec![192], "`output_bounds` has 1 entries, expected 4"),
        ] {
            let cfg = TileConfig {
                output_bounds: bad,
                ..Default::default()
            };
            let e = tile_sizes(&r, &cfg, &t).unwrap_err().to_string();
            assert!(e.contains(msg), "{e}");
        }
        // A rank-1 f32[4096] array is tiled T(1024): extent 4 (fusion.250).
        let v = TensorDesc::new(vec![4096], 32);
        assert_eq!(tile_extents(&v).to_vec(), vec![4]);
        // bf16 T(8,128)(2,1): 8 rows as for f32 (copy.24: bf16[32,5,5,256] → (32,5,1,2)).
        let b = TensorDesc::new(vec![32, 5, 5, 256], 16);
        assert_eq!(tile_extents(&b).to_vec(), vec![32, 5, 1, 2]);
        // The default tile is a tile config: resolving it gives the default sizes.
        let def = default_tile(&r, &t);
        let mut d = [0i64; MAX_DIMS];
        default_sizes(&r, &t, &mut d);
        assert_eq!(tile_sizes(&r, &def, &t).unwrap(), d[..4].to_vec());
    }

    #[test]
    fn pallas_blocks_map_to_tpugraphs_fields() {
        let mm = KernelDesc::matmul("mm", 1, 1024, 1024, 1024, 16, 16, MxuPrecision::Bf16).unwrap();
        // bf16 [1024, 1024] output and [256 of K, 1024] RHS tiles, in (8, 128) tiles.
        let cfg = TileConfig::from_sizes(&mm, &[512, 1024, 256]);
        assert_eq!(cfg.output_bounds, vec![64, 8]);
        assert_eq!(cfg.kernel_bounds, vec![32, 8]);
        assert!(cfg.input_bounds.is_empty());
    }

    #[test]
    fn candidates_are_aligned() {
        let t = TpuTarget::v6e();
        let mm = KernelDesc::matmul("mm", 1, 1000, 600, 700, 16, 16, MxuPrecision::Bf16).unwrap();
        let c = tile_candidates(&mm, &t);
        assert_eq!(c[0], vec![16, 32, 64, 128, 256, 512, 1000]);
        assert_eq!(c[1], vec![256, 512, 700]);
        assert_eq!(c[2], vec![256, 512, 600]);
        let all = enumerate_tiles(&mm, &t, usize::MAX);
        assert_eq!(all.len(), 7 * 3 * 3);
        assert_eq!(enumerate_tiles(&mm, &t, 5).len(), 5);
    }

    #[test]
    fn splitmix_reference_values() {
        // first outputs for seed 1234567 (reference implementation by Vigna)
        let mut r = SplitMix64::new(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
        for n in [1usize, 3, 10] {
            assert!(r.below(n) < n);
        }
    }
}
