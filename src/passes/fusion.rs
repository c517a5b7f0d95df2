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

fn is_mxu(op: Opcode) -> bool {
    matches!(op, Opcode::Dot | Opcode::Convolution)
}

fn is_reduction_hero(op: Opcode) -> bool {
    matches!(op, Opcode::Reduce | Opcode::ReduceWindow)
}

/// XLA's `IsExpensive` with the GPU overrides that also fit a TPU (divide, sqrt, rsqrt,
/// exp are cheap on floats).
fn is_expensive(n: &FNode<'_>) -> bool {
    use Opcode::*;
    let float = n.shape.element_type().is_floating();
    let complex = n.shape.element_type().is_complex();
    match n.opcode {
        Add | And | Bitcast | BitcastConvert | Broadcast | Ceil | Clamp | Clz | Compare
        | Complex | Concatenate | Constant | Convert | Copy | DynamicSlice
        | DynamicUpdateSlice | Floor | GetTupleElement | Imag | Iota | IsFinite | Maximum
        | Minimum | Multiply | Negate | Not | Or | Xor | Pad | PopulationCount | Real
        | ReducePrecision | Reshape | Reverse | RoundNearestAfz | RoundNearestEven | Select
        | ShiftLeft | ShiftRightArithmetic | ShiftRightLogical | Slice | Subtract | Transpose
        | Tuple | PartitionId | ReplicaId | OptimizationBarrier => false,
        Abs | Cos | Sign | Sin | Tan => complex,
        Divide | Remainder => !(n.shape.element_type().is_integral() || float && n.opcode == Divide),
        Sqrt | Rsqrt | Exp => !float,
        _ => true,
    }
}

/// Ops that never take part in a fusion.
fn is_opaque(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        Parameter
            | Tuple
            | GetTupleElement
            | While
            | Conditional
            | Call
            | CustomCall
            | Sort
            | Fft
            | Rng
            | RngBitGenerator
            | RngGetAndUpdateState
            | AllGather
            | AllGatherStart
            | AllGatherDone
            | AllReduce
            | AllReduceStart
            | AllReduceDone
            | AllToAll
            | CollectiveBroadcast
            | CollectivePermute
            | CollectivePermuteStart
            | CollectivePermuteDone
            | ReduceScatter
            | RaggedAllToAll
            | Infeed
            | Outfeed
            | Send
            | SendDone
            | Recv
            | RecvDone
            | AfterAll
            | Domain
            | TriangularSolve
            | Cholesky
            | BatchNormGrad
            | BatchNormInference
            | BatchNormTraining
            | AsyncStart
            | AsyncUpdate
            | AsyncDone
            | CopyStart
            | CopyDone
            | OptimizationBarrier
            | AddDependency
            | PartitionId
            | ReplicaId
            | GetDimensionSize
            | SetDimensionSize
            | DynamicReshape
            | TopK
            | Scan
            | RaggedDot
            | ScaledDot
            | Fusion
            | Map
            | SelectAndScatter
    )
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
        Opcode::Constant => n.shape.element_count() <= 1,
        Opcode::Convert => {
            let o = n.operands.first().map(|&o| fc.nodes[o as usize].shape.element_type().bit_width());
            o.map(|b| n.shape.element_type().bit_width() > b).unwrap_or(false)
        }
        _ => false,
    }
}

/// XLA's "effectively at most unary" / no-growth test for free duplication.
fn cheap_to_duplicate(fc: &FComp<'_>, x: u32) -> bool {
    let n = &fc.nodes[x as usize];
    let out_rank = n.rank();
    let out_elems = n.shape.element_count();
    let mut big = 0;
    let mut total: u64 = 0;
    for &o in &n.operands {
        let on = &fc.nodes[o as usize];
        total = total.saturating_add(on.shape.element_count());
        let trivial = matches!(on.opcode, Opcode::Broadcast | Opcode::Iota)
            || (on.opcode == Opcode::Constant && on.shape.element_count() <= 1);
        if !trivial && on.rank() >= out_rank {
            big += 1;
        }
    }
    big <= 1 || total <= out_elems
}

/// Can `x` be fused into a consumer at all?
fn producer_ok(fc: &FComp<'_>, x: u32) -> bool {
    let n = &fc.nodes[x as usize];
    if is_opaque(n.opcode) || n.shape.as_array().is_none() {
        return false;
    }
    if is_physical_relayout(fc, x) {
        return false;
    }
    !matches!(n.opcode, Opcode::Scatter | Opcode::DynamicUpdateSlice)
}

/// Can `x` be the root a fusion grows from?
fn consumer_ok(fc: &FComp<'_>, x: u32) -> bool {
    let n = &fc.nodes[x as usize];
    !is_opaque(n.opcode) && n.opcode != Opcode::Constant && n.shape.as_array().is_some()
}

enum Verdict {
    Fuse { reused: bool, dup: bool },
    No,
    /// A forced (override) fusion broke a hard rule.
    Refused(&'static str),
}

struct Group {
    root: u32,
    members: Vec<u32>,
    /// Parallel to `members`: is the member's value re-read on its way to the root?
    reused: Vec<bool>,
    inputs: Vec<u32>,
    mxu: u32,
    reductions: u32,
}

struct Fuser<'f, 'a, 'c> {
    fc: &'f FComp<'a>,
    cfg: &'c ResolvedConfig,
    pos: Vec<u32>,
    standalone: Vec<bool>,
    groups_of: Vec<SmallVec<[u32; 2]>>,
    own_group: Vec<u32>,
    groups: Vec<Group>,
    tried: Vec<u32>,
    notes: Vec<String>,
}

impl<'f, 'a, 'c> Fuser<'f, 'a, 'c> {
    fn node(&self, x: u32) -> &FNode<'a> {
        &self.fc.nodes[x as usize]
    }

    fn in_group(&self, x: u32, g: u32) -> bool {
        self.groups_of[x as usize].contains(&g)
    }

    fn alive(&self, g: u32) -> bool {
        self.standalone[self.groups[g as usize].root as usize]
    }

    fn new_group(&mut self, root: u32) -> u32 {
        let n = self.node(root);
        let g = self.groups.len() as u32;
        let mut inputs: Vec<u32> = Vec::new();
        for &o in &n.operands {
            if !inputs.contains(&o) {
                inputs.push(o);
            }
        }
        self.groups.push(Group {
            root,
            members: vec![root],
            reused: vec![false],
            inputs,
            mxu: is_mxu(n.opcode) as u32,
            reductions: is_reduction_hero(n.opcode) as u32,
        });
        self.groups_of[root as usize].push(g);
        self.own_group[root as usize] = g;
        g
    }

    fn edge_flag(&self, set: &std::collections::HashSet<(usize, usize)>, p: u32, c: u32) -> bool {
        if set.is_empty() {
            return false;
        }
        let (po, co) = (self.node(p).origin, self.node(c).origin);
        po != NONE && co != NONE && set.contains(&(po as usize, co as usize))
    }

    /// Inputs of `g` after absorbing `p`.
    fn inputs_after(&self, g: u32, p: u32) -> usize {
        let gr = &self.groups[g as usize];
        let mut n = gr.inputs.len() - gr.inputs.contains(&p) as usize;
        let mut seen: SmallVec<[u32; 4]> = SmallVec::new();
        for &o in &self.node(p).operands {
            if !self.in_group(o, g) && !gr.inputs.contains(&o) && !seen.contains(&o) {
                seen.push(o);
                n += 1;
            }
        }
        n
    }

    /// Would `p` still be needed outside after being fused into `g`?
    fn needed_outside(&self, p: u32, g: u32) -> bool {
        for &u in &self.node(p).users {
            if self.standalone[u as usize] && self.own_group[u as usize] == NONE {
                return true;
            }
            for &h in &self.groups_of[u as usize] {
                if h != g && self.alive(h) && !self.in_group(p, h) {
                    return true;
                }
            }
        }
        false
    }

    fn add_member(&mut self, g: u32, p: u32, reused: bool, dup: bool) {
        let ops = self.node(p).operands.clone();
        let gi = g as usize;
        self.groups[gi].inputs.retain(|&x| x != p);
        for o in ops {
            if !self.in_group(o, g) && !self.groups[gi].inputs.contains(&o) {
                self.groups[gi].inputs.push(o);
            }
        }
        self.groups[gi].members.push(p);
        self.groups[gi].reused.push(reused);
        let op = self.node(p).opcode;
        self.groups[gi].mxu += is_mxu(op) as u32;
        self.groups[gi].reductions += is_reduction_hero(op) as u32;
        self.groups_of[p as usize].push(g);
        if !dup {
            self.standalone[p as usize] = false;
        }
    }

    /// Phase 1: grow an output fusion from each dot/convolution through its single-use
    /// elementwise consumers.
    fn output_fusions(&mut self) {
        let order = self.fc.order.clone();
        for &h in &order {
            if !is_mxu(self.node(h).opcode) || !self.standalone[h as usize] || !self.groups_of[h as usize].is_empty() {
                continue;
            }
            let g = self.new_group(h);
            let mut cur = h;
            loop {
                let users = &self.node(cur).users;
                if users.len() != 1 || cur == self.fc.root {
                    break;
                }
                let u = users[0];
                let un = self.node(u);
                let epilogue = (un.opcode.is_elementwise() && un.opcode != Opcode::Copy)
                    || un.opcode == Opcode::Bitcast;
                if !epilogue
                    || !self.standalone[u as usize]
                    || !self.groups_of[u as usize].is_empty()
                    || un.shape.as_array().is_none()
                    || self.edge_flag(&self.cfg.no_fuse, cur, u)
                {
                    break;
                }
                if self.inputs_after_consumer(g, u) + 1 > MAX_OPERANDS_AND_OUTPUTS {
                    break;
                }
                // Absorb the consumer: it becomes the root.
                let gi = g as usize;
                let ops = self.node(u).operands.clone();
                for o in ops {
                    if !self.in_group(o, g) && !self.groups[gi].inputs.contains(&o) {
                        self.groups[gi].inputs.push(o);
                    }
                }
                self.groups[gi].inputs.retain(|&x| x != cur);
                self.groups[gi].members.push(u);
                self.groups[gi].reused.push(false);
                self.groups_of[u as usize].push(g);
                self.own_group[cur as usize] = NONE;
                self.own_group[u as usize] = g;
                self.standalone[cur as usize] = false;
                self.groups[gi].root = u;
                cur = u;
            }
        }
    }

    fn inputs_after_consumer(&self, g: u32, u: u32) -> usize {
        let gr = &self.groups[g as usize];
        let mut n = gr.inputs.len();
        let mut seen: SmallVec<[u32; 4]> = SmallVec::new();
        for &o in &self.node(u).operands {
            if !self.in_group(o, g) && !gr.inputs.contains(&o) && !seen.contains(&o) {
                seen.push(o);
                n += 1;
            }
        }
        n
    }

    /// Decide whether `p` may join group `g`.
    fn decide(&self, g: u32, p: u32) -> Verdict {
        let fc = self.fc;
        let pn = self.node(p);
        let gr = &self.groups[g as usize];
        // Members of g that read p, with the slot.
        let mut readers: SmallVec<[(u32, usize); 2]> = SmallVec::new();
        for (k, &m) in gr.members.iter().enumerate() {
            for (slot, &o) in self.node(m).operands.iter().enumerate() {
                if o == p {
                    readers.push((k as u32, slot));
                }
            }
        }
        if readers.is_empty() {
            return Verdict::No;
        }
        let mut forced = false;
        for &(k, _) in &readers {
            let m = gr.members[k as usize];
            if self.edge_flag(&self.cfg.no_fuse, p, m) {
                return Verdict::No;
            }
            forced |= self.edge_flag(&self.cfg.force_fuse, p, m);
        }
        let policy = self.cfg.policy;
        if policy == FusionPolicy::None && !forced {
            return Verdict::No;
        }
        let hard = |why: &'static str| if forced { Verdict::Refused(why) } else { Verdict::No };
        // Hard rules.
        if p == fc.root || !producer_ok(fc, p) {
            return hard("the producer cannot be fused");
        }
        if self.own_group[p as usize] != NONE {
            return hard("the producer is already a fusion");
        }
        if is_mxu(pn.opcode) && gr.mxu > 0 {
            return hard("a fusion holds one dot/convolution");
        }
        for &(k, slot) in &readers {
            let m = self.node(gr.members[k as usize]);
            let in_place = match m.opcode {
                Opcode::DynamicUpdateSlice => slot == 0,
                Opcode::Scatter => slot < m.operands.len().saturating_sub(1) / 2,
                _ => false,
            };
            if in_place {
                return hard("it is the in-place buffer of its consumer");
            }
        }
        if self.inputs_after(g, p) + 1 > MAX_OPERANDS_AND_OUTPUTS {
            return hard("the fusion would exceed 96 operands and outputs");
        }
        let reused = readers
            .iter()
            .any(|&(k, slot)| gr.reused[k as usize] || reuses(self.node(gr.members[k as usize]), slot));
        let dup = self.needed_outside(p, g);
        if forced {
            return Verdict::Fuse { reused, dup };
        }
        // Heuristics.
        let expensive = is_expensive(pn);
        let aggressive = policy == FusionPolicy::Aggressive;
        if is_mxu(pn.opcode) {
            return Verdict::No; // dot/convolution heroes grow in phase 1 only
        }
        if pn.opcode == Opcode::Constant && (pn.shape.element_count() > 1 || gr.members.len() < 2) {
            return Verdict::No;
        }
        if expensive && reused {
            return Verdict::No;
        }
        if is_reduction_hero(pn.opcode) {
            let limit = if aggressive { 8 } else { 1 };
            if gr.mxu > 0 || gr.reductions >= limit || dup {
                return Verdict::No;
            }
        }
        if gr.mxu > 0 && !(always_duplicable(fc, p) || (!dup && !expensive)) {
            return Verdict::No;
        }
        if dup {
            let elementwise_ok = aggressive && pn.opcode.is_elementwise();
            if expensive && !elementwise_ok {
                return Verdict::No;
            }
            if !(always_duplicable(fc, p) || cheap_to_duplicate(fc, p)) {
                return Verdict::No;
            }
            if pn.users.iter().any(|&u| !consumer_ok(fc, u)) {
                return Verdict::No;
            }
            let exempt = matches!(pn.opcode, Opcode::Broadcast | Opcode::Constant | Opcode::Iota);
            if !exempt && self.groups_of[p as usize].len() >= MAX_DUPLICATION {
                return Verdict::No;
            }
        }
        Verdict::Fuse { reused, dup }
    }

    /// Phase 2: grow fusions from consumers, root first.
    fn producer_consumer(&mut self) {
        let order = self.fc.order.clone();
        for &x in order.iter().rev() {
            if !self.standalone[x as usize] || !consumer_ok(self.fc, x) {
                continue;
            }
            let g = match self.own_group[x as usize] {
                NONE => {
                    if self.node(x).opcode == Opcode::Bitcast {
                        continue;
                    }
                    self.new_group(x)
                }
                g => g,
            };
            let stamp = g + 1;
            let mut heap: BinaryHeap<(u32, u32)> = self.groups[g as usize]
                .inputs
                .iter()
                .map(|&o| (self.pos[o as usize], o))
                .collect();
            while let Some((_, p)) = heap.pop() {
                if self.tried[p as usize] == stamp || !self.standalone[p as usize] || self.in_group(p, g) {
                    continue;
                }
                self.tried[p as usize] = stamp;
                match self.decide(g, p) {
                    Verdict::Fuse { reused, dup } => {
                        self.add_member(g, p, reused, dup);
                        for &o in &self.fc.nodes[p as usize].operands {
                            heap.push((self.pos[o as usize], o));
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
        }
    }
}

/// Plan the fusions of one laid-out computation.
pub(crate) fn plan(fc: &FComp<'_>, cfg: &ResolvedConfig) -> FusionPlan {
    let n = fc.nodes.len();
    let mut pos = vec![0u32; n];
    let mut standalone = vec![false; n];
    for (k, &x) in fc.order.iter().enumerate() {
        pos[x as usize] = k as u32;
        standalone[x as usize] = true;
    }
    let mut f = Fuser {
        fc,
        cfg,
        pos,
        standalone,
        groups_of: vec![SmallVec::new(); n],
        own_group: vec![NONE; n],
        groups: Vec::new(),
        tried: vec![0; n],
        notes: Vec::new(),
    };
    if cfg.policy != FusionPolicy::None {
        f.output_fusions();
    }
    if cfg.policy != FusionPolicy::None || !cfg.force_fuse.is_empty() {
        f.producer_consumer();
    }
    // Keep the fusions whose root survived and that are worth a fusion instruction.
    let mut out = FusionPlan {
        groups: Vec::new(),
        group_at: vec![NONE; n],
        standalone: Vec::new(),
        notes: std::mem::take(&mut f.notes),
    };
    for g in 0..f.groups.len() {
        let gr = &f.groups[g];
        if !f.standalone[gr.root as usize] || f.own_group[gr.root as usize] != g as u32 {
            continue;
        }
        let wrap_alone = gr.mxu > 0 && cfg.policy != FusionPolicy::None;
        if gr.members.len() < 2 && !wrap_alone {
            continue;
        }
        let mut members = gr.members.clone();
        members.sort_unstable_by_key(|&m| f.pos[m as usize]);
        let (kind, hero) = classify(fc, &members, gr.root);
        out.group_at[gr.root as usize] = out.groups.len() as u32;
        out.groups.push(GroupPlan {
            root: gr.root,
            members,
            kind,
            hero,
        });
    }
    out.standalone = f.standalone;
    out
}

/// Fusion kind and hero of a member list (program order).
pub(crate) fn classify(fc: &FComp<'_>, members: &[u32], root: u32) -> (FusionKind, u32) {
    if let Some(&h) = members.iter().find(|&&m| is_mxu(fc.nodes[m as usize].opcode)) {
        return (FusionKind::Output, h);
    }
    if fc.nodes[root as usize].opcode == Opcode::DynamicUpdateSlice {
        return (FusionKind::Output, root);
    }
    let input_hero = members.iter().rev().find(|&&m| {
        let op = fc.nodes[m as usize].opcode;
        is_reduction_hero(op) || op == Opcode::Scatter || is_physical_relayout(fc, m)
    });
    match input_hero {
        Some(&h) => (FusionKind::Input, h),
        None => (FusionKind::Loop, root),
    }
}
