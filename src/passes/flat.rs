//! The working representation of the passes: each non-embedded computation (entry,
//! while bodies/conditions, conditional branches) as a flat vector of nodes that
//! *borrow* the input instructions. `call`s are inlined while flattening (XLA's
//! CallInliner), `get-tuple-element(tuple(...))` is folded and dead code dropped, so
//! the passes never clone the input module; the output module is built once at the end.

use petgraph::visit::NodeIndexable;
use smallvec::SmallVec;

use super::config::NodeTable;
use super::error::CompileError;
use crate::ir::{CallRole, CompId, Dims, Instruction, Module, Name, Opcode, PrimitiveType, Shape};

/// "No node".
pub(crate) const NONE: u32 = u32::MAX;

/// Index of a node in the TpuGraphs numbering of the input module ([`NodeTable`]),
/// which the configuration's layouts and fusion overrides name; not a flat node index.
/// A `u32` with `u32::MAX` for a node the passes made, so that an [`FNode`] stays small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct Origin(u32);

impl Origin {
    /// A node the passes made.
    pub const NONE: Origin = Origin(u32::MAX);

    /// The node index, if the node is an input instruction.
    pub fn get(self) -> Option<usize> {
        (self != Self::NONE).then_some(self.0 as usize)
    }

    /// From an index in [`NodeTable`] (none: [`Origin::NONE`]).
    fn of(index: Option<usize>) -> Origin {
        index.map_or(Self::NONE, |i| Origin(i as u32))
    }
}

/// How a computation of the input module is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompKind {
    /// Not reachable from the entry (or only called by inlined `call`s): dropped.
    Dropped,
    /// Entry, while body/condition, conditional branch: flattened, laid out and fused.
    Flat,
    /// Called by reduce/sort/scatter/map/... (`to_apply` & co) or by input fusions:
    /// copied verbatim with default layouts.
    Embedded,
}

/// A shape borrowed from the input or owned by a synthetic instruction (16 bytes
/// instead of a `Shape`'s 280).
#[derive(Debug, Clone)]
pub(crate) enum ShapeRef<'a> {
    Borrowed(&'a Shape),
    Owned(Box<Shape>),
}

impl std::ops::Deref for ShapeRef<'_> {
    type Target = Shape;
    fn deref(&self) -> &Shape {
        match self {
            ShapeRef::Borrowed(s) => s,
            ShapeRef::Owned(s) => s,
        }
    }
}

/// One instruction of a flattened computation.
#[derive(Debug)]
pub(crate) struct FNode<'a> {
    /// The input instruction (None for instructions the passes create).
    pub src: Option<&'a Instruction>,
    /// TpuGraphs node index of `src` in the input module.
    pub origin: Origin,
    pub opcode: Opcode,
    /// Logical shape (input layouts are ignored; final layouts are in `layouts`).
    pub shape: ShapeRef<'a>,
    pub operands: SmallVec<[u32; 4]>,
    /// Distinct users in program order.
    pub users: SmallVec<[u32; 4]>,
    /// New name (inlined clones and synthetic instructions).
    pub name: Option<std::sync::Arc<str>>,
    /// Final minor_to_major of each array leaf (set by the layout pass).
    pub layouts: SmallVec<[Dims; 1]>,
    /// Tuple index of a synthetic get-tuple-element.
    pub tuple_index: i64,
    /// Facts about `shape` kept beside the node: the passes test them often, and the
    /// shape itself lives in the input instruction, far away in memory.
    pub info: ShapeInfo,
}

/// Summary of a shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShapeInfo {
    /// `Shape::element_type` (Tuple / Buffer for those).
    pub ety: PrimitiveType,
    /// `Shape::element_count` (0 for tuples and buffers).
    pub elems: u64,
    /// Rank of an array (0 otherwise).
    pub rank: u32,
    pub array: bool,
}

impl ShapeInfo {
    pub fn of(s: &Shape) -> Self {
        ShapeInfo {
            ety: s.element_type(),
            elems: s.element_count(),
            rank: s.as_array().map(|a| a.rank() as u32).unwrap_or(0),
            array: s.as_array().is_some(),
        }
    }
}

impl Clone for FNode<'_> {
    fn clone(&self) -> Self {
        FNode {
            src: self.src,
            origin: self.origin,
            opcode: self.opcode,
            shape: self.shape.clone(),
            operands: self.operands.clone(),
            users: self.users.clone(),
            name: self.name.clone(),
            layouts: self.layouts.clone(),
            tuple_index: self.tuple_index,
            info: self.info,
        }
    }

    /// Reuses the buffers of `self` (the passes reset a pooled copy of the prepared
    /// module for every compilation).
    fn clone_from(&mut self, o: &Self) {
        self.src = o.src;
        self.origin = o.origin;
        self.opcode = o.opcode;
        match (&mut self.shape, &o.shape) {
            (ShapeRef::Borrowed(a), ShapeRef::Borrowed(b)) => *a = b,
            (a, b) => *a = b.clone(),
        }
        copy_ids(&mut self.operands, &o.operands);
        copy_ids(&mut self.users, &o.users);
        match (&self.name, &o.name) {
            (Some(a), Some(b)) if std::sync::Arc::ptr_eq(a, b) => {}
            _ => self.name.clone_from(&o.name),
        }
        if o.layouts.is_empty() {
            self.layouts.clear();
        } else {
            self.layouts.clone_from(&o.layouts);
        }
        self.tuple_index = o.tuple_index;
        self.info = o.info;
    }
}

impl FNode<'_> {
    /// Equal in every field but the layouts (shapes and names by identity where they
    /// are shared): what [`FComp::reset_to`] makes equal.
    pub fn same_but_layouts(&self, o: &Self) -> bool {
        let shape = match (&self.shape, &o.shape) {
            (ShapeRef::Borrowed(a), ShapeRef::Borrowed(b)) => std::ptr::eq(*a, *b),
            (ShapeRef::Owned(a), ShapeRef::Owned(b)) => a == b,
            _ => false,
        };
        self.src.map(|s| s as *const _) == o.src.map(|s| s as *const _)
            && self.origin == o.origin
            && self.opcode == o.opcode
            && shape
            && self.operands == o.operands
            && self.users == o.users
            && self.name == o.name
            && self.tuple_index == o.tuple_index
            && self.info == o.info
    }
}

/// `dst = src`, in place when the lengths agree (most nodes are as the last
/// compilation left them).
fn copy_ids(dst: &mut SmallVec<[u32; 4]>, src: &[u32]) {
    if dst.len() == src.len() {
        dst.copy_from_slice(src);
    } else {
        dst.clear();
        dst.extend_from_slice(src);
    }
}

impl<'a> FNode<'a> {
    /// An instruction created by the passes.
    pub fn synthetic(opcode: Opcode, shape: Shape, operands: &[u32], name: Name) -> Self {
        Self::synthetic_with(opcode, ShapeRef::Owned(Box::new(shape)), operands, name)
    }

    /// An instruction created by the passes, with a shape that may be borrowed.
    pub fn synthetic_with(
        opcode: Opcode,
        shape: ShapeRef<'a>,
        operands: &[u32],
        name: Name,
    ) -> Self {
        FNode {
            src: None,
            origin: Origin::NONE,
            opcode,
            info: ShapeInfo::of(&shape),
            shape,
            operands: operands.iter().copied().collect(),
            users: SmallVec::new(),
            name: Some(name.into()),
            layouts: SmallVec::new(),
            tuple_index: -1,
        }
    }

    /// [`FNode::name`], borrowed from the input module where it is the input
    /// instruction's.
    pub fn body_name(&self) -> super::kernel::NodeName<'a> {
        use super::kernel::NodeName;
        match &self.name {
            Some(n) => NodeName::Made(n.clone()),
            None => NodeName::Input(self.input_name()),
        }
    }

    /// The name the instruction will have in the output: its own (an inlined copy's, an
    /// instruction the passes made), else the input instruction's.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_else(|| self.input_name())
    }

    /// The input instruction's name (`?` without one).
    fn input_name(&self) -> &'a str {
        self.src.map_or("?", |s| &s.name)
    }

    /// Rank of an array shape (0 for tuples).
    pub fn rank(&self) -> usize {
        self.info.rank as usize
    }

    /// Rank if the shape is an array.
    pub fn array_rank(&self) -> Option<usize> {
        self.info.array.then_some(self.info.rank as usize)
    }

    /// Dims of an array shape.
    pub fn dims(&self) -> &[i64] {
        self.shape.dims()
    }

    /// Called computations of the source instruction.
    pub fn called(&self) -> &[(CallRole, CompId)] {
        match self.src {
            Some(s) => &s.attrs.called,
            None => &[],
        }
    }
}

/// A flattened computation.
#[derive(Debug)]
pub(crate) struct FComp<'a> {
    /// The input computation it comes from (same name in the output).
    pub comp: CompId,
    pub nodes: Vec<FNode<'a>>,
    /// Live nodes in program order.
    pub order: Vec<u32>,
    pub root: u32,
    /// Parameter nodes by number.
    pub params: Vec<u32>,
    /// The nodes whose operand or user lists a pass changed since the computation was
    /// copied (for [`FComp::reset_to`]; duplicates allowed).
    pub touched: Vec<u32>,
    /// Every user list was built again since the computation was copied.
    pub rebuilt: bool,
}

impl Clone for FComp<'_> {
    fn clone(&self) -> Self {
        // Room for the copies, tuples and get-tuple-elements layout assignment adds, so
        // that a fresh copy is not reallocated (and moved) on the first insertion.
        let mut nodes = Vec::with_capacity(self.nodes.len() + self.nodes.len() / 4 + 16);
        nodes.extend(self.nodes.iter().cloned());
        FComp {
            comp: self.comp,
            nodes,
            order: self.order.clone(),
            root: self.root,
            params: self.params.clone(),
            touched: Vec::new(),
            rebuilt: false,
        }
    }

    fn clone_from(&mut self, o: &Self) {
        self.comp = o.comp;
        self.nodes.clone_from(&o.nodes);
        self.order.clone_from(&o.order);
        self.root = o.root;
        self.params.clone_from(&o.params);
        self.touched.clear();
        self.rebuilt = false;
    }
}

impl<'a> FComp<'a> {
    /// Makes `self`, a copy of `o` that the passes have changed since, equal to `o`
    /// again but for the layouts: the nodes the passes added are dropped, and of the
    /// others only what the passes change is copied back (the opcode, which a bitcast
    /// changes; the operand and user lists of the nodes [`FComp::touched`] names, or of
    /// every node if the user lists were [`FComp::rebuilt`]). The nodes the passes never
    /// touch are the bulk of a computation: copying every node whole was 2 % of the
    /// instructions of a random configuration of ResNet-50 training. The layouts stay
    /// as the last compilation left them: layout assignment, the first pass, writes
    /// every node's of each computation it lays out (and leaves those equal untouched:
    /// a vector's or a scalar's, most nodes of a training step), before any pass reads
    /// them; a computation it does not lay out keeps its layouts from `o`.
    pub fn reset_to(&mut self, o: &Self) {
        if self.rebuilt || self.nodes.len() < o.nodes.len() {
            self.clone_from(o);
            return;
        }
        self.comp = o.comp;
        self.nodes.truncate(o.nodes.len());
        for &x in &self.touched {
            // (a node the passes added is gone already)
            if let (Some(d), Some(s)) = (self.nodes.get_mut(x as usize), o.nodes.get(x as usize)) {
                copy_ids(&mut d.operands, &s.operands);
                copy_ids(&mut d.users, &s.users);
            }
        }
        self.touched.clear();
        for (d, s) in self.nodes.iter_mut().zip(&o.nodes) {
            d.opcode = s.opcode;
        }
        self.order.clone_from(&o.order);
        self.root = o.root;
        self.params.clone_from(&o.params);
        debug_assert!(
            self.nodes
                .iter()
                .zip(&o.nodes)
                .all(|(a, b)| a.same_but_layouts(b)),
            "a pass changed a node without recording it in `touched`"
        );
    }

    /// Recompute `users` of every node from `operands` (live nodes in `order` only).
    pub fn rebuild_users(&mut self) {
        self.rebuilt = true;
        for n in &mut self.nodes {
            n.users.clear();
        }
        for k in 0..self.order.len() {
            let u = self.order[k];
            for i in 0..self.nodes[u as usize].operands.len() {
                let o = self.nodes[u as usize].operands[i];
                let users = &mut self.nodes[o as usize].users;
                if users.last() != Some(&u) {
                    users.push(u);
                }
            }
        }
    }
}

/// The flattened module.
pub(crate) struct Flat<'a> {
    pub module: &'a Module,
    pub table: std::sync::Arc<NodeTable>,
    pub kinds: Vec<CompKind>,
    /// Embedded computations called by `fusion` instructions of the input (their
    /// shapes get TPU tiles like the rest).
    pub fused: Vec<bool>,
    /// Flattened computations, in input-module order.
    pub comps: Vec<FComp<'a>>,
    /// Input computation → index in `comps`.
    pub flat_of: Vec<Option<usize>>,
    /// Every instruction name used in the output so far.
    pub names: Namer<'a>,
}

impl Clone for Flat<'_> {
    fn clone(&self) -> Self {
        Flat {
            module: self.module,
            table: self.table.clone(),
            kinds: self.kinds.clone(),
            fused: self.fused.clone(),
            comps: self.comps.clone(),
            flat_of: self.flat_of.clone(),
            names: self.names.clone(),
        }
    }

    /// Reuses every buffer of `self` (nodes, operand and user lists).
    fn clone_from(&mut self, o: &Self) {
        self.module = o.module;
        self.table.clone_from(&o.table);
        self.kinds.clone_from(&o.kinds);
        self.fused.clone_from(&o.fused);
        self.comps.clone_from(&o.comps);
        self.flat_of.clone_from(&o.flat_of);
        self.names.clone_from(&o.names);
    }
}

impl<'a> Flat<'a> {
    /// Makes `self`, a copy of `o` that a compilation has changed since, equal to `o`
    /// again, each computation by [`FComp::reset_to`].
    pub fn reset_to(&mut self, o: &Self) {
        if self.comps.len() != o.comps.len() {
            self.clone_from(o);
            return;
        }
        self.module = o.module;
        self.table.clone_from(&o.table);
        self.kinds.clone_from(&o.kinds);
        self.fused.clone_from(&o.fused);
        for (d, s) in self.comps.iter_mut().zip(&o.comps) {
            d.reset_to(s);
        }
        self.flat_of.clone_from(&o.flat_of);
        self.names.clone_from(&o.names);
    }
}

/// A fast non-cryptographic hasher (the rustc "Fx" hash) for the passes' hot maps.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher {
    hash: u64,
}

const FX_K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 56));
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.hash
    }
}

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.hash = (self.hash.rotate_left(5) ^ w).wrapping_mul(FX_K);
    }
}

/// Build-hasher for [`FxHasher`].
pub(crate) type FxBuild = std::hash::BuildHasherDefault<FxHasher>;

/// Hands out names that cannot clash with the input's or with each other, without a
/// name table: every fresh name is `base.N` with N taken from one counter that starts
/// above every numeric `.N` suffix of the input's instruction and computation names.
/// An input name ends in a smaller number (or in no number), and two fresh names differ
/// in N.
#[derive(Clone)]
pub(crate) struct Namer<'a> {
    next: u64,
    _m: std::marker::PhantomData<&'a Module>,
}

fn numeric_suffix(name: &str) -> u64 {
    match name.rfind('.') {
        Some(p) => {
            let t = &name[p + 1..];
            if !t.is_empty() && t.len() <= 18 && t.bytes().all(|b| b.is_ascii_digit()) {
                t.parse().unwrap_or(0)
            } else {
                0
            }
        }
        None => 0,
    }
}

impl<'a> Namer<'a> {
    fn new(m: &'a Module) -> Self {
        let mut max = 0u64;
        for c in m.computations.values() {
            max = max.max(numeric_suffix(&c.name));
            for &id in &c.order {
                max = max.max(numeric_suffix(&c.instr(id).name));
            }
        }
        Namer {
            next: max.saturating_add(1),
            _m: std::marker::PhantomData,
        }
    }

    /// Use up a number without making a name (dry runs keep the numbering identical).
    pub fn skip(&mut self) {
        self.next += 1;
    }

    /// Use up a number and return it: `fresh(base)` would have been `base.N`.
    pub fn number(&mut self) -> u64 {
        self.next += 1;
        self.next - 1
    }

    /// A fresh name `base.N`.
    pub fn fresh(&mut self, base: &str) -> Name {
        self.fresh_numbered(base, None)
    }

    /// A fresh name `{base}{index}.N` (`param_3.N`) without a temporary string.
    pub fn fresh_indexed(&mut self, base: &str, index: u64) -> Name {
        self.fresh_numbered(base, Some(index))
    }

    fn fresh_numbered(&mut self, base: &str, index: Option<u64>) -> Name {
        let k = self.next;
        self.next += 1;
        numbered(base, index, k)
    }
}

/// `{base}{index}.{k}` (`base.k` without an index).
pub(crate) fn numbered(base: &str, index: Option<u64>, k: u64) -> Name {
    // Written into a stack buffer and copied once: a name of up to 24 bytes is stored
    // inline (no allocation).
    let mut buf = [0u8; 96];
    if base.len() <= 48 {
        buf[..base.len()].copy_from_slice(base.as_bytes());
        let mut len = base.len();
        if let Some(i) = index {
            len += write_decimal(&mut buf[len..], i);
        }
        buf[len] = b'.';
        len += 1;
        len += write_decimal(&mut buf[len..], k);
        // SAFETY: `base` is a str (cut at its end) followed by ASCII digits and '.'.
        return Name::from(unsafe { std::str::from_utf8_unchecked(&buf[..len]) });
    }
    // A long base (rare): the name is on the heap anyway.
    Name::from(match index {
        Some(i) => format!("{base}{i}.{k}"),
        None => format!("{base}.{k}"),
    })
}

/// Write `k` in base 10 at the start of `out` (which must hold 20 bytes); returns the
/// number of bytes written (`format!("{k}")` without the formatting machinery).
fn write_decimal(out: &mut [u8], k: u64) -> usize {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    let mut k = k;
    loop {
        i -= 1;
        tmp[i] = b'0' + (k % 10) as u8;
        k /= 10;
        if k == 0 {
            break;
        }
    }
    let n = tmp.len() - i;
    out[..n].copy_from_slice(&tmp[i..]);
    n
}

/// Kept even when their value is unused: [`Opcode::has_side_effect`], and a
/// `custom-call` marked as having one.
pub(crate) fn has_side_effect(ins: &Instruction) -> bool {
    match ins.opcode {
        Opcode::CustomCall => ins.attrs.custom_call_has_side_effect == Some(true),
        op => op.has_side_effect(),
    }
}

const MAX_DEPTH: usize = 64;

fn bad(m: &Module, message: impl Into<String>) -> CompileError {
    CompileError::BadModule {
        module: m.name.clone(),
        message: message.into(),
    }
}

/// Classify the computations of a module; also says which are fused computations.
fn classify(m: &Module) -> Result<(Vec<CompKind>, Vec<bool>), CompileError> {
    let n = m.computations.len();
    let mut kinds = vec![CompKind::Dropped; n];
    let mut fused = vec![false; n];
    if m.entry >= n {
        return Err(bad(m, "entry computation index out of range"));
    }
    // Work items: (computation, context is flat?, depth)
    let mut stack: Vec<(CompId, bool, usize)> = vec![(m.entry, true, 0)];
    kinds[m.entry] = CompKind::Flat;
    // Computations scanned in the inlined (flat) context, to avoid rescanning.
    let mut scanned_flat = vec![false; n];
    let mut scanned_emb = vec![false; n];
    while let Some((c, flat, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(bad(m, "computations nest too deeply (recursive calls?)"));
        }
        let seen = if flat {
            &mut scanned_flat[c]
        } else {
            &mut scanned_emb[c]
        };
        if *seen {
            continue;
        }
        *seen = true;
        let comp = m.comp(c);
        for &id in &comp.order {
            let ins = comp.instr(id);
            for &(role, callee) in &ins.attrs.called {
                if callee >= n {
                    return Err(bad(
                        m,
                        format!("'{}' calls a missing computation", ins.name),
                    ));
                }
                let child_flat = match (flat, ins.opcode, role) {
                    (true, Opcode::Call, CallRole::ToApply) => {
                        // Inlined: scanned in flat context, kind unchanged.
                        stack.push((callee, true, depth + 1));
                        continue;
                    }
                    (true, Opcode::While, CallRole::Body | CallRole::Condition) => true,
                    (
                        true,
                        Opcode::Conditional,
                        CallRole::BranchComputations
                        | CallRole::TrueComputation
                        | CallRole::FalseComputation,
                    ) => true,
                    _ => false,
                };
                if ins.opcode == Opcode::Fusion {
                    fused[callee] = true;
                }
                if child_flat {
                    kinds[callee] = CompKind::Flat;
                } else if kinds[callee] == CompKind::Dropped {
                    kinds[callee] = CompKind::Embedded;
                }
                stack.push((callee, child_flat, depth + 1));
            }
        }
    }
    Ok((kinds, fused))
}

impl<'a> Flat<'a> {
    /// Flatten a module: classify computations, inline calls, fold gte(tuple), DCE.
    pub fn build(m: &'a Module) -> Result<Self, CompileError> {
        let table = std::sync::Arc::new(NodeTable::new(m));
        let (kinds, fused) = classify(m)?;
        let mut flat = Flat {
            module: m,
            table,
            kinds,
            fused,
            comps: Vec::new(),
            flat_of: vec![None; m.computations.len()],
            names: Namer::new(m),
        };
        for c in 0..m.computations.len() {
            if flat.kinds[c] != CompKind::Flat {
                continue;
            }
            let mut fc = FComp {
                comp: c,
                nodes: Vec::with_capacity(m.comp(c).len()),
                order: Vec::new(),
                root: NONE,
                params: Vec::new(),
                touched: Vec::new(),
                rebuilt: false,
            };
            let root = flat.instantiate(&mut fc, c, None, false, 0)?;
            fc.root = root;
            dce(&mut fc);
            fc.rebuild_users();
            flat.flat_of[c] = Some(flat.comps.len());
            flat.comps.push(fc);
        }
        Ok(flat)
    }

    /// Append the instructions of computation `c` to `out`; `args` maps parameters
    /// (inlined callee) to existing nodes. Returns the node of the root.
    fn instantiate(
        &mut self,
        out: &mut FComp<'a>,
        c: CompId,
        args: Option<&[u32]>,
        rename: bool,
        depth: usize,
    ) -> Result<u32, CompileError> {
        let m = self.module;
        if depth > MAX_DEPTH {
            return Err(bad(m, "calls nest too deeply (recursive calls?)"));
        }
        let comp = m.comp(c);
        let mut map = vec![NONE; comp.graph.node_bound()];
        for &id in &comp.order {
            let ins = comp.instr(id);
            let mut operands: SmallVec<[u32; 4]> = SmallVec::new();
            for o in comp.operands(id) {
                let v = map.get(o.index()).copied().unwrap_or(NONE);
                if v == NONE {
                    return Err(bad(
                        m,
                        format!("'{}' uses an operand defined after it or missing", ins.name),
                    ));
                }
                operands.push(v);
            }
            let mapped = match ins.opcode {
                Opcode::Parameter if args.is_some() => {
                    let k = ins.attrs.parameter_number.unwrap_or(-1);
                    let a = args.unwrap_or(&[]);
                    match usize::try_from(k).ok().and_then(|k| a.get(k)) {
                        Some(&v) => v,
                        None => {
                            return Err(bad(
                                m,
                                format!("call into '{}' passes no argument {k}", comp.name),
                            ))
                        }
                    }
                }
                Opcode::Call => {
                    let Some(callee) = ins.attrs.called_with(CallRole::ToApply) else {
                        return Err(bad(m, format!("call '{}' has no to_apply", ins.name)));
                    };
                    // Inlined instructions get fresh names (`name.N`), as XLA's inliner
                    // clones them: the callee's names may clash with the caller's.
                    self.instantiate(out, callee, Some(&operands), true, depth + 1)?
                }
                Opcode::GetTupleElement
                    if operands.len() == 1
                        && out.nodes[operands[0] as usize].opcode == Opcode::Tuple =>
                {
                    let t = &out.nodes[operands[0] as usize];
                    let k = ins.attrs.tuple_index.unwrap_or(-1);
                    match usize::try_from(k).ok().and_then(|k| t.operands.get(k)) {
                        Some(&v) => v,
                        None => {
                            return Err(bad(
                                m,
                                format!("'{}': tuple index {k} out of range", ins.name),
                            ))
                        }
                    }
                }
                _ => {
                    let name = if rename {
                        Some(self.names.fresh(&ins.name).as_str().into())
                    } else {
                        None
                    };
                    let origin = Origin::of(self.table.index_of(c, id));
                    let v = out.nodes.len() as u32;
                    if ins.opcode == Opcode::Parameter {
                        let k = ins.attrs.parameter_number.unwrap_or(-1);
                        let k = usize::try_from(k).map_err(|_| {
                            bad(m, format!("parameter '{}' has no number", ins.name))
                        })?;
                        if out.params.len() <= k {
                            out.params.resize(k + 1, NONE);
                        }
                        out.params[k] = v;
                    }
                    out.nodes.push(FNode {
                        src: Some(ins),
                        origin,
                        opcode: ins.opcode,
                        shape: ShapeRef::Borrowed(&ins.shape),
                        operands,
                        users: SmallVec::new(),
                        name,
                        layouts: SmallVec::new(),
                        tuple_index: -1,
                        info: ShapeInfo::of(&ins.shape),
                    });
                    v
                }
            };
            map[id.index()] = mapped;
        }
        match map.get(comp.root.index()) {
            Some(&r) if r != NONE => Ok(r),
            _ => Err(bad(m, format!("computation '{}' has no root", comp.name))),
        }
    }
}

/// Drop nodes that do not reach the root (keeping parameters and side effects) and
/// set `order` to the live nodes in creation (= program) order.
pub(crate) fn dce(fc: &mut FComp<'_>) {
    let n = fc.nodes.len();
    let mut live = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    let mark = |v: u32, live: &mut Vec<bool>, stack: &mut Vec<u32>| {
        if let Some(l) = live.get_mut(v as usize) {
            if !*l {
                *l = true;
                stack.push(v);
            }
        }
    };
    mark(fc.root, &mut live, &mut stack);
    for (i, nd) in fc.nodes.iter().enumerate() {
        let keep = nd.opcode == Opcode::Parameter || nd.src.map(has_side_effect).unwrap_or(false);
        if keep {
            mark(i as u32, &mut live, &mut stack);
        }
    }
    // Nodes not in the current order (e.g. already removed) stay dead: only nodes
    // reachable through operands are revived.
    while let Some(v) = stack.pop() {
        let ops = fc.nodes[v as usize].operands.clone();
        for o in ops {
            mark(o, &mut live, &mut stack);
        }
    }
    let old = std::mem::take(&mut fc.order);
    let candidates: Vec<u32> = if old.is_empty() {
        (0..n as u32).collect()
    } else {
        old
    };
    fc.order = candidates
        .into_iter()
        .filter(|&v| live[v as usize])
        .collect();
}

#[cfg(test)]
mod namer_tests {
    use super::*;

    #[test]
    fn fresh_names_count_up_past_every_numeric_suffix() {
        let m = crate::hlo::parse_module(
            "t.hlo",
            "HloModule m\nENTRY e.3 {\n  ROOT p.41 = f32[] parameter(0)\n}\n",
        )
        .unwrap();
        let mut n = Namer::new(&m);
        assert_eq!(n.fresh("copy"), "copy.42");
        n.skip();
        assert_eq!(n.fresh_indexed("param_", 0), "param_0.44");
        assert_eq!(n.fresh_indexed("param_", 1207), "param_1207.45");
        for _ in 0..54 {
            n.skip();
        }
        assert_eq!(n.fresh("fusion"), "fusion.100");
    }

    #[test]
    fn decimals_match_the_formatter() {
        for k in [
            0u64,
            1,
            9,
            10,
            11,
            99,
            100,
            101,
            999_999,
            1_000_000,
            u64::MAX,
        ] {
            let mut buf = [0u8; 20];
            let n = write_decimal(&mut buf, k);
            assert_eq!(std::str::from_utf8(&buf[..n]).unwrap(), k.to_string());
        }
    }

    #[test]
    fn long_bases_get_the_same_names() {
        let m = crate::hlo::parse_module(
            "t.hlo",
            "HloModule m\nENTRY e {\n  ROOT p.7 = f32[] parameter(0)\n}\n",
        )
        .unwrap();
        let mut n = Namer::new(&m);
        let base = "a_very_long_instruction_name_from_some_frontend_x_y_z";
        assert!(base.len() > 48);
        assert_eq!(n.fresh(base), format!("{base}.8"));
        assert_eq!(n.fresh_indexed(base, 12), format!("{base}12.9"));
        // Short names are stored inline.
        assert!(!n.fresh("copy").is_heap_allocated());
    }
}
