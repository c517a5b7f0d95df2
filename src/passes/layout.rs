//! Layout assignment (spec §5, simplified as in §5.6) on the flattened computations.
//!
//! Each array leaf of each instruction gets a `minor_to_major`; the first constraint that
//! reaches a buffer wins, constraints being applied in this order:
//!
//! 1. fixed: entry parameters (entry_computation_layout), while results (= body
//!    parameter), conditional results (= branch 0 result), while-condition parameters,
//!    results of ops that need the default layout (custom-call, fft, cholesky, ...);
//! 2. the configuration: configured node outputs; configured operand layouts become
//!    operand requirements and are propagated to the operand's definition;
//! 3. uses that must have a layout: entry result, while/conditional operands, operands of
//!    default-layout ops;
//! 4. TPU preferences: convolution input/output `[spatial…, batch, feature]` major→minor
//!    when the batch fills a sublane tile (≥ 8), else `[batch, spatial…, feature]`;
//!    kernel `[spatial…, in, out]`; dot operands keep a layout that is already a valid
//!    `(batch, matrix)` layout, else row-major, else `[batch, free, contracting]`;
//! 5. row-major for whatever is left, in program order.
//!
//! After each constraint, layouts propagate (DFS) through ops that cannot change layout
//! (elementwise, slice, pad, concatenate, ...), through transposes and reshapes (choosing
//! the layout that makes them bitcasts), broadcasts (to the operand), reduces (to the
//! result), tuples and get-tuple-element. Then a `copy` is inserted wherever a use
//! requires a layout its operand does not have, and transposes/reshapes that move no data
//! (with TPU tiles) become `bitcast`s.

use smallvec::SmallVec;
use std::collections::HashMap;

use super::config::ResolvedConfig;
use super::flat::{FComp, FNode, Flat, FxBuild, Namer, NONE};
use super::tiling::{self, row_major};
use crate::ir::{ArrayShape, CallRole, CompId, Dims, Module, Opcode, Shape};

/// Leaf layouts of one value.
pub(crate) type Leaves = SmallVec<[Dims; 1]>;

/// Layouts at the boundary of a computation.
#[derive(Debug, Clone, Default)]
pub(crate) struct CompLayouts {
    pub params: Vec<Leaves>,
    pub root: Leaves,
}

/// Counters reported by the pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LayoutStats {
    /// `copy` instructions inserted (physical relayouts).
    pub copies: usize,
    /// Transposes/reshapes turned into bitcasts.
    pub bitcasts: usize,
}

/// Array leaves of a shape, depth first.
pub(crate) fn leaf_shapes(s: &Shape) -> SmallVec<[&ArrayShape; 1]> {
    match s {
        Shape::Array(a) => SmallVec::from_elem(a, 1),
        _ => s.leaves().into_iter().collect(),
    }
}

/// Leaf range of tuple element `k`.
fn elem_range(s: &Shape, k: usize) -> Option<(usize, usize)> {
    let Shape::Tuple(v) = s else { return None };
    let mut off = 0;
    for (i, e) in v.iter().enumerate() {
        let n = leaf_count(e);
        if i == k {
            return Some((off, n));
        }
        off += n;
    }
    None
}

fn leaf_count(s: &Shape) -> usize {
    match s {
        Shape::Array(_) => 1,
        Shape::Tuple(v) => v.iter().map(leaf_count).sum(),
        Shape::Buffer(b) => leaf_count(b),
    }
}

/// Row-major leaves of a shape.
fn default_leaves(s: &Shape) -> Leaves {
    leaf_shapes(s).iter().map(|a| row_major(a.rank())).collect()
}

/// Leaves of a shape as written (row-major where the text has none).
fn written_leaves(s: &Shape) -> Leaves {
    leaf_shapes(s)
        .iter()
        .map(|a| written_minor_to_major(a))
        .collect()
}

/// The `minor_to_major` of an array as the module text writes it, row-major where the
/// text has none (or one that is not a permutation of its dims). This is the *default*
/// layout a configured layout prefix is completed against ([`complete_layout`]), in
/// layout assignment and in the incremental layout evaluator alike.
pub fn written_minor_to_major(a: &ArrayShape) -> Dims {
    let m = a.minor_to_major();
    if tiling::is_permutation(&m, a.rank()) {
        m
    } else {
        row_major(a.rank())
    }
}

/// The full `minor_to_major` the compiler gives a tensor whose configured layout is
/// `prefix` (the most-minor dims, most-minor first, as TpuGraphs records them): the
/// prefix's dims, then the dims of `default_m2m` (the tensor's default layout, see
/// [`written_minor_to_major`]) that the prefix does not name, in their default relative
/// order. A full permutation is returned as is; an empty prefix gives the default.
///
/// `[4, 0]` with default `{4,3,2,1,0}` → `{4,0,3,2,1}`. The prefix must have been checked
/// (distinct dims within the rank) — config resolution does that.
pub fn complete_layout(prefix: &[i64], default_m2m: &[i64]) -> Dims {
    let mut out = Dims::from_slice(prefix);
    out.extend(default_m2m.iter().copied().filter(|d| !prefix.contains(d)));
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Preserving,
    Tuple,
    Gte,
    Identity,
    Transpose,
    Reshape,
    Broadcast,
    Reduce,
    /// Operands and results in the default layout.
    DefaultLayout,
    Other,
}

fn class(op: Opcode) -> Class {
    use Opcode::*;
    match op {
        Copy => Class::Other,
        o if o.is_elementwise() => Class::Preserving,
        Concatenate | DynamicSlice | DynamicUpdateSlice | Pad | Reverse | Slice | Map
        | ReduceWindow | SelectAndScatter | Scatter | Sort | TopK | SetDimensionSize => {
            Class::Preserving
        }
        o if o.is_collective() => Class::Preserving,
        Tuple => Class::Tuple,
        GetTupleElement => Class::Gte,
        OptimizationBarrier | AddDependency => Class::Identity,
        o if o.is_collective_done() => Class::Identity,
        Transpose => Class::Transpose,
        Reshape | Bitcast => Class::Reshape,
        Broadcast => Class::Broadcast,
        Reduce => Class::Reduce,
        CustomCall | Fft | TriangularSolve | Cholesky | Infeed | Outfeed | Send | Recv
        | RngBitGenerator => Class::DefaultLayout,
        _ => Class::Other,
    }
}

/// Role of a flattened computation.
#[derive(Debug, Clone)]
enum Role {
    Entry,
    Body,
    /// While condition with the body's parameter layout.
    Cond(Leaves),
    /// Conditional branch; Some = root must match branch 0.
    Branch(Option<Leaves>),
    Other,
}

/// A copy of a layout (`from_slice` copies in one go; a `SmallVec`'s `clone` goes
/// element by element).
#[inline]
fn dup(d: &[i64]) -> Dims {
    Dims::from_slice(d)
}

/// Work buffers of layout assignment, kept between compilations of one prepared module
/// (the bitcast memo's answers by node name its nodes).
#[derive(Default)]
pub(crate) struct LayoutScratch {
    base: Vec<u32>,
    scan: Vec<Scan>,
    ranks: Vec<u8>,
    lay: Vec<u32>,
    layouts: Vec<Dims>,
    stack: Vec<u32>,
    bitcasts: BitcastMemo,
    /// [`CopyMaker::memo`], emptied for each computation (its table kept grown).
    copies: HashMap<(u32, Dims), u32, FxBuild>,
}

/// The solver's tables of a prepared computation (a compilation's copies are dropped
/// and its bitcasts made transposes and reshapes again before the next, so layout
/// assignment always finds it so), with no configured node and no layout: made once
/// per `PreparedModule`, copied by each solve.
#[derive(PartialEq)]
pub(crate) struct SolverStart {
    scan: Vec<Scan>,
    base: Vec<u32>,
    ranks: Vec<u8>,
}

impl SolverStart {
    pub(crate) fn of(fc: &FComp<'_>) -> Self {
        let mut scan = Vec::with_capacity(fc.nodes.len());
        let mut base = Vec::with_capacity(fc.nodes.len() + 1);
        let mut ranks = Vec::with_capacity(fc.nodes.len());
        for n in &fc.nodes {
            scan.push(Scan {
                opcode: n.opcode,
                class: class(n.opcode),
                configured: false,
                required: false,
                array_rank: if n.info.array { n.info.rank } else { NOT_ARRAY },
            });
            base.push(ranks.len() as u32);
            if n.info.array {
                ranks.push(n.info.rank as u8);
            } else {
                ranks.extend(leaf_shapes(&n.shape).iter().map(|a| a.rank() as u8));
            }
        }
        base.push(ranks.len() as u32);
        SolverStart { scan, base, ranks }
    }
}

/// A leaf without a layout yet (in [`Solver::lay`]).
const UNSET: u32 = u32::MAX;

/// Which transposes and reshapes are bitcasts ([`tiling::is_tpu_bitcast`]), remembered
/// across compilations of one prepared module under everything the answer reads: by
/// the node's structure and packed layouts where both sides' layouts pack, else by the
/// permutation and both sides' element type, dims and layout. Random configurations
/// give a reshape's tensors a few dozen layouts at most, so most tests are answered
/// from the tables. At most [`BitcastMemo::MAX`] answers are kept in each; a full table
/// starts again.
#[derive(Default)]
struct BitcastMemo {
    table: HashMap<Box<[i64]>, bool, FxBuild>,
    /// The key being looked up (reused).
    key: Vec<i64>,
    /// Each node's structure (by flat computation and node; [`NONE`]: not met yet): the
    /// number of its permutation, dims and element type and its operand's (which a
    /// copy shares) in `structures`. A model repeats a few structures over many nodes.
    structure: Vec<Vec<u32>>,
    structures: HashMap<Box<[i64]>, u32, FxBuild>,
    /// The answers by structure and both sides' packed layouts ([`tiling::layout_key`]),
    /// which name everything the answer reads: three words hashed, where the table
    /// above hashes a few dozen, and few enough answers to stay in the cache: ResNet-50
    /// training has 17 structures and 308 answers, where a table by node held 16,154
    /// (about a megabyte) and each test waited on memory.
    by_structure: HashMap<(u32, u64, u64), bool, FxBuild>,
}

impl BitcastMemo {
    const MAX: usize = 1 << 16;

    /// [`BitcastMemo::is_tpu_bitcast`] of node `x` of flat computation `fi`, whose
    /// operand and result are laid out as `layouts` (packed, when both pack).
    fn of_node(
        &mut self,
        node: (usize, u32),
        layouts: Option<(u64, u64)>,
        perm: Option<&[i64]>,
        a: tiling::Laid<'_>,
        b: tiling::Laid<'_>,
    ) -> bool {
        let Some((ka, kb)) = layouts else {
            return self.is_tpu_bitcast(perm, a, b);
        };
        let key = (self.structure_of(node, perm, &a, &b), ka, kb);
        if let Some(&answer) = self.by_structure.get(&key) {
            debug_assert_eq!(answer, tiling::is_tpu_bitcast(perm, a, b));
            return answer;
        }
        let answer = self.is_tpu_bitcast(perm, a, b);
        if self.by_structure.len() >= Self::MAX {
            self.by_structure.clear();
        }
        self.by_structure.insert(key, answer);
        answer
    }

    /// The number of node `node`'s structure: its permutation and both sides' element
    /// types and dims (`a` and `b` without their layouts), numbered when first met.
    fn structure_of(
        &mut self,
        node: (usize, u32),
        perm: Option<&[i64]>,
        a: &tiling::Laid<'_>,
        b: &tiling::Laid<'_>,
    ) -> u32 {
        let (fi, x) = (node.0, node.1 as usize);
        if self.structure.len() <= fi {
            self.structure.resize_with(fi + 1, Vec::new);
        }
        if let Some(&id) = self.structure[fi].get(x).filter(|&&id| id != NONE) {
            return id;
        }
        self.key.clear();
        write_question(&mut self.key, perm, a, b, false);
        let id = match self.structures.get(&self.key[..]) {
            Some(&id) => id,
            None => {
                let id = self.structures.len() as u32;
                self.structures.insert(self.key[..].into(), id);
                id
            }
        };
        let v = &mut self.structure[fi];
        if v.len() <= x {
            v.resize(x + 1, NONE);
        }
        v[x] = id;
        id
    }

    fn is_tpu_bitcast(
        &mut self,
        perm: Option<&[i64]>,
        a: tiling::Laid<'_>,
        b: tiling::Laid<'_>,
    ) -> bool {
        let k = &mut self.key;
        k.clear();
        write_question(k, perm, &a, &b, true);
        if let Some(&answer) = self.table.get(&k[..]) {
            return answer;
        }
        let answer = tiling::is_tpu_bitcast(perm, a, b);
        if self.table.len() >= Self::MAX {
            self.table.clear();
        }
        self.table.insert(k[..].into(), answer);
        answer
    }
}

/// A bitcast question into `k`, every list after its length so that two keys are equal
/// only for equal questions: the permutation, then each side's element type and dims,
/// and with `layouts` its layout ([`BitcastMemo::is_tpu_bitcast`]; without, the node's
/// structure, [`BitcastMemo::structure_of`]).
fn write_question(
    k: &mut Vec<i64>,
    perm: Option<&[i64]>,
    a: &tiling::Laid<'_>,
    b: &tiling::Laid<'_>,
    layouts: bool,
) {
    match perm {
        Some(p) => {
            k.push(p.len() as i64);
            k.extend_from_slice(p);
        }
        None => k.push(-1),
    }
    for side in [a, b] {
        k.push(side.et as i64);
        k.push(side.dims.len() as i64);
        k.extend_from_slice(side.dims);
        if layouts {
            k.push(side.m2m.len() as i64);
            k.extend_from_slice(side.m2m);
        }
    }
}

/// What the solver's passes over every node test first, by node, apart from the nodes
/// (three cache lines each): a pass reads one line for 32 nodes, and a node itself only
/// when the test passes.
#[derive(Clone, Copy, PartialEq)]
struct Scan {
    opcode: Opcode,
    /// The opcode's [`class`].
    class: Class,
    /// The configuration sets a layout of the node.
    configured: bool,
    /// A use requirement is recorded for an operand of the node (in `Solver::reqs`).
    required: bool,
    /// The node's rank if it is an array ([`FNode::array_rank`]), else [`NOT_ARRAY`].
    array_rank: u32,
}

/// [`Scan::array_rank`] of a node that is not an array.
const NOT_ARRAY: u32 = u32::MAX;

struct Solver<'s, 'a> {
    fc: &'s FComp<'a>,
    scan: Vec<Scan>,
    /// Leaves of node x are `base[x]..base[x + 1]` in `ranks` and `lay`.
    base: Vec<u32>,
    /// Rank of each array leaf.
    ranks: Vec<u8>,
    /// Layout of each array leaf: an index in `layouts`, or [`UNSET`]. Leaves that
    /// take their layout from another share its entry (a layout is never changed).
    lay: Vec<u32>,
    layouts: Vec<Dims>,
    /// (user, slot) → required operand leaves.
    reqs: HashMap<(u32, u32), Leaves, FxBuild>,
    root_req: Option<Leaves>,
    stack: Vec<u32>,
    body_link: bool,
    /// Param 0 of a while body (linked to the root).
    param0: u32,
}

impl<'s, 'a> Solver<'s, 'a> {
    fn node(&self, x: u32) -> &FNode<'a> {
        &self.fc.nodes[x as usize]
    }

    /// Number of array leaves of node x.
    fn nl(&self, x: u32) -> usize {
        (self.base[x as usize + 1] - self.base[x as usize]) as usize
    }

    /// Index of leaf `leaf` of x in `ranks` / `lay`.
    fn at(&self, x: u32, leaf: usize) -> Option<usize> {
        let b = *self.base.get(x as usize)? as usize;
        let e = *self.base.get(x as usize + 1)? as usize;
        (b + leaf < e).then_some(b + leaf)
    }

    fn leaf_rank(&self, x: u32, leaf: usize) -> Option<usize> {
        self.at(x, leaf).map(|i| self.ranks[i] as usize)
    }

    /// Set one leaf if it is unset (and the layout fits); schedule propagation.
    fn set(&mut self, x: u32, leaf: usize, m2m: &[i64]) {
        let Some(i) = self.at(x, leaf) else {
            return;
        };
        if m2m.len() != self.ranks[i] as usize || self.lay[i] != UNSET {
            return;
        }
        self.lay[i] = self.layouts.len() as u32;
        self.layouts.push(dup(m2m));
        self.stack.push(x);
    }

    /// [`Solver::set`] with the layout of another leaf (its [`Solver::get_id`]).
    fn set_id(&mut self, x: u32, leaf: usize, id: u32) {
        let Some(i) = self.at(x, leaf) else {
            return;
        };
        if self.layouts[id as usize].len() != self.ranks[i] as usize || self.lay[i] != UNSET {
            return;
        }
        self.lay[i] = id;
        self.stack.push(x);
    }

    /// [`Solver::set_id`] of leaf `i` (in `lay`), the one leaf of array `x`, with a
    /// layout `l` of its rank: set if unset.
    #[inline]
    fn fill(&mut self, i: usize, x: u32, l: u32) {
        debug_assert_eq!(self.at(x, 0), Some(i));
        debug_assert_eq!(self.layouts[l as usize].len(), self.ranks[i] as usize);
        if self.lay[i] == UNSET {
            self.lay[i] = l;
            self.stack.push(x);
        }
    }

    fn set_all(&mut self, x: u32, leaves: &[Dims]) {
        for (i, l) in leaves.iter().enumerate() {
            self.set(x, i, l);
        }
    }

    fn get(&self, x: u32, leaf: usize) -> Option<&Dims> {
        self.get_id(x, leaf).map(|id| &self.layouts[id as usize])
    }

    /// Where the layout of one leaf is kept, if it has one.
    fn get_id(&self, x: u32, leaf: usize) -> Option<u32> {
        let id = self.lay[self.at(x, leaf)?];
        (id != UNSET).then_some(id)
    }

    /// Layout operand `slot` of `u` is read in: its requirement if any, else its definition's.
    fn operand_layout(&self, u: u32, slot: usize) -> Option<Dims> {
        if let Some(r) = recorded(&self.scan, &self.reqs, u, slot) {
            return r.first().map(|d| dup(d));
        }
        let o = *self.node(u).operands.get(slot)?;
        self.get(o, 0).map(|d| dup(d))
    }

    fn drain(&mut self) {
        while let Some(x) = self.stack.pop() {
            self.step(x);
            let fc = self.fc;
            for &u in &fc.nodes[x as usize].users {
                let class = self.scan[u as usize].class;
                if matches!(class, Class::DefaultLayout | Class::Other) {
                    // (its step propagates nothing)
                    continue;
                }
                if class == Class::Tuple {
                    // Only the elements that are x changed.
                    let mut off = 0;
                    for &o in &fc.nodes[u as usize].operands {
                        let k = self.nl(o);
                        if o == x {
                            for i in 0..k {
                                self.link(o, i, u, off + i);
                            }
                        }
                        off += k;
                    }
                } else {
                    self.step(u);
                }
            }
            if self.body_link {
                if x == self.param0 {
                    let root = self.fc.root;
                    for i in 0..self.nl(x) {
                        if let Some(l) = self.get_id(x, i) {
                            self.set_id(root, i, l);
                        }
                    }
                }
                if x == self.fc.root && self.param0 != NONE {
                    let p = self.param0;
                    for i in 0..self.nl(x) {
                        if let Some(l) = self.get_id(x, i) {
                            self.set_id(p, i, l);
                        }
                    }
                }
            }
        }
    }

    /// Local propagation between `u`'s result and its operands.
    fn step(&mut self, u: u32) {
        let fc = self.fc;
        let n = &fc.nodes[u as usize];
        match self.scan[u as usize].class {
            Class::Preserving if self.scan[u as usize].array_rank != NOT_ARRAY => {
                // An array (one leaf): the general case below, reading the solver's
                // tables alone.
                let b = self.base[u as usize] as usize;
                let r = u32::from(self.ranks[b]);
                if r == 0 {
                    return;
                }
                let ops = &n.operands;
                let mut l = self.lay[b];
                if l == UNSET {
                    // the first operand of the same rank that has a layout
                    for &o in ops {
                        if self.scan[o as usize].array_rank == r {
                            l = self.lay[self.base[o as usize] as usize];
                            if l != UNSET {
                                break;
                            }
                        }
                    }
                    if l == UNSET {
                        return;
                    }
                    self.fill(b, u, l);
                }
                for &o in ops {
                    if self.scan[o as usize].array_rank == r {
                        self.fill(self.base[o as usize] as usize, o, l);
                    }
                }
            }
            Class::Preserving => {
                let Some(r) = self.leaf_rank(u, 0) else {
                    return;
                };
                if r == 0 {
                    return;
                }
                let nleaves = self.nl(u);
                // First known layout among the linked buffers.
                let mut known: Option<u32> = None;
                for i in 0..nleaves {
                    if self.leaf_rank(u, i) == Some(r) {
                        if let Some(l) = self.get_id(u, i) {
                            known = Some(l);
                            break;
                        }
                    }
                }
                let ops = &n.operands;
                if known.is_none() {
                    for &o in ops {
                        if fc.nodes[o as usize].array_rank() == Some(r) {
                            if let Some(l) = self.get_id(o, 0) {
                                known = Some(l);
                                break;
                            }
                        }
                    }
                }
                let Some(l) = known else { return };
                for i in 0..nleaves {
                    if self.leaf_rank(u, i) == Some(r) {
                        self.set_id(u, i, l);
                    }
                }
                for &o in ops {
                    if fc.nodes[o as usize].array_rank() == Some(r) {
                        self.set_id(o, 0, l);
                    }
                }
            }
            Class::Tuple => {
                let mut off = 0;
                for &o in &n.operands {
                    let k = self.nl(o);
                    for i in 0..k {
                        self.link(o, i, u, off + i);
                    }
                    off += k;
                }
            }
            Class::Gte => {
                let Some(&o) = n.operands.first() else { return };
                let idx = n.src.and_then(|s| s.attrs.tuple_index).unwrap_or(-1);
                let Some((start, len)) = usize::try_from(idx)
                    .ok()
                    .and_then(|k| elem_range(&fc.nodes[o as usize].shape, k))
                else {
                    return;
                };
                for i in 0..len {
                    self.link(o, start + i, u, i);
                }
            }
            Class::Identity => {
                let Some(&o) = n.operands.first() else { return };
                let k = self.nl(o).min(self.nl(u));
                for i in 0..k {
                    self.link(o, i, u, i);
                }
            }
            Class::Transpose => {
                let Some(perm) = n.src.and_then(|s| s.attrs.dimensions.as_ref()) else {
                    return;
                };
                let Some(&o) = n.operands.first() else { return };
                let out = self.get(u, 0).map(|d| dup(d));
                let inp = self.operand_layout(u, 0);
                match (inp, out) {
                    (Some(i), None) => {
                        if let Some(l) = tiling::transpose_output_layout(perm, &i) {
                            self.set(u, 0, &l);
                        }
                    }
                    (None, Some(ol)) => {
                        if let Some(l) = tiling::transpose_operand_layout(perm, &ol) {
                            self.set(o, 0, &l);
                        }
                    }
                    _ => {}
                }
            }
            Class::Reshape => {
                let Some(&o) = n.operands.first() else { return };
                let (Some(a), Some(b)) =
                    (fc.nodes[o as usize].shape.as_array(), n.shape.as_array())
                else {
                    return;
                };
                let (from, to) = (&a.dims, &b.dims);
                let out = self.get(u, 0).map(|d| dup(d));
                let inp = self.operand_layout(u, 0);
                match (inp, out) {
                    (Some(i), None) => {
                        if let Some(l) = tiling::reshape_layout(from, &i, to) {
                            self.set(u, 0, &l);
                        }
                    }
                    (None, Some(ol)) => {
                        if let Some(l) = tiling::reshape_layout(to, &ol, from) {
                            self.set(o, 0, &l);
                        }
                    }
                    _ => {}
                }
            }
            Class::Broadcast => {
                let Some(&o) = n.operands.first() else { return };
                if self.get(o, 0).is_some() {
                    return;
                }
                let Some(out) = self.get(u, 0).map(|d| dup(d)) else {
                    return;
                };
                let empty = Dims::new();
                let dims = n
                    .src
                    .and_then(|s| s.attrs.dimensions.as_ref())
                    .unwrap_or(&empty);
                let l: Dims = out
                    .iter()
                    .filter_map(|d| dims.iter().position(|x| x == d).map(|p| p as i64))
                    .collect();
                self.set(o, 0, &l);
            }
            Class::Reduce => {
                let empty = Dims::new();
                let reduced = n
                    .src
                    .and_then(|s| s.attrs.dimensions.as_ref())
                    .unwrap_or(&empty);
                let k = n.operands.len() / 2;
                for i in 0..k {
                    if self.get(u, i).is_some() {
                        continue;
                    }
                    let Some(inp) = self.operand_layout(u, i) else {
                        continue;
                    };
                    let l: Dims = inp
                        .iter()
                        .filter(|d| !reduced.contains(d))
                        .map(|&d| d - reduced.iter().filter(|&&r| r < d).count() as i64)
                        .collect();
                    self.set(u, i, &l);
                }
            }
            Class::DefaultLayout | Class::Other => {}
        }
    }

    /// Make leaf `i` of `a` and leaf `j` of `b` equal if one of them is known.
    fn link(&mut self, a: u32, i: usize, b: u32, j: usize) {
        match (self.get_id(a, i), self.get_id(b, j)) {
            (Some(l), None) => self.set_id(b, j, l),
            (None, Some(l)) => self.set_id(a, i, l),
            _ => {}
        }
    }

    /// Record a use requirement and propagate it to the operand's definition.
    fn require(&mut self, u: u32, slot: usize, leaves: Leaves) {
        let Some(&o) = self.node(u).operands.get(slot) else {
            return;
        };
        self.set_all(o, &leaves);
        self.reqs.insert((u, slot as u32), leaves);
        self.scan[u as usize].required = true;
        self.drain();
    }
}

/// Preferred convolution layouts `(input, kernel, output)` as minor_to_major.
fn conv_preference(n: &FNode<'_>, lhs: &[i64]) -> Option<(Dims, Dims, Dims)> {
    let cd = n.src?.attrs.conv_dims.as_ref()?;
    // minor_to_major of `[spatial…, a, b]` (major to minor).
    let spatial_then = |spatial: &[i64], a: i64, b: i64| -> Dims {
        let mut mtm: Dims = spatial.iter().copied().collect();
        mtm.push(a);
        mtm.push(b);
        mtm.reverse();
        mtm
    };
    let act = |batch: i64, feature: i64, spatial: &[i64], dims: &[i64]| -> Option<Dims> {
        let bsize = *dims.get(usize::try_from(batch).ok()?)?;
        let m2m = if bsize >= 8 {
            spatial_then(spatial, batch, feature)
        } else {
            // [batch, spatial…, feature]
            let mut mtm: Dims = std::iter::once(feature)
                .chain(spatial.iter().rev().copied())
                .collect();
            mtm.push(batch);
            mtm
        };
        (m2m.len() == dims.len()).then_some(m2m)
    };
    // A filter gradient (the window is larger than the output it slides over, e.g.
    // `window={size=56x56}` producing a 3×3 filter): its input is a forward activation
    // with the roles swapped — "feature" is the forward batch (often < 8), "batch" the
    // forward channels. XLA's TPU emitter reads it in the forward layout, channels
    // minor: `[spatial…, feature, batch]`, which needs no relayout copy of an NHWC
    // activation and does not pad a batch of 8 to 128 lanes.
    let window = n.src?.attrs.window.as_deref();
    let filter_gradient = window.is_some_and(|w| {
        w.dims.iter().zip(&cd.output_spatial).any(|(wd, &o)| {
            usize::try_from(o)
                .ok()
                .and_then(|o| n.dims().get(o))
                .is_some_and(|&out| wd.size > out)
        })
    });
    let input = if filter_gradient {
        Some(spatial_then(
            &cd.input_spatial,
            cd.input_feature,
            cd.input_batch,
        ))
        .filter(|m| m.len() == lhs.len())?
    } else {
        act(cd.input_batch, cd.input_feature, &cd.input_spatial, lhs)?
    };
    let output = act(
        cd.output_batch,
        cd.output_feature,
        &cd.output_spatial,
        n.dims(),
    )?;
    let k = spatial_then(
        &cd.kernel_spatial,
        cd.kernel_input_feature,
        cd.kernel_output_feature,
    );
    Some((input, k, output))
}

/// Is `m2m` a layout the MXU can read a dot operand in: batch dims most-major, then the
/// free and the contracting dims each contiguous?
fn dot_layout_ok(m2m: &[i64], batch: &[i64], contracting: &[i64]) -> bool {
    let mtm: SmallVec<[i64; 8]> = m2m.iter().rev().copied().collect();
    let nb = batch.len();
    if mtm.len() < nb || !mtm[..nb].iter().all(|d| batch.contains(d)) {
        return false;
    }
    // Count runs of (contracting vs free) in the rest.
    let mut runs = 0;
    let mut last: Option<bool> = None;
    for d in &mtm[nb..] {
        let c = contracting.contains(d);
        if last != Some(c) {
            runs += 1;
            last = Some(c);
        }
    }
    runs <= 2
}

/// Canonical dot operand layout `[batch, free, contracting]` major → minor.
fn dot_canonical(rank: usize, batch: &[i64], contracting: &[i64]) -> Dims {
    let mut mtm: Dims = batch.iter().copied().collect();
    for d in 0..rank as i64 {
        if !batch.contains(&d) && !contracting.contains(&d) {
            mtm.push(d);
        }
    }
    mtm.extend(contracting.iter().copied());
    mtm.reverse();
    mtm
}

/// Run layout assignment on every flattened computation; returns counters.
pub(crate) fn assign(
    flat: &mut Flat<'_>,
    starts: &[SolverStart],
    cfg: &ResolvedConfig,
    scratch: &mut LayoutScratch,
) -> LayoutStats {
    let m = flat.module;
    // Boundary layouts of embedded computations (as written).
    let embedded = |c: CompId| -> CompLayouts {
        let comp = m.comp(c);
        CompLayouts {
            params: comp
                .params
                .iter()
                .map(|&p| written_leaves(&comp.instr(p).shape))
                .collect(),
            root: comp
                .graph
                .node_weight(comp.root)
                .map(|r| written_leaves(&r.shape))
                .unwrap_or_default(),
        }
    };
    // Processing order: callees first; a while body before its condition; branch 0 first.
    let nflat = flat.comps.len();
    let mut order: Vec<(usize, Role)> = Vec::with_capacity(nflat);
    let mut state = vec![0u8; nflat]; // 0 new, 1 in progress, 2 done
    let mut roles: Vec<Option<Role>> = vec![None; nflat];
    if let Some(e) = flat.flat_of.get(m.entry).copied().flatten() {
        roles[e] = Some(Role::Entry);
        visit(flat, e, &mut state, &mut order, &mut roles);
    }
    let mut done: Vec<Option<CompLayouts>> = vec![None; nflat];
    let flat_of = flat.flat_of.clone();
    let mut stats = LayoutStats::default();
    for (fi, _) in order {
        let role = roles[fi].clone().unwrap_or(Role::Other);
        // Resolve role details that depend on already processed computations.
        let role = match role {
            Role::Cond(_) => {
                let body = find_body_for_cond(flat, fi);
                let l = body
                    .and_then(|b| done[b].as_ref())
                    .and_then(|c| c.params.first().cloned())
                    .unwrap_or_default();
                Role::Cond(l)
            }
            Role::Branch(_) => {
                let b0 = find_branch0(flat, fi);
                match b0 {
                    Some(b) if b != fi => Role::Branch(done[b].as_ref().map(|c| c.root.clone())),
                    _ => Role::Branch(None),
                }
            }
            r => r,
        };
        let boundary = |c: CompId| -> Option<CompLayouts> {
            match flat_of.get(c).copied().flatten() {
                Some(f) => done[f].clone(),
                None => Some(embedded(c)),
            }
        };
        let (cl, st) = solve_comp(flat, fi, &starts[fi], &role, cfg, &boundary, scratch);
        stats.copies += st.copies;
        stats.bitcasts += st.bitcasts;
        done[fi] = Some(cl);
    }
    stats
}

fn visit(
    flat: &Flat<'_>,
    fi: usize,
    state: &mut [u8],
    order: &mut Vec<(usize, Role)>,
    roles: &mut [Option<Role>],
) {
    if state[fi] != 0 {
        return;
    }
    state[fi] = 1;
    let fc = &flat.comps[fi];
    for &x in &fc.order {
        let n = &fc.nodes[x as usize];
        match n.opcode {
            Opcode::While => {
                let body = n.src.and_then(|s| s.attrs.called_with(CallRole::Body));
                let cond = n.src.and_then(|s| s.attrs.called_with(CallRole::Condition));
                for (c, role) in [(body, Role::Body), (cond, Role::Cond(Leaves::new()))] {
                    if let Some(f) = c.and_then(|c| flat.flat_of.get(c).copied().flatten()) {
                        if roles[f].is_none() {
                            roles[f] = Some(role);
                        }
                        visit(flat, f, state, order, roles);
                    }
                }
            }
            Opcode::Conditional => {
                for &(_, c) in n.called() {
                    if let Some(f) = flat.flat_of.get(c).copied().flatten() {
                        if roles[f].is_none() {
                            roles[f] = Some(Role::Branch(None));
                        }
                        visit(flat, f, state, order, roles);
                    }
                }
            }
            _ => {}
        }
    }
    state[fi] = 2;
    order.push((fi, Role::Other));
}

/// The body of the while whose condition is flat computation `fi`.
fn find_body_for_cond(flat: &Flat<'_>, fi: usize) -> Option<usize> {
    let c = flat.comps[fi].comp;
    for fc in &flat.comps {
        for &x in &fc.order {
            let n = &fc.nodes[x as usize];
            if n.opcode == Opcode::While {
                let s = n.src?;
                if s.attrs.called_with(CallRole::Condition) == Some(c) {
                    return s
                        .attrs
                        .called_with(CallRole::Body)
                        .and_then(|b| flat.flat_of.get(b).copied().flatten());
                }
            }
        }
    }
    None
}

/// Branch 0 of the conditional that calls flat computation `fi`.
fn find_branch0(flat: &Flat<'_>, fi: usize) -> Option<usize> {
    let c = flat.comps[fi].comp;
    for fc in &flat.comps {
        for &x in &fc.order {
            let n = &fc.nodes[x as usize];
            if n.opcode == Opcode::Conditional && n.called().iter().any(|&(_, b)| b == c) {
                let &(_, b0) = n.called().first()?;
                return flat.flat_of.get(b0).copied().flatten();
            }
        }
    }
    None
}

fn solve_comp(
    flat: &mut Flat<'_>,
    fi: usize,
    start: &SolverStart,
    role: &Role,
    cfg: &ResolvedConfig,
    boundary: &dyn Fn(CompId) -> Option<CompLayouts>,
    scratch: &mut LayoutScratch,
) -> (CompLayouts, LayoutStats) {
    let m = flat.module;
    let mut s = Solver::new(&flat.comps[fi], start, role, cfg, scratch);
    // 1. Buffers whose layout is fixed, all seeded before any propagation.
    s.seed_parameters(m, role);
    s.seed_fixed_results(boundary);
    s.seed_configured_outputs(cfg);
    s.seed_root(m, role);
    s.drain();
    // 2. Configured operand layouts: requirements of the use, propagated to the operand.
    s.require_configured_operands(cfg);
    // 3. Uses that need a layout.
    s.require_by_uses(boundary);
    // 4. TPU preferences for convolution and dot.
    s.prefer_mxu_layouts(cfg);
    // 5. Row-major for the rest, in program order.
    s.row_major_rest();
    s.require_body_result(role);

    let solved = s.finish();
    let fc = &mut flat.comps[fi];
    let (reqs, root_req) = solved.store(fc, scratch);
    share_tuple_layouts(fc, &scratch.scan);
    let mut stats = LayoutStats::default();
    insert_copies(
        fc,
        &scratch.scan,
        &reqs,
        root_req.as_ref(),
        &mut flat.names,
        &mut stats,
        &mut scratch.copies,
    );
    to_bitcasts(fc, fi, &scratch.scan, &mut stats, &mut scratch.bitcasts);
    (comp_layouts(fc), stats)
}

impl<'s, 'a> Solver<'s, 'a> {
    /// A solver for `fc` with no layout set, its buffers taken from `scratch`.
    fn new(
        fc: &'s FComp<'a>,
        start: &SolverStart,
        role: &Role,
        cfg: &ResolvedConfig,
        scratch: &mut LayoutScratch,
    ) -> Self {
        let param0 = fc.params.first().copied().unwrap_or(NONE);
        let mut base = std::mem::take(&mut scratch.base);
        let mut ranks = std::mem::take(&mut scratch.ranks);
        let mut lay = std::mem::take(&mut scratch.lay);
        let mut layouts = std::mem::take(&mut scratch.layouts);
        let mut scan = std::mem::take(&mut scratch.scan);
        layouts.clear();
        debug_assert!(
            *start == SolverStart::of(fc),
            "the computation is not the prepared one"
        );
        base.clone_from(&start.base);
        ranks.clone_from(&start.ranks);
        scan.clone_from(&start.scan);
        for (s, n) in scan.iter_mut().zip(&fc.nodes) {
            s.configured = n.origin.get().and_then(|i| cfg.layout(i)).is_some();
        }
        lay.clear();
        lay.resize(ranks.len(), UNSET);
        let mut stack = std::mem::take(&mut scratch.stack);
        stack.clear();
        Solver {
            fc,
            scan,
            base,
            ranks,
            lay,
            layouts,
            reqs: HashMap::default(),
            root_req: None,
            stack,
            body_link: matches!(role, Role::Body) && param0 != NONE,
            param0,
        }
    }

    /// Entry parameters (the module's entry computation layout, else the default) and
    /// the parameter of a while condition (the body's parameter layout).
    fn seed_parameters(&mut self, m: &Module, role: &Role) {
        let fc = self.fc;
        match role {
            Role::Entry => {
                let given = m.attrs.entry_computation_layout.as_ref();
                for (k, &p) in fc.params.iter().enumerate() {
                    if p == NONE {
                        continue;
                    }
                    let shape = &fc.nodes[p as usize].shape;
                    let leaves = match given.and_then(|(ps, _)| ps.get(k)) {
                        Some(g) if g.compatible(shape) => written_leaves(g),
                        _ => default_leaves(shape),
                    };
                    self.set_all(p, &leaves);
                }
            }
            Role::Cond(l) if self.param0 != NONE => self.set_all(self.param0, l),
            _ => {}
        }
    }

    /// Results of while / conditional / fusion (their callees' boundary layouts) and of
    /// default-layout ops.
    fn seed_fixed_results(&mut self, boundary: &dyn Fn(CompId) -> Option<CompLayouts>) {
        let fc = self.fc;
        for &x in &fc.order {
            let Scan {
                opcode: op, class, ..
            } = self.scan[x as usize];
            if !fixed_by_callee_or_default(op, class) {
                continue;
            }
            let n = &fc.nodes[x as usize];
            match op {
                Opcode::While => {
                    if let Some(b) = n
                        .src
                        .and_then(|s| s.attrs.called_with(CallRole::Body))
                        .and_then(boundary)
                    {
                        if let Some(p) = b.params.first() {
                            self.set_all(x, p);
                        }
                    }
                }
                Opcode::Conditional | Opcode::Fusion => {
                    if let Some(b) = n.called().first().and_then(|&(_, c)| boundary(c)) {
                        self.set_all(x, &b.root);
                    }
                }
                _ if class == Class::DefaultLayout => {
                    let l = default_leaves(&n.shape);
                    self.set_all(x, &l);
                }
                _ => {}
            }
        }
    }

    /// Output layouts of the configuration.
    fn seed_configured_outputs(&mut self, cfg: &ResolvedConfig) {
        if cfg.layouts.is_empty() {
            return;
        }
        let fc = self.fc;
        for &x in &fc.order {
            if !self.scan[x as usize].configured {
                continue;
            }
            let n = &fc.nodes[x as usize];
            if let Some(o) = n
                .origin
                .get()
                .and_then(|i| cfg.layout(i))
                .and_then(|nl| nl.output.as_ref())
            {
                self.set(x, 0, o);
            }
        }
    }

    /// The required result of the computation: the entry's result layout, branch 0's
    /// root for the other branches of a conditional.
    fn seed_root(&mut self, m: &Module, role: &Role) {
        let fc = self.fc;
        match role {
            Role::Entry => {
                let root = fc.root;
                if let Some((_, r)) = m.attrs.entry_computation_layout.as_ref() {
                    if r.compatible(&fc.nodes[root as usize].shape) {
                        let l = written_leaves(r);
                        self.set_all(root, &l);
                        self.root_req = Some(l);
                    }
                }
            }
            Role::Branch(Some(l)) => {
                self.set_all(fc.root, l);
                self.root_req = Some(l.clone());
            }
            _ => {}
        }
    }

    /// Input and kernel layouts of the configuration, required of the operands.
    fn require_configured_operands(&mut self, cfg: &ResolvedConfig) {
        if cfg.layouts.is_empty() {
            return;
        }
        let fc = self.fc;
        for &x in &fc.order {
            if !self.scan[x as usize].configured {
                continue;
            }
            let n = &fc.nodes[x as usize];
            let Some(nl) = n.origin.get().and_then(|i| cfg.layout(i)) else {
                continue;
            };
            for (slot, l) in [(0usize, &nl.input), (1, &nl.kernel)] {
                if let Some(l) = l {
                    self.require(x, slot, SmallVec::from_elem(l.clone(), 1));
                }
            }
        }
    }

    /// Operands of while / conditional / fusion (their callees' parameter layouts) and
    /// of default-layout ops.
    fn require_by_uses(&mut self, boundary: &dyn Fn(CompId) -> Option<CompLayouts>) {
        let fc = self.fc;
        for &x in &fc.order {
            let Scan {
                opcode: op, class, ..
            } = self.scan[x as usize];
            if !fixed_by_callee_or_default(op, class) {
                continue;
            }
            let n = &fc.nodes[x as usize];
            match op {
                Opcode::While => {
                    if let Some(b) = n
                        .src
                        .and_then(|s| s.attrs.called_with(CallRole::Body))
                        .and_then(boundary)
                    {
                        if let Some(p) = b.params.first() {
                            self.require(x, 0, p.clone());
                        }
                    }
                }
                Opcode::Conditional => {
                    for (k, &(_, c)) in n.called().iter().enumerate() {
                        if let Some(p) = boundary(c).and_then(|b| b.params.first().cloned()) {
                            self.require(x, k + 1, p);
                        }
                    }
                }
                Opcode::Fusion => {
                    if let Some(b) = n.called().first().and_then(|&(_, c)| boundary(c)) {
                        for (k, p) in b.params.iter().enumerate() {
                            self.require(x, k, p.clone());
                        }
                    }
                }
                _ if class == Class::DefaultLayout => {
                    for (k, &o) in n.operands.iter().enumerate() {
                        let l = default_leaves(&fc.nodes[o as usize].shape);
                        self.require(x, k, l);
                    }
                }
                _ => {}
            }
        }
    }

    /// The TPU's preferred layouts of convolution and dot results and operands, where
    /// the configuration sets none.
    fn prefer_mxu_layouts(&mut self, cfg: &ResolvedConfig) {
        let fc = self.fc;
        for &x in &fc.order {
            if !matches!(
                self.scan[x as usize].opcode,
                Opcode::Convolution | Opcode::Dot
            ) {
                continue;
            }
            let n = &fc.nodes[x as usize];
            let configured = n.origin.get().and_then(|i| cfg.layout(i));
            match n.opcode {
                Opcode::Convolution => {
                    let Some(&lhs) = n.operands.first() else {
                        continue;
                    };
                    let lhs_dims: Dims = fc.nodes[lhs as usize].dims().iter().copied().collect();
                    let Some((i, k, o)) = conv_preference(n, &lhs_dims) else {
                        continue;
                    };
                    if configured.and_then(|c| c.output.as_ref()).is_none() {
                        self.set(x, 0, &o);
                        self.drain();
                    }
                    if configured.and_then(|c| c.input.as_ref()).is_none() {
                        self.require(x, 0, SmallVec::from_elem(i, 1));
                    }
                    if configured.and_then(|c| c.kernel.as_ref()).is_none() {
                        self.require(x, 1, SmallVec::from_elem(k, 1));
                    }
                }
                Opcode::Dot => {
                    let Some(dd) = n.src.and_then(|s| s.attrs.dot_dims.as_deref()) else {
                        continue;
                    };
                    if configured.and_then(|c| c.output.as_ref()).is_none() {
                        self.set(x, 0, &row_major(n.rank()));
                        self.drain();
                    }
                    let sides = [
                        (
                            0usize,
                            &dd.lhs_batch,
                            &dd.lhs_contracting,
                            configured.and_then(|c| c.input.as_ref()),
                        ),
                        (
                            1,
                            &dd.rhs_batch,
                            &dd.rhs_contracting,
                            configured.and_then(|c| c.kernel.as_ref()),
                        ),
                    ];
                    for (slot, batch, contracting, conf) in sides {
                        if conf.is_some() {
                            continue;
                        }
                        let Some(&o) = n.operands.get(slot) else {
                            continue;
                        };
                        let rank = fc.nodes[o as usize].rank();
                        let cur = self.get(o, 0).map(|d| dup(d));
                        let rm = row_major(rank);
                        let want = match cur {
                            Some(c) if dot_layout_ok(&c, batch, contracting) => c,
                            _ if dot_layout_ok(&rm, batch, contracting) => rm,
                            _ => dot_canonical(rank, batch, contracting),
                        };
                        self.require(x, slot, SmallVec::from_elem(want, 1));
                    }
                }
                _ => {}
            }
        }
    }

    /// Row-major for every leaf still unset, in program order.
    fn row_major_rest(&mut self) {
        let fc = self.fc;
        for &x in &fc.order {
            for i in 0..self.nl(x) {
                if self.get(x, i).is_none() {
                    let r = self.leaf_rank(x, i).unwrap_or(0);
                    self.set(x, i, &row_major(r));
                    self.drain();
                }
            }
        }
    }

    /// Body results must come back in the parameter layout.
    fn require_body_result(&mut self, role: &Role) {
        if let Role::Body = role {
            let p = self.param0;
            if p != NONE {
                let l: Leaves = (0..self.nl(p))
                    .map(|i| self.get(p, i).cloned().unwrap_or_default())
                    .collect();
                self.root_req = Some(l);
            }
        }
    }

    /// The solution, without the computation.
    fn finish(self) -> Solved {
        let Solver {
            scan,
            base,
            ranks,
            lay,
            layouts,
            reqs,
            root_req,
            stack,
            ..
        } = self;
        Solved {
            scan,
            base,
            ranks,
            lay,
            layouts,
            reqs,
            root_req,
            stack,
        }
    }
}

/// The layouts the solver found, with the requirements of the uses.
struct Solved {
    scan: Vec<Scan>,
    base: Vec<u32>,
    ranks: Vec<u8>,
    lay: Vec<u32>,
    layouts: Vec<Dims>,
    reqs: HashMap<(u32, u32), Leaves, FxBuild>,
    root_req: Option<Leaves>,
    stack: Vec<u32>,
}

impl Solved {
    /// Writes the layouts into the nodes of `fc` and gives the buffers back to
    /// `scratch`; the requirements of the uses and of the root.
    fn store(
        self,
        fc: &mut FComp<'_>,
        scratch: &mut LayoutScratch,
    ) -> (HashMap<(u32, u32), Leaves, FxBuild>, Option<Leaves>) {
        let Solved {
            scan,
            base,
            ranks,
            lay,
            layouts,
            reqs,
            root_req,
            stack,
        } = self;
        for (x, n) in fc.nodes.iter_mut().enumerate() {
            let leaves = &lay[base[x] as usize..base[x + 1] as usize];
            let layout = |l: u32| match l {
                UNSET => &[][..],
                l => &layouts[l as usize][..],
            };
            // (a node keeps the layouts of the last compilation, `FComp::reset_to`: most
            // are the same, a vector's or a scalar's one)
            if n.layouts.len() == leaves.len()
                && n.layouts
                    .iter()
                    .zip(leaves)
                    .all(|(d, &l)| d[..] == *layout(l))
            {
                continue;
            }
            n.layouts.clear();
            n.layouts.extend(leaves.iter().map(|&l| dup(layout(l))));
        }
        scratch.scan = scan;
        scratch.base = base;
        scratch.ranks = ranks;
        scratch.lay = lay;
        scratch.layouts = layouts;
        scratch.stack = stack;
        (reqs, root_req)
    }
}

/// A tuple has no buffer of its own here: its leaves are its operands', and a
/// get-tuple-element's those of its element.
fn share_tuple_layouts(fc: &mut FComp<'_>, scan: &[Scan]) {
    for k in 0..fc.order.len() {
        let x = fc.order[k] as usize;
        match opcode_of(fc, scan, x) {
            Opcode::Tuple => {
                let l: Leaves = fc.nodes[x]
                    .operands
                    .iter()
                    .flat_map(|&o| fc.nodes[o as usize].layouts.iter().cloned())
                    .collect();
                if l.len() == fc.nodes[x].layouts.len() {
                    fc.nodes[x].layouts = l;
                }
            }
            Opcode::GetTupleElement => {
                let n = &fc.nodes[x];
                let idx = n
                    .src
                    .and_then(|s| s.attrs.tuple_index)
                    .unwrap_or(n.tuple_index);
                let Some(&o) = n.operands.first() else {
                    continue;
                };
                let on = &fc.nodes[o as usize];
                if let Some((start, len)) = usize::try_from(idx)
                    .ok()
                    .and_then(|k| elem_range(&on.shape, k))
                {
                    if let Some(l) = on.layouts.get(start..start + len) {
                        let l: Leaves = l.iter().cloned().collect();
                        fc.nodes[x].layouts = l;
                    }
                }
            }
            _ => {}
        }
    }
}

/// Whether a node of opcode `op` has layouts fixed by what it calls (while, conditional,
/// fusion) or by the default layout its class takes: the nodes that
/// [`Solver::seed_fixed_results`] and [`Solver::require_by_uses`] read.
fn fixed_by_callee_or_default(op: Opcode, class: Class) -> bool {
    matches!(op, Opcode::While | Opcode::Conditional | Opcode::Fusion)
        || class == Class::DefaultLayout
}

/// The opcode of node `x` of `fc`, read from `scan` (the solver's, made before the
/// copies were inserted) where that has it, from the node for a node added since.
fn opcode_of(fc: &FComp<'_>, scan: &[Scan], x: usize) -> Opcode {
    match scan.get(x) {
        Some(s) => s.opcode,
        None => fc.nodes[x].opcode,
    }
}

/// The layouts of `fc`'s parameters and root.
fn comp_layouts(fc: &FComp<'_>) -> CompLayouts {
    CompLayouts {
        params: fc
            .params
            .iter()
            .map(|&p| {
                if p == NONE {
                    Leaves::new()
                } else {
                    fc.nodes[p as usize].layouts.clone()
                }
            })
            .collect(),
        root: fc.nodes[fc.root as usize].layouts.clone(),
    }
}

/// The requirement recorded for operand `slot` of `u` (`Solver::require`), looked up
/// only for a node whose [`Scan::required`] says it has one; `u` is a node `scan` has.
fn recorded<'r>(
    scan: &[Scan],
    reqs: &'r HashMap<(u32, u32), Leaves, FxBuild>,
    u: u32,
    slot: usize,
) -> Option<&'r Leaves> {
    if scan[u as usize].required {
        reqs.get(&(u, slot as u32))
    } else {
        None
    }
}

/// The layout a use requires of operand `slot` of `u`, if any (borrowed); `u` is a node
/// the solver's `scan` has.
fn requirement<'r>(
    fc: &'r FComp<'_>,
    scan: &[Scan],
    reqs: &'r HashMap<(u32, u32), Leaves, FxBuild>,
    u: u32,
    slot: usize,
) -> Option<&'r [Dims]> {
    if let Some(r) = recorded(scan, reqs, u, slot) {
        return Some(r.as_slice());
    }
    if scan[u as usize].class != Class::Preserving {
        return None;
    }
    let n = &fc.nodes[u as usize];
    let out = n.layouts.get(..1)?;
    let r = out[0].len();
    if r == 0 {
        return None;
    }
    let o = &fc.nodes[*n.operands.get(slot)? as usize];
    if o.array_rank() == Some(r) {
        Some(out)
    } else {
        None
    }
}

struct CopyMaker<'n, 'a> {
    names: &'n mut Namer<'a>,
    /// The copy made of (node, layout).
    memo: &'n mut HashMap<(u32, Dims), u32, FxBuild>,
    /// New nodes to place before the current user (or at the end for the root).
    pending: Vec<u32>,
}

impl<'n, 'a> CopyMaker<'n, 'a> {
    fn push(&mut self, fc: &mut FComp<'a>, node: FNode<'a>) -> u32 {
        let id = fc.nodes.len() as u32;
        fc.nodes.push(node);
        self.pending.push(id);
        id
    }

    /// A node holding the value of `o` in layout `want` (o itself if it already is).
    fn with_layout(
        &mut self,
        fc: &mut FComp<'a>,
        o: u32,
        want: &[Dims],
        stats: &mut LayoutStats,
    ) -> u32 {
        if fc.nodes[o as usize].layouts.as_slice() == want {
            return o;
        }
        if fc.nodes[o as usize].info.array {
            let Some(w) = want.first() else { return o };
            let key = (o, dup(w));
            if let Some(&c) = self.memo.get(&key) {
                return c;
            }
            let name = self.names.fresh("copy");
            // The copy has the operand's (logical) shape: share it.
            let shape = fc.nodes[o as usize].shape.clone();
            let mut node = FNode::synthetic_with(Opcode::Copy, shape, &[o], name);
            node.layouts = SmallVec::from_elem(dup(w), 1);
            let id = self.push(fc, node);
            self.memo.insert(key, id);
            stats.copies += 1;
            return id;
        }
        let shape: Shape = (*fc.nodes[o as usize].shape).clone();
        match &shape {
            Shape::Array(_) => o,
            Shape::Tuple(elems) => {
                let mut parts: SmallVec<[u32; 4]> = SmallVec::new();
                let mut off = 0;
                for (k, e) in elems.iter().enumerate() {
                    let n = leaf_count(e);
                    let sub: Vec<Dims> = want
                        .get(off..off + n)
                        .map(|s| s.to_vec())
                        .unwrap_or_default();
                    let have: Leaves = fc.nodes[o as usize]
                        .layouts
                        .get(off..off + n)
                        .map(|s| s.iter().cloned().collect())
                        .unwrap_or_default();
                    off += n;
                    let on = &fc.nodes[o as usize];
                    let elem = if on.opcode == Opcode::Tuple {
                        on.operands.get(k).copied()
                    } else {
                        None
                    };
                    let elem = match elem {
                        Some(e) => e,
                        None => {
                            let name = self.names.fresh("get-tuple-element");
                            let mut node =
                                FNode::synthetic(Opcode::GetTupleElement, e.clone(), &[o], name);
                            node.tuple_index = k as i64;
                            node.layouts = have;
                            self.push(fc, node)
                        }
                    };
                    parts.push(self.with_layout(fc, elem, &sub, stats));
                }
                let name = self.names.fresh("tuple");
                let mut node = FNode::synthetic(Opcode::Tuple, shape.clone(), &parts, name);
                node.layouts = want.iter().cloned().collect();
                self.push(fc, node)
            }
            Shape::Buffer(_) => o,
        }
    }
}

fn insert_copies<'a>(
    fc: &mut FComp<'a>,
    scan: &[Scan],
    reqs: &HashMap<(u32, u32), Leaves, FxBuild>,
    root_req: Option<&Leaves>,
    names: &mut Namer<'a>,
    stats: &mut LayoutStats,
    memo: &mut HashMap<(u32, Dims), u32, FxBuild>,
) {
    memo.clear();
    let mut mk = CopyMaker {
        names,
        memo,
        pending: Vec::new(),
    };
    let nodes_before = fc.nodes.len();
    // The user lists are kept up to date edge by edge while every new node is a copy of
    // an existing one (arrays; a tuple's copy makes element and tuple nodes, and the
    // lists are then built again whole).
    let mut only_copies = true;
    let old = std::mem::take(&mut fc.order);
    let mut order = Vec::with_capacity(old.len() + 8);
    let mut moved: SmallVec<[u32; 4]> = SmallVec::new();
    for &u in &old {
        let nops = fc.nodes[u as usize].operands.len();
        moved.clear();
        for slot in 0..nops {
            let o = fc.nodes[u as usize].operands[slot];
            let req: Leaves = match requirement(fc, scan, reqs, u, slot) {
                Some(r) if r != fc.nodes[o as usize].layouts.as_slice() => {
                    r.iter().cloned().collect()
                }
                _ => continue,
            };
            let v = mk.with_layout(fc, o, &req, stats);
            if v != o {
                fc.nodes[u as usize].operands[slot] = v;
                fc.touched.push(u);
                moved.push(o);
            }
        }
        if !mk.pending.is_empty() || !moved.is_empty() {
            only_copies = only_copies && new_copies_only(fc, &mk.pending);
            if only_copies {
                relink_users(fc, u, &mk.pending, &moved);
            }
        }
        order.append(&mut mk.pending);
        order.push(u);
    }
    if let Some(req) = root_req {
        let r = fc.root;
        let v = mk.with_layout(fc, r, req, stats);
        only_copies = only_copies && new_copies_only(fc, &mk.pending);
        if only_copies {
            for &c in &mk.pending {
                let o = fc.nodes[c as usize].operands[0];
                fc.nodes[o as usize].users.push(c);
                fc.touched.push(o);
            }
        }
        order.append(&mut mk.pending);
        fc.root = v;
    }
    fc.order = order;
    if !only_copies {
        fc.rebuild_users();
    }
    debug_assert!(
        fc.nodes.len() == nodes_before || {
            let mut full = fc.clone();
            full.rebuild_users();
            full.nodes
                .iter()
                .zip(&fc.nodes)
                .all(|(a, b)| a.users == b.users)
        },
        "user lists kept edge by edge differ from the lists built whole"
    );
}

/// Whether every node of `new` is a copy (of one operand).
fn new_copies_only(fc: &FComp<'_>, new: &[u32]) -> bool {
    new.iter().all(|&c| {
        let n = &fc.nodes[c as usize];
        n.opcode == Opcode::Copy && n.operands.len() == 1
    })
}

/// The user lists after `u`'s operands `moved` were replaced by copies, `copies` of them
/// new (placed just before `u` in program order): each copy is a user of its operand
/// where `u` was, `u` is a user of each copy it reads, and no longer of an operand it
/// stopped reading. User lists stay in program order.
fn relink_users(fc: &mut FComp<'_>, u: u32, copies: &[u32], moved: &[u32]) {
    for &c in copies {
        let o = fc.nodes[c as usize].operands[0];
        let users = &mut fc.nodes[o as usize].users;
        let at = users.iter().position(|&x| x == u).unwrap_or(users.len());
        users.insert(at, c);
        fc.touched.push(o);
    }
    for k in 0..fc.nodes[u as usize].operands.len() {
        let v = fc.nodes[u as usize].operands[k];
        if fc.nodes[v as usize].opcode == Opcode::Copy {
            let users = &mut fc.nodes[v as usize].users;
            if !users.contains(&u) {
                users.push(u);
                fc.touched.push(v);
            }
        }
    }
    for &o in moved {
        if !fc.nodes[u as usize].operands.contains(&o) {
            fc.nodes[o as usize].users.retain(|x| *x != u);
            fc.touched.push(o);
        }
    }
}

/// Turn transposes and reshapes that move no data (with TPU tiles) into bitcasts.
fn to_bitcasts(
    fc: &mut FComp<'_>,
    fi: usize,
    scan: &[Scan],
    stats: &mut LayoutStats,
    memo: &mut BitcastMemo,
) {
    for k in 0..fc.order.len() {
        let x = fc.order[k];
        let op = opcode_of(fc, scan, x as usize);
        if !matches!(op, Opcode::Transpose | Opcode::Reshape) {
            continue;
        }
        let n = &fc.nodes[x as usize];
        let Some(&o) = n.operands.first() else {
            continue;
        };
        let on = &fc.nodes[o as usize];
        let (Some(a), Some(b)) = (on.shape.as_array(), n.shape.as_array()) else {
            continue;
        };
        let (Some(am), Some(bm)) = (on.layouts.first(), n.layouts.first()) else {
            continue;
        };
        let perm = if op == Opcode::Transpose {
            let Some(perm) = n.src.and_then(|s| s.attrs.dimensions.as_ref()) else {
                continue;
            };
            Some(perm.as_slice())
        } else {
            None
        };
        let from = tiling::Laid {
            et: a.element_type,
            dims: &a.dims,
            m2m: am,
        };
        let to = tiling::Laid {
            et: b.element_type,
            dims: &b.dims,
            m2m: bm,
        };
        let packed = tiling::layout_key(&on.layouts).zip(tiling::layout_key(&n.layouts));
        if memo.of_node((fi, x), packed, perm, from, to) {
            fc.nodes[x as usize].opcode = Opcode::Bitcast;
            stats.bitcasts += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::PrimitiveType::{self, Bf16, F32};

    fn laid<'a>(et: PrimitiveType, dims: &'a [i64], m2m: &'a [i64]) -> tiling::Laid<'a> {
        tiling::Laid { et, dims, m2m }
    }

    #[test]
    fn the_bitcast_memo_answers_what_the_test_answers() {
        let mut memo = BitcastMemo::default();
        // [64] -> [1,1,1,64]: a bitcast under the row-major layout, not when the 64 is
        // made major (the unit dims then take the tiles' minor places)
        let cases: [(Option<&[i64]>, tiling::Laid<'_>, tiling::Laid<'_>); 6] = [
            (
                None,
                laid(F32, &[64], &[0]),
                laid(F32, &[1, 1, 1, 64], &[3, 2, 1, 0]),
            ),
            (
                None,
                laid(F32, &[64], &[0]),
                laid(F32, &[1, 1, 1, 64], &[0, 1, 2, 3]),
            ),
            (
                None,
                laid(Bf16, &[64], &[0]),
                laid(F32, &[1, 1, 1, 64], &[3, 2, 1, 0]),
            ),
            // a transpose that only relabels the layout, and the same dims unpermuted
            (
                Some(&[1, 0]),
                laid(F32, &[8, 128], &[1, 0]),
                laid(F32, &[128, 8], &[0, 1]),
            ),
            (
                Some(&[1, 0]),
                laid(F32, &[8, 128], &[1, 0]),
                laid(F32, &[128, 8], &[1, 0]),
            ),
            (
                Some(&[0, 1]),
                laid(F32, &[8, 128], &[1, 0]),
                laid(F32, &[8, 128], &[1, 0]),
            ),
        ];
        let direct: Vec<bool> = cases
            .iter()
            .map(|&(p, a, b)| tiling::is_tpu_bitcast(p, a, b))
            .collect();
        assert_eq!(direct, [true, false, false, true, false, true]);
        // asked twice, in two orders: every answer is the test's, remembered or not
        for _ in 0..2 {
            for (&(p, a, b), &want) in cases.iter().zip(&direct).rev() {
                assert_eq!(memo.is_tpu_bitcast(p, a, b), want);
            }
        }
        assert_eq!(
            memo.table.len(),
            cases.len(),
            "one entry per distinct question"
        );
        // by node: nodes 10 and 11 are laid out as the first case, node 12 has their
        // structure laid out as the second, node 13 is the third (bf16): two
        // structures, three answers
        let packed = |a: &tiling::Laid<'_>, b: &tiling::Laid<'_>| {
            tiling::layout_key(&[dup(a.m2m)]).zip(tiling::layout_key(&[dup(b.m2m)]))
        };
        for _ in 0..2 {
            for (x, case) in [(10u32, 0usize), (11, 0), (12, 1), (13, 2)] {
                let (p, a, b) = cases[case];
                let layouts = packed(&a, &b);
                assert!(layouts.is_some());
                assert_eq!(memo.of_node((0, x), layouts, p, a, b), direct[case]);
            }
        }
        assert_eq!(memo.structures.len(), 2);
        assert_eq!(memo.by_structure.len(), 3);
        assert_eq!(memo.structure[0][10], memo.structure[0][12]);
        assert_ne!(memo.structure[0][10], memo.structure[0][13]);
    }
}
