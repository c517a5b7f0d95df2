//! TPU-flavoured instruction fusion (spec §4.7–4.8) on a laid-out flat computation.
//!
//! Two phases:
//! 1. **Output fusion** (kOutput): every dot/convolution becomes the hero of a fusion
//!    that absorbs, in program order, the chain of single-use elementwise / bitcast
//!    consumers of its result (bias add, batch-norm scale, activation, convert).
//! 2. **Producer→consumer fusion** (XLA's `InstructionFusion`): consumers are visited
//!    from the root upwards; each absorbs its operand producers, latest first, under
//!    XLA's rules (no duplication of expensive ops, duplicated producers must be cheap
//!    and fusible into all their users, no expensive producer into a consumer that
//!    re-reads it, one reduction / one MXU op per fusion, in-place buffers untouched,
//!    ≤ 96 operands + outputs, an instruction cloned into at most 15 fusions, scalar
//!    constants only into existing fusions). A fusion with a reduction, scatter or
//!    physical copy/transpose is `kInput`, one with a dot/convolution (or rooted at an
//!    in-place dynamic-update-slice) `kOutput`, anything else `kLoop`.

use smallvec::SmallVec;
use std::collections::BinaryHeap;

use super::config::{FusionPolicy, ResolvedConfig};
use super::flat::{FComp, FNode, NONE};
use crate::ir::{FusionKind, Opcode};

/// XLA's `MaxOperandsAndOutputsPerFusion`.
pub const MAX_OPERANDS_AND_OUTPUTS: usize = 96;
/// XLA's `kAllowedCodeDuplication`: an instruction is cloned into at most this many fusions.
pub const MAX_DUPLICATION: usize = 15;

/// One planned fusion.
#[derive(Debug, Clone)]
pub(crate) struct GroupPlan {
    pub root: u32,
    /// Members in program order (root last).
    pub members: Vec<u32>,
    pub kind: FusionKind,
    pub hero: u32,
}

/// Result of the fusion pass for one computation.
#[derive(Debug, Clone, Default)]
pub(crate) struct FusionPlan {
    pub groups: Vec<GroupPlan>,
    /// `group_at[x]` = index in `groups` of the fusion that replaces node x (its root).
    pub group_at: Vec<u32>,
    /// Nodes that still exist outside any fusion (possibly dead after fusion).
    pub standalone: Vec<bool>,
    /// Override edges that could not be honoured.
    pub notes: Vec<String>,
}

/// XLA's `IsExpensive` with the GPU overrides that also fit a TPU (divide, sqrt, rsqrt,
/// exp are cheap on floats).
fn is_expensive(n: &FNode<'_>) -> bool {
    use Opcode::*;
    let float = n.info.ety.is_floating();
    let complex = n.info.ety.is_complex();
    match n.opcode {
        Add | And | Bitcast | BitcastConvert | Broadcast | Ceil | Clamp | Clz | Compare
        | Complex | Concatenate | Constant | Convert | Copy | DynamicSlice | DynamicUpdateSlice
        | Floor | GetTupleElement | Imag | Iota | IsFinite | Maximum | Minimum | Multiply
        | Negate | Not | Or | Xor | Pad | PopulationCount | Real | ReducePrecision | Reshape
        | Reverse | RoundNearestAfz | RoundNearestEven | Select | ShiftLeft
        | ShiftRightArithmetic | ShiftRightLogical | Slice | Subtract | Transpose | Tuple
        | PartitionId | ReplicaId | OptimizationBarrier => false,
        Abs | Cos | Sign | Sin | Tan => complex,
        Divide | Remainder => !(n.info.ety.is_integral() || float && n.opcode == Divide),
        Sqrt | Rsqrt | Exp => !float,
        _ => true,
    }
}

/// A copy/transpose/reshape that moves data between layouts (kept as its own hero).
fn is_physical_relayout(fc: &FComp<'_>, x: u32) -> bool {
    let n = &fc.nodes[x as usize];
    match n.opcode {
        Opcode::Transpose => true,
        Opcode::Copy => {
            let o = n.operands.first().map(|&o| &fc.nodes[o as usize]);
            o.map(|o| o.layouts != n.layouts).unwrap_or(false)
        }
        _ => false,
    }
}

/// Does `u` read the elements of operand `slot` more than once per output element?
#[inline]
fn reuses(u: &FNode<'_>, slot: usize) -> bool {
    use Opcode::*;
    match u.opcode {
        Bitcast | Concatenate | Reshape | Reverse | Slice | Transpose | Gather | Copy => false,
        op if op.is_elementwise() => false,
        Pad => slot == 1,
        Reduce => slot >= u.operands.len() / 2,
        DynamicUpdateSlice => slot >= 2,
        DynamicSlice => slot >= 1,
        _ => true,
    }
}

/// Cheap to recompute in every user.
fn always_duplicable(fc: &FComp<'_>, x: u32) -> bool {
    let n = &fc.nodes[x as usize];
    match n.opcode {
        Opcode::Broadcast | Opcode::Iota | Opcode::Bitcast => true,
        Opcode::Constant => n.info.elems <= 1,
        Opcode::Convert => {
            let o = n
                .operands
                .first()
                .map(|&o| fc.nodes[o as usize].info.ety.bit_width());
            o.map(|b| n.info.ety.bit_width() > b).unwrap_or(false)
        }
        _ => false,
    }
}

/// XLA's "effectively at most unary" / no-growth test for free duplication.
fn cheap_to_duplicate(fc: &FComp<'_>, x: u32) -> bool {
    let n = &fc.nodes[x as usize];
    let out_rank = n.rank();
    let out_elems = n.info.elems;
    let mut big = 0;
    let mut total: u64 = 0;
    for &o in &n.operands {
        let on = &fc.nodes[o as usize];
        total = total.saturating_add(on.info.elems);
        let trivial = matches!(on.opcode, Opcode::Broadcast | Opcode::Iota)
            || (on.opcode == Opcode::Constant && on.info.elems <= 1);
        if !trivial && on.rank() >= out_rank {
            big += 1;
        }
    }
    big <= 1 || total <= out_elems
}

/// Can `x` be fused into a consumer at all?
fn producer_ok(fc: &FComp<'_>, x: u32) -> bool {
    let n = &fc.nodes[x as usize];
    if n.opcode.is_never_fused() || !n.info.array {
        return false;
    }
    if is_physical_relayout(fc, x) {
        return false;
    }
    !n.opcode.updates_in_place()
}

/// Can `x` be the root a fusion grows from?
fn consumer_ok(fc: &FComp<'_>, x: u32) -> bool {
    let n = &fc.nodes[x as usize];
    !n.opcode.is_never_fused() && n.opcode != Opcode::Constant && n.info.array
}

enum Verdict {
    Fuse {
        reused: bool,
    },
    No,
    /// A forced (override) fusion broke a hard rule.
    Refused(&'static str),
}

struct Group {
    root: u32,
    members: Vec<u32>,
    /// Distinct operands of members that are not members, in discovery order; may also
    /// hold producers absorbed since (skip members when reading it).
    inputs: Vec<u32>,
    /// Number of real inputs in `inputs`.
    n_inputs: usize,
    mxu: u32,
    reductions: u32,
}

/// The fusion pass's state of one node, in one record: deciding a producer reads most
/// of it, from one or two cache lines, where one vector a field took a line a field.
#[derive(Debug, Clone, Copy)]
struct NodeState {
    /// Position in program order.
    pos: u32,
    /// The fusion grown from the node (`NONE`: none).
    own_group: u32,
    /// The last round of producer-consumer fusion that tried to absorb the node (a
    /// count of its own, not `Fuser::stamp`).
    tried: u32,
    /// Kernels reading the node's standalone value (see [`Fuser`]).
    ext: u32,
    /// Number of fusions holding a clone of the node.
    clones: u32,
    /// `member == stamp`: the node is a member of the current fusion.
    member: u32,
    /// `input == stamp`: the node is an input of the current fusion.
    input: u32,
    /// `read == stamp`: some member of the current fusion reads the node, and
    /// `read_flags` says how ([`READ_REUSED`], [`READ_IN_PLACE`]).
    read: u32,
    read_flags: u8,
    /// Properties (PRODUCER_OK, EXPENSIVE, ALWAYS_DUP, CHEAP_DUP).
    flags: u8,
    /// Is the node's value re-read on its way to the root of the fusion being grown?
    reused: bool,
    /// Can every user of the node take part in a fusion?
    users_fusible: bool,
    /// Is the node still a kernel of its own?
    standalone: bool,
}

/// Fusion state. Only one fusion grows at a time (the *current* one); its members and
/// inputs are marked with the current stamp so membership tests are O(1). `ext`
/// counts the kernels (standalone instructions or fusions) that read a node's standalone
/// value: it stays standalone while that is positive.
struct Fuser<'f, 'a, 'c> {
    fc: &'f FComp<'a>,
    cfg: &'c ResolvedConfig,
    /// Every node's state, by node.
    st: Vec<NodeState>,
    groups: Vec<Group>,
    notes: Vec<String>,
    /// Recycled group buffers.
    pool: Vec<Group>,
    stamp: u32,
    /// Producers to try, as `pos << 32 | node` (one integer: the heap moves it as one).
    heap: BinaryHeap<u64>,
}

/// Work buffers of the fusion pass, kept between compilations (see `PreparedModule`).
#[derive(Default)]
pub(crate) struct FusionScratch {
    st: Vec<NodeState>,
    groups: Vec<Group>,
    pool: Vec<Group>,
    /// Producers to try, as `pos << 32 | node` (one integer: the heap moves it as one).
    heap: BinaryHeap<u64>,
    /// Nodes whose state was read anew ([`FusionBase`]).
    mark: Vec<bool>,
}

const PRODUCER_OK: u8 = 1;
const EXPENSIVE: u8 = 2;
const ALWAYS_DUP: u8 = 4;
const CHEAP_DUP: u8 = 8;

/// A member of the current fusion reads the value more than once per output element.
const READ_REUSED: u8 = 1;
/// A member of the current fusion updates the value in place.
const READ_IN_PLACE: u8 = 2;

/// Is operand `slot` of `m` its in-place buffer (not to be fused into it)?
fn in_place_slot(m: &FNode<'_>, slot: usize) -> bool {
    match m.opcode {
        Opcode::DynamicUpdateSlice => slot == 0,
        Opcode::Scatter => slot < m.operands.len().saturating_sub(1) / 2,
        _ => false,
    }
}

/// The operands without repeats, in order.
fn distinct(ops: &[u32]) -> impl Iterator<Item = u32> + '_ {
    ops.iter()
        .enumerate()
        .filter(move |&(i, o)| !ops[..i].contains(o))
        .map(|(_, &o)| o)
}

impl<'f, 'a, 'c> Fuser<'f, 'a, 'c> {
    fn node(&self, x: u32) -> &FNode<'a> {
        &self.fc.nodes[x as usize]
    }

    fn is_member(&self, x: u32) -> bool {
        self.st[x as usize].member == self.stamp
    }

    fn is_input(&self, x: u32) -> bool {
        self.st[x as usize].input == self.stamp
    }

    /// Make `g` the current fusion.
    fn activate(&mut self, g: u32) {
        self.stamp += 1;
        let s = self.stamp;
        let gr = &self.groups[g as usize];
        for &m in &gr.members {
            self.st[m as usize].member = s;
        }
        for &i in &gr.inputs {
            if self.st[i as usize].member != s {
                self.st[i as usize].input = s;
            }
        }
        for k in 0..self.groups[g as usize].members.len() {
            self.note_reads(self.groups[g as usize].members[k]);
        }
    }

    /// Records how member `m` of the current fusion reads its operands (`read`).
    fn note_reads(&mut self, m: u32) {
        let fc = self.fc;
        let mn = &fc.nodes[m as usize];
        let reused = self.st[m as usize].reused;
        let s = self.stamp;
        for (slot, &o) in mn.operands.iter().enumerate() {
            let mut f = 0;
            if reused || reuses(mn, slot) {
                f |= READ_REUSED;
            }
            if in_place_slot(mn, slot) {
                f |= READ_IN_PLACE;
            }
            let o = o as usize;
            if self.st[o].read == s {
                self.st[o].read_flags |= f;
            } else {
                self.st[o].read = s;
                self.st[o].read_flags = f;
            }
        }
    }

    fn new_group(&mut self, root: u32) -> u32 {
        let n = &self.fc.nodes[root as usize];
        let g = self.groups.len() as u32;
        let gr = self.pool.pop().unwrap_or(Group {
            root,
            members: Vec::new(),
            inputs: Vec::new(),
            n_inputs: 0,
            mxu: 0,
            reductions: 0,
        });
        // Filled in place once listed: a group filled on the stack and then moved
        // into the list was read back in wider words than its fields had just been
        // written, before the writes had landed, and the move waited on them.
        self.groups.push(gr);
        let gr = &mut self.groups[g as usize];
        gr.root = root;
        gr.members.clear();
        gr.members.push(root);
        gr.inputs.clear();
        for &o in &n.operands {
            if !gr.inputs.contains(&o) {
                gr.inputs.push(o);
            }
        }
        gr.n_inputs = gr.inputs.len();
        gr.mxu = n.opcode.is_mxu() as u32;
        gr.reductions = n.opcode.is_reduction() as u32;
        self.st[root as usize].reused = false;
        self.st[root as usize].own_group = g;
        self.activate(g);
        g
    }

    fn edge_flag(&self, set: &std::collections::HashSet<(usize, usize)>, p: u32, c: u32) -> bool {
        if set.is_empty() {
            return false;
        }
        match (self.node(p).origin.get(), self.node(c).origin.get()) {
            (Some(po), Some(co)) => set.contains(&(po, co)),
            _ => false,
        }
    }

    /// Would absorbing producer `p` take the current fusion `g` past
    /// [`MAX_OPERANDS_AND_OUTPUTS`] (its inputs and one output)? Counted only when the
    /// bound `inputs + p's operands` could reach the limit.
    #[inline]
    fn too_many_after(&self, g: u32, p: u32) -> bool {
        let bound = self.groups[g as usize].n_inputs + self.fc.nodes[p as usize].operands.len();
        bound + 1 > MAX_OPERANDS_AND_OUTPUTS
            && self.inputs_after(g, p) + 1 > MAX_OPERANDS_AND_OUTPUTS
    }

    /// Inputs of the current fusion `g` after absorbing producer `p`.
    #[inline(never)]
    fn inputs_after(&self, g: u32, p: u32) -> usize {
        let mut n = self.groups[g as usize].n_inputs - self.is_input(p) as usize;
        let ops = &self.fc.nodes[p as usize].operands;
        for (i, &o) in ops.iter().enumerate() {
            if !self.is_member(o) && !self.is_input(o) && !ops[..i].contains(&o) {
                n += 1;
            }
        }
        n
    }

    /// Absorb producer `p` into the current fusion `g`.
    fn add_member(&mut self, g: u32, p: u32, reused: bool) {
        let gi = g as usize;
        if self.is_input(p) {
            // Left in `inputs` (skipped as a member); only the count changes.
            self.groups[gi].n_inputs -= 1;
            self.st[p as usize].input = 0;
            self.st[p as usize].ext -= 1;
        }
        self.st[p as usize].member = self.stamp;
        self.groups[gi].members.push(p);
        self.st[p as usize].reused = reused;
        self.note_reads(p);
        self.st[p as usize].clones += 1;
        let op = self.node(p).opcode;
        self.groups[gi].mxu += op.is_mxu() as u32;
        self.groups[gi].reductions += op.is_reduction() as u32;
        let fc = self.fc;
        let ops: &[u32] = &fc.nodes[p as usize].operands;
        for &o in ops {
            // (a repeated operand is an input after its first occurrence)
            if !self.is_member(o) && !self.is_input(o) {
                self.groups[gi].inputs.push(o);
                self.groups[gi].n_inputs += 1;
                self.st[o as usize].input = self.stamp;
                self.st[o as usize].ext += 1;
            }
        }
        if self.st[p as usize].ext == 0 {
            // Nobody reads the standalone producer any more.
            self.st[p as usize].standalone = false;
            for (i, &o) in ops.iter().enumerate() {
                if !ops[..i].contains(&o) {
                    self.st[o as usize].ext -= 1;
                }
            }
        }
    }

    /// Phase 1: grow an output fusion from each dot/convolution through its single-use
    /// elementwise consumers.
    fn output_fusions(&mut self) {
        let fc = self.fc;
        for &h in &fc.order {
            if !self.node(h).opcode.is_mxu()
                || !self.st[h as usize].standalone
                || self.st[h as usize].own_group != NONE
            {
                continue;
            }
            let g = self.new_group(h);
            let mut cur = h;
            loop {
                let users = &self.node(cur).users;
                if users.len() != 1 || cur == self.fc.root || self.st[cur as usize].ext != 1 {
                    break;
                }
                let u = users[0];
                let un = self.node(u);
                let epilogue = (un.opcode.is_elementwise() && un.opcode != Opcode::Copy)
                    || un.opcode == Opcode::Bitcast;
                if !epilogue
                    || !self.st[u as usize].standalone
                    || self.st[u as usize].own_group != NONE
                    || self.st[u as usize].clones != 0
                    || !un.info.array
                    || self.edge_flag(&self.cfg.no_fuse, cur, u)
                {
                    break;
                }
                let mut n_inputs = self.groups[g as usize].n_inputs;
                for o in distinct(&un.operands) {
                    if o != cur && !self.is_member(o) && !self.is_input(o) {
                        n_inputs += 1;
                    }
                }
                if n_inputs + 1 > MAX_OPERANDS_AND_OUTPUTS {
                    break;
                }
                // Merge the consumer's kernel into the fusion: it becomes the root.
                let gi = g as usize;
                let fc = self.fc;
                for o in distinct(&fc.nodes[u as usize].operands) {
                    if o == cur || self.is_member(o) || self.is_input(o) {
                        self.st[o as usize].ext -= 1;
                    } else {
                        self.groups[gi].inputs.push(o);
                        self.groups[gi].n_inputs += 1;
                        self.st[o as usize].input = self.stamp;
                    }
                }
                self.st[u as usize].member = self.stamp;
                self.groups[gi].members.push(u);
                self.st[u as usize].reused = false;
                self.st[cur as usize].own_group = NONE;
                self.st[u as usize].own_group = g;
                self.st[cur as usize].standalone = false;
                self.groups[gi].root = u;
                cur = u;
            }
        }
    }

    /// Decide whether `p` may join group `g`.
    fn decide(&self, g: u32, p: u32) -> Verdict {
        if !self.cfg.force_fuse.is_empty() {
            let readers = self.readers(g, p);
            let mut forced = false;
            for &(m, _) in &readers {
                if self.edge_flag(&self.cfg.no_fuse, p, m) {
                    return Verdict::No;
                }
                forced |= self.edge_flag(&self.cfg.force_fuse, p, m);
            }
            if forced {
                return self.decide_forced(g, p);
            }
        }
        self.decide_unforced(g, p)
    }

    /// The members of the current fusion `g` that read `p`, with the operand slot.
    fn readers(&self, g: u32, p: u32) -> SmallVec<[(u32, usize); 2]> {
        let pn = self.node(p);
        let gr = &self.groups[g as usize];
        let mut readers: SmallVec<[(u32, usize); 2]> = SmallVec::new();
        let mut scan = |u: u32| {
            for (slot, &o) in self.node(u).operands.iter().enumerate() {
                if o == p {
                    readers.push((u, slot));
                }
            }
        };
        if pn.users.len() <= gr.members.len() {
            for &u in &pn.users {
                if self.is_member(u) {
                    scan(u);
                }
            }
        } else {
            for &u in &gr.members {
                scan(u);
            }
        }
        readers
    }

    /// How the members of the current fusion read `p` ([`Fuser::note_reads`]): `None`
    /// when none does, else [`READ_REUSED`] and [`READ_IN_PLACE`] bits.
    fn reads_of(&self, p: u32) -> Option<u8> {
        (self.st[p as usize].read == self.stamp).then(|| self.st[p as usize].read_flags)
    }

    /// A forced (override) edge from `p` into the current fusion `g`: only the hard
    /// rules apply, and a broken one is reported.
    fn decide_forced(&self, g: u32, p: u32) -> Verdict {
        let reads = self.reads_of(p).unwrap_or(0);
        let pn = self.node(p);
        let gr = &self.groups[g as usize];
        if p == self.fc.root || self.st[p as usize].flags & PRODUCER_OK == 0 {
            return Verdict::Refused("the producer cannot be fused");
        }
        if self.st[p as usize].own_group != NONE {
            return Verdict::Refused("the producer is already a fusion");
        }
        if pn.opcode.is_mxu() && gr.mxu > 0 {
            return Verdict::Refused("a fusion holds one dot/convolution");
        }
        if reads & READ_IN_PLACE != 0 {
            return Verdict::Refused("it is the in-place buffer of its consumer");
        }
        if self.too_many_after(g, p) {
            return Verdict::Refused("the fusion would exceed 96 operands and outputs");
        }
        Verdict::Fuse {
            reused: reads & READ_REUSED != 0,
        }
    }

    /// [`Fuser::decide`] when no edge into `p` is forced: XLA's rules and heuristics,
    /// where every failed rule answers No. The order of the rules is then free: those
    /// that do not need the members reading `p` go first, and the operand count, the
    /// dearest, last. How the members read `p` (at all, more than once per element, in
    /// place) was recorded as they joined ([`Fuser::note_reads`]); only `no_fuse` edges,
    /// which name the reader, make it look for the readers themselves.
    fn decide_unforced(&self, g: u32, p: u32) -> Verdict {
        let pn = self.node(p);
        let flags = self.st[p as usize].flags;
        if self.cfg.policy == FusionPolicy::None
            || p == self.fc.root
            || flags & PRODUCER_OK == 0
            || self.st[p as usize].own_group != NONE
            // dot/convolution heroes grow in phase 1 only
            || pn.opcode.is_mxu()
        {
            return Verdict::No;
        }
        let gr = &self.groups[g as usize];
        let dup = self.st[p as usize].ext > self.is_input(p) as u32;
        let expensive = flags & EXPENSIVE != 0;
        let aggressive = self.cfg.policy == FusionPolicy::Aggressive;
        if pn.opcode == Opcode::Constant && (pn.info.elems > 1 || gr.members.len() < 2) {
            return Verdict::No;
        }
        if pn.opcode.is_reduction() {
            let limit = if aggressive { 8 } else { 1 };
            if gr.mxu > 0 || gr.reductions >= limit || dup {
                return Verdict::No;
            }
        }
        let always = flags & ALWAYS_DUP != 0;
        if gr.mxu > 0 && !(always || (!dup && !expensive)) {
            return Verdict::No;
        }
        if dup {
            let elementwise_ok = aggressive && pn.opcode.is_elementwise();
            if expensive && !elementwise_ok {
                return Verdict::No;
            }
            if !(always || flags & CHEAP_DUP != 0) {
                return Verdict::No;
            }
            if !self.st[p as usize].users_fusible {
                return Verdict::No;
            }
            let exempt = matches!(
                pn.opcode,
                Opcode::Broadcast | Opcode::Constant | Opcode::Iota
            );
            if !exempt && self.st[p as usize].clones as usize >= MAX_DUPLICATION {
                return Verdict::No;
            }
        }
        // How the members read p, kept as they joined.
        let Some(reads) = self.reads_of(p) else {
            return Verdict::No;
        };
        if reads & READ_IN_PLACE != 0 {
            return Verdict::No;
        }
        if !self.cfg.no_fuse.is_empty()
            && self
                .readers(g, p)
                .iter()
                .any(|&(m, _)| self.edge_flag(&self.cfg.no_fuse, p, m))
        {
            return Verdict::No;
        }
        let reused = reads & READ_REUSED != 0;
        if expensive && reused {
            return Verdict::No;
        }
        if self.too_many_after(g, p) {
            return Verdict::No;
        }
        Verdict::Fuse { reused }
    }

    /// Phase 2: grow fusions from consumers, root first.
    fn producer_consumer(&mut self) {
        let fc = self.fc;
        let mut heap = std::mem::take(&mut self.heap);
        let mut stamp = 0u32;
        for &x in fc.order.iter().rev() {
            if !self.st[x as usize].standalone || !consumer_ok(self.fc, x) {
                continue;
            }
            let fresh = self.st[x as usize].own_group == NONE;
            if fresh && self.node(x).opcode == Opcode::Bitcast {
                continue;
            }
            let g = if fresh {
                self.new_group(x)
            } else {
                let g = self.st[x as usize].own_group;
                self.activate(g);
                g
            };
            stamp += 1;
            heap.clear();
            for &o in &self.groups[g as usize].inputs {
                if !self.is_member(o) {
                    heap.push((self.st[o as usize].pos as u64) << 32 | o as u64);
                }
            }
            while let Some(key) = heap.pop() {
                let p = key as u32;
                if self.st[p as usize].tried == stamp
                    || !self.st[p as usize].standalone
                    || self.is_member(p)
                {
                    continue;
                }
                self.st[p as usize].tried = stamp;
                match self.decide(g, p) {
                    Verdict::Fuse { reused } => {
                        self.add_member(g, p, reused);
                        for &o in &self.fc.nodes[p as usize].operands {
                            heap.push((self.st[o as usize].pos as u64) << 32 | o as u64);
                        }
                    }
                    Verdict::Refused(why) => {
                        let root = self.groups[g as usize].root;
                        self.notes.push(format!(
                            "fusion override {} -> {}: not applied, {why}",
                            self.node(p).name(),
                            self.node(root).name()
                        ));
                    }
                    Verdict::No => {}
                }
            }
            // Scalar constants join fusions that exist (XLA fuses them last).
            if self.groups[g as usize].members.len() > 1 && self.cfg.policy != FusionPolicy::None {
                let consts: SmallVec<[u32; 4]> = self.groups[g as usize]
                    .inputs
                    .iter()
                    .copied()
                    .filter(|&o| {
                        let on = self.node(o);
                        on.opcode == Opcode::Constant
                            && on.info.elems <= 1
                            && self.st[o as usize].standalone
                            && !self.is_member(o)
                    })
                    .collect();
                for c in consts {
                    if let Verdict::Fuse { reused } = self.decide(g, c) {
                        self.add_member(g, c, reused);
                    }
                }
            }
            let gr = &self.groups[g as usize];
            if fresh && gr.members.len() == 1 && gr.mxu == 0 {
                // Nothing fused: forget the trivial group, recycle its buffers.
                if let Some(gr) = self.groups.pop() {
                    self.pool.push(gr);
                }
                self.st[x as usize].own_group = NONE;
            }
        }
        self.heap = heap;
    }
}

/// A node's state before fusion: its flags and whether its users can fuse, read from
/// the node, its operands and its users ([`Start`]); the rest as nothing has happened
/// yet.
fn initial_state(fc: &FComp<'_>, x: u32) -> NodeState {
    Start::of(fc, x).state()
}

/// What a node's state before fusion reads from the computation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Start {
    /// PRODUCER_OK, EXPENSIVE, ALWAYS_DUP, CHEAP_DUP.
    flags: u8,
    users_fusible: bool,
}

impl Start {
    fn of(fc: &FComp<'_>, x: u32) -> Self {
        let mut fl = 0;
        if producer_ok(fc, x) {
            fl |= PRODUCER_OK;
        }
        if is_expensive(&fc.nodes[x as usize]) {
            fl |= EXPENSIVE;
        }
        if always_duplicable(fc, x) {
            fl |= ALWAYS_DUP;
        }
        if cheap_to_duplicate(fc, x) {
            fl |= CHEAP_DUP;
        }
        Start {
            flags: fl,
            users_fusible: fc.nodes[x as usize]
                .users
                .iter()
                .all(|&u| consumer_ok(fc, u)),
        }
    }

    fn state(self) -> NodeState {
        NodeState {
            pos: 0,
            own_group: NONE,
            tried: 0,
            ext: 0,
            clones: 0,
            member: 0,
            input: 0,
            read: 0,
            read_flags: 0,
            flags: self.flags,
            reused: false,
            users_fusible: self.users_fusible,
            standalone: false,
        }
    }
}

impl NodeState {
    /// The [`Start`] the state began from (unchanged before fusion).
    fn start(&self) -> Start {
        Start {
            flags: self.flags,
            users_fusible: self.users_fusible,
        }
    }
}

/// The fusion pass's view of a computation as prepared, before any configuration laid
/// it out: every node's [`initial_state`]. A compilation copies it and reads anew only
/// the nodes whose state a configuration can change: those layout assignment added or
/// relinked ([`FComp::touched`]), those it turned into bitcasts (and their operands and
/// users, whose states read the opcode), and the copies, whose state reads their
/// layouts. Reading every node was 3 % of the instructions of a random configuration
/// of ResNet-50 training.
#[derive(Debug, Clone, Default)]
pub(crate) struct FusionBase {
    starts: Vec<Start>,
    opcodes: Vec<Opcode>,
    /// The copies among the nodes.
    copies: Vec<u32>,
}

impl FusionBase {
    /// The base of `fc` as prepared.
    pub(crate) fn new(fc: &FComp<'_>) -> Self {
        let n = fc.nodes.len() as u32;
        FusionBase {
            starts: (0..n).map(|x| Start::of(fc, x)).collect(),
            opcodes: fc.nodes.iter().map(|n| n.opcode).collect(),
            copies: (0..n)
                .filter(|&x| fc.nodes[x as usize].opcode == Opcode::Copy)
                .collect(),
        }
    }

    /// Whether `fc` is this base's computation changed only as [`FusionBase`] says:
    /// nodes added after the prepared ones, the changed ones recorded (not every user
    /// list built again).
    fn applies_to(&self, fc: &FComp<'_>) -> bool {
        !fc.rebuilt && fc.nodes.len() >= self.starts.len()
    }

    /// Every node's [`initial_state`] of `fc` into `st` (empty), from the base where the
    /// node is as prepared; `mark` is a work buffer.
    fn states_into(&self, fc: &FComp<'_>, st: &mut Vec<NodeState>, mark: &mut Vec<bool>) {
        let n = fc.nodes.len();
        let old = self.starts.len();
        st.extend(self.starts.iter().map(|s| s.state()));
        st.extend((old as u32..n as u32).map(|x| initial_state(fc, x)));
        mark.clear();
        mark.resize(old, false);
        let mut again = |x: u32, st: &mut Vec<NodeState>| {
            if let Some(m) = mark.get_mut(x as usize).filter(|m| !**m) {
                *m = true;
                st[x as usize] = initial_state(fc, x);
            }
        };
        for &x in fc.touched.iter().chain(&self.copies) {
            again(x, st);
        }
        for x in 0..old {
            if fc.nodes[x].opcode != self.opcodes[x] {
                let nd = &fc.nodes[x];
                again(x as u32, st);
                for &y in nd.operands.iter().chain(&nd.users) {
                    again(y, st);
                }
            }
        }
    }
}

/// Every node's [`initial_state`] of `fc` into `st` (empty): from `base` where it
/// applies, else read from every node; `mark` is a work buffer.
fn initial_states(
    fc: &FComp<'_>,
    base: Option<&FusionBase>,
    st: &mut Vec<NodeState>,
    mark: &mut Vec<bool>,
) {
    match base {
        Some(b) if b.applies_to(fc) => b.states_into(fc, st, mark),
        _ => st.extend((0..fc.nodes.len() as u32).map(|x| initial_state(fc, x))),
    }
}

/// Every node's flags and whether its users can fuse, as [`plan`] starts from them
/// (from `base` where it applies), and the number of nodes whose start differs from
/// the base's.
#[cfg(test)]
pub(crate) fn starts(fc: &FComp<'_>, base: Option<&FusionBase>) -> (Vec<(u8, bool)>, usize) {
    let mut st = Vec::new();
    initial_states(fc, base, &mut st, &mut Vec::new());
    let changed = base.map_or(0, |b| {
        b.starts
            .iter()
            .zip(&st)
            .filter(|(a, b)| **a != b.start())
            .count()
    });
    (
        st.iter().map(|e| (e.flags, e.users_fusible)).collect(),
        changed,
    )
}

/// Plan the fusions of one laid-out computation into `out` (its buffers are reused).
pub(crate) fn plan(
    fc: &FComp<'_>,
    base: Option<&FusionBase>,
    cfg: &ResolvedConfig,
    s: &mut FusionScratch,
    out: &mut FusionPlan,
) {
    let n = fc.nodes.len();
    // Recycle the groups of the previous plan, giving the member lists handed out in
    // `out` back to groups that lost theirs.
    let mut pool = std::mem::take(&mut s.pool);
    pool.append(&mut s.groups);
    let mut k = pool.len();
    for gp in out.groups.drain(..) {
        while k > 0 && pool[k - 1].members.capacity() > 0 {
            k -= 1;
        }
        if k > 0 {
            k -= 1;
            pool[k].members = gp.members;
        } else {
            pool.push(Group {
                root: 0,
                members: gp.members,
                inputs: Vec::new(),
                n_inputs: 0,
                mxu: 0,
                reductions: 0,
            });
        }
    }
    // Every node's state: the prepared computation's where `base` has it and the
    // node is as prepared, else read from the node.
    let mut st = std::mem::take(&mut s.st);
    st.clear();
    initial_states(fc, base, &mut st, &mut s.mark);
    debug_assert!(
        st.iter()
            .enumerate()
            .all(|(x, e)| e.start() == Start::of(fc, x as u32)),
        "a node's prepared fusion state differs from its state"
    );
    for (k, &x) in fc.order.iter().enumerate() {
        let e = &mut st[x as usize];
        e.pos = k as u32;
        e.standalone = true;
    }
    let mut f = Fuser {
        fc,
        cfg,
        st,
        groups: std::mem::take(&mut s.groups),
        notes: Vec::new(),
        pool,
        stamp: 0,
        heap: std::mem::take(&mut s.heap),
    };
    for &x in &fc.order {
        let ops: &[u32] = &fc.nodes[x as usize].operands;
        for (i, &o) in ops.iter().enumerate() {
            if !ops[..i].contains(&o) {
                f.st[o as usize].ext += 1;
            }
        }
    }
    f.st[fc.root as usize].ext += 1;
    if cfg.policy != FusionPolicy::None {
        f.output_fusions();
    }
    if cfg.policy != FusionPolicy::None || !cfg.force_fuse.is_empty() {
        f.producer_consumer();
    }
    // Keep the fusions whose root survived and that are worth a fusion instruction.
    out.notes = std::mem::take(&mut f.notes);
    refill(&mut out.group_at, n, NONE);
    for g in 0..f.groups.len() {
        let gr = &mut f.groups[g];
        if !f.st[gr.root as usize].standalone || f.st[gr.root as usize].own_group != g as u32 {
            continue;
        }
        let wrap_alone = gr.mxu > 0 && cfg.policy != FusionPolicy::None;
        if gr.members.len() < 2 && !wrap_alone {
            continue;
        }
        let mut members = std::mem::take(&mut gr.members);
        // Members join latest first (the root, then the producers by falling position),
        // so most lists need only be reversed; positions are distinct, the order unique.
        if members
            .windows(2)
            .all(|w| f.st[w[0] as usize].pos > f.st[w[1] as usize].pos)
        {
            members.reverse();
        } else {
            members.sort_unstable_by_key(|&m| f.st[m as usize].pos);
        }
        let root = gr.root;
        let (kind, hero) = classify(fc, &members, root);
        out.group_at[root as usize] = out.groups.len() as u32;
        out.groups.push(GroupPlan {
            root,
            members,
            kind,
            hero,
        });
    }
    out.standalone.clear();
    out.standalone.extend(f.st.iter().map(|e| e.standalone));
    s.st = f.st;
    s.groups = f.groups;
    s.pool = f.pool;
    s.heap = f.heap;
}

fn refill<T: Clone>(v: &mut Vec<T>, n: usize, x: T) {
    v.clear();
    v.resize(n, x);
}

/// Fusion kind and hero of a member list (program order).
pub(crate) fn classify(fc: &FComp<'_>, members: &[u32], root: u32) -> (FusionKind, u32) {
    if let Some(&h) = members
        .iter()
        .find(|&&m| fc.nodes[m as usize].opcode.is_mxu())
    {
        return (FusionKind::Output, h);
    }
    if fc.nodes[root as usize].opcode == Opcode::DynamicUpdateSlice {
        return (FusionKind::Output, root);
    }
    let input_hero = members.iter().rev().find(|&&m| {
        let op = fc.nodes[m as usize].opcode;
        op.is_reduction() || op == Opcode::Scatter || is_physical_relayout(fc, m)
    });
    match input_hero {
        Some(&h) => (FusionKind::Input, h),
        None => (FusionKind::Loop, root),
    }
}
