//! Build the output module from the flattened, laid-out computations and the fusion
//! plans (each input instruction is cloned exactly once per place it appears), and list
//! its kernels. In *dry* mode nothing is built: names, ids and kernels come out exactly
//! as in a full run, which is all a cost model needs (see [`super::compile_kernels`]).

use indexmap::IndexMap;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use smallvec::SmallVec;
use std::sync::Arc;

use super::error::CompileError;
use super::flat::{has_side_effect, numbered, CompKind, FComp, FNode, Flat, Namer, ShapeRef, NONE};
use super::fusion::FusionPlan;
use super::kernel::{
    BodyAttrs, BodyInstr, BodyNode, BodySpan, CallSite, Kernel, KernelBodies, KernelKind,
    PhysicalShape, SiteRole,
};
use super::layout::leaf_shapes;
use super::tiling;
use crate::ir::{
    ArrayShape, CallRole, CompId, Computation, Dims, InstrId, Instruction, Module, Name, Opcode,
    Shape, SharedAttrs, SharedShape,
};

/// What the emitter builds besides the kernel list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EmitMode {
    /// The output module.
    Module,
    /// Nothing (names, ids and kernels as in a full run).
    Dry,
    /// The instructions of each kernel ([`KernelBodies`]), no module.
    Bodies,
    /// The kernel bodies, and the output module without the contents of the fusions
    /// the compiler makes (their computations are empty placeholders: not valid HLO, only
    /// for walking the program's structure).
    Skeleton,
}

/// Output of the emitter.
pub(crate) struct Emitted<'a> {
    /// In [`EmitMode::Module`] (and the skeleton of [`EmitMode::Skeleton`]).
    pub module: Option<Module>,
    pub kernels: Vec<Kernel>,
    /// In [`EmitMode::Bodies`] and [`EmitMode::Skeleton`], one per kernel (else empty).
    pub bodies: KernelBodies<'a>,
    /// Instructions of the (would-be) output module.
    pub instructions: usize,
}

/// The shape with the final layouts (TPU tiles attached).
fn laid_out(shape: &Shape, layouts: &[Dims]) -> Shape {
    fn walk(s: &Shape, layouts: &[Dims], k: &mut usize) -> Shape {
        match s {
            Shape::Array(a) => {
                let rm;
                let m2m: &[i64] = match layouts.get(*k) {
                    Some(l) if l.len() == a.rank() => l,
                    _ => {
                        rm = tiling::row_major(a.rank());
                        &rm
                    }
                };
                *k += 1;
                // Built field by field: the input's own layout is replaced, not cloned.
                Shape::Array(ArrayShape {
                    element_type: a.element_type,
                    dims: Dims::from_slice(&a.dims),
                    dynamic_mask: a.dynamic_mask,
                    layout: if a.element_type.is_array() {
                        Some(tiling::tpu_layout(a.element_type, &a.dims, m2m))
                    } else {
                        None
                    },
                })
            }
            Shape::Tuple(v) => Shape::Tuple(v.iter().map(|e| walk(e, layouts, k)).collect()),
            Shape::Buffer(b) => Shape::Buffer(Box::new(walk(b, layouts, k))),
        }
    }
    walk(shape, layouts, &mut 0)
}

/// Values computed from a node's input shape and layouts, kept between compilations
/// (in the pooled scratch of a `PreparedModule`): a node with the same input shape and
/// one of the last `W` layouts it had gets the very same value. Random configurations
/// change the layouts of ~40 % of the nodes, often back and forth between the
/// compiler's choice and another. Slots are small and indexed by node, so a lookup
/// touches one or two cache lines.
struct NodeSlots<T, const W: usize> {
    /// Per flat computation, per node: the `W` most recent values, the latest first.
    slots: Vec<Vec<[NodeSlot<T>; W]>>,
}

impl<T, const W: usize> Default for NodeSlots<T, W> {
    fn default() -> Self {
        NodeSlots { slots: Vec::new() }
    }
}

#[derive(Clone)]
struct NodeSlot<T> {
    /// Address of the input shape the node borrows (stable while the module is borrowed).
    src: usize,
    /// [`layout_key`] of the node's layouts.
    key: u64,
    value: Option<T>,
}

impl<T: Clone, const W: usize> NodeSlots<T, W> {
    /// The value of node `x` of flat computation `fi`, made by `make` unless one of the
    /// last `W` made still holds; None (nothing made) for nodes that are not cached:
    /// shapes the passes made themselves live only for one compilation (their address
    /// could be reused by another shape), and tuples have no [`layout_key`].
    fn get(&mut self, fi: usize, x: u32, n: &FNode<'_>, make: impl FnOnce() -> T) -> Option<&T> {
        let (src, key) = match (&n.shape, layout_key(&n.layouts)) {
            (ShapeRef::Borrowed(s), Some(key)) => (*s as *const Shape as usize, key),
            _ => return None,
        };
        if self.slots.len() <= fi {
            self.slots.resize_with(fi + 1, Vec::new);
        }
        let v = &mut self.slots[fi];
        if v.len() <= x as usize {
            let empty = NodeSlot {
                src: 0,
                key: 0,
                value: None,
            };
            v.resize(
                x as usize + 1 + v.len() / 4,
                std::array::from_fn(|_| empty.clone()),
            );
        }
        let ways = &mut v[x as usize];
        let hit = |s: &NodeSlot<T>| s.value.is_some() && s.src == src && s.key == key;
        match ways.iter().position(hit) {
            // move it to the front
            Some(i) => ways[..=i].rotate_right(1),
            // evict the oldest
            None => {
                ways.rotate_right(1);
                ways[0] = NodeSlot {
                    src,
                    key,
                    value: Some(make()),
                };
            }
        }
        ways[0].value.as_ref()
    }
}

/// Where the nodes of [`KernelBodies`] are listed: each node once per compilation.
#[derive(Default)]
struct BodyNodes {
    /// Per flat computation, node → index in the list (NONE = not listed yet).
    index: Vec<Vec<u32>>,
}

impl BodyNodes {
    fn reset(&mut self, flat: &Flat<'_>) {
        self.index.resize_with(flat.comps.len(), Vec::new);
        for (v, fc) in self.index.iter_mut().zip(&flat.comps) {
            refill(v, fc.nodes.len(), NONE);
        }
    }

    /// Index of node `x` of flat computation `fi` in `list`, listed now if not yet.
    fn index<'a>(
        &mut self,
        list: &mut Vec<BodyNode<'a>>,
        fi: usize,
        x: u32,
        n: &FNode<'a>,
        shapes: &mut ShapeCache,
    ) -> u32 {
        let i = &mut self.index[fi][x as usize];
        if *i == NONE {
            *i = list.len() as u32;
            let attrs = match n.src {
                // the input's own, unless the output changes them
                Some(s) if n.opcode == s.opcode || s.attrs.dimensions.is_none() => {
                    BodyAttrs::Input(&s.attrs)
                }
                Some(s) => BodyAttrs::Stripped(&s.attrs, node_attrs(n, Some(s.attrs.clone()))),
                None => BodyAttrs::Own(node_attrs(n, None)),
            };
            list.push(BodyNode {
                name: Name::from(n.name()),
                opcode: n.opcode,
                async_wrapped: n.src.and_then(|s| s.async_wrapped),
                shape: shapes.get(fi, x, n),
                attrs,
            });
        }
        *i
    }
}

/// Laid-out shapes of nodes: emitting a node laid out as last time copies a pointer.
#[derive(Default)]
struct ShapeCache(NodeSlots<SharedShape, 2>);

impl ShapeCache {
    fn get(&mut self, fi: usize, x: u32, n: &FNode<'_>) -> SharedShape {
        let make = || SharedShape::new(laid_out(&n.shape, &n.layouts));
        match self.0.get(fi, x, n, make) {
            Some(s) => s.clone(),
            None => make(),
        }
    }
}

/// The layouts of a node with one array leaf of rank < 16, packed exactly into an
/// integer (rank, then one 4-bit digit per dimension); None for anything else.
fn layout_key(layouts: &[Dims]) -> Option<u64> {
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

/// Physical shapes of the array leaves of a node.
fn phys(n: &FNode<'_>) -> Phys {
    if let Shape::Array(a) = &*n.shape {
        let mut out = SmallVec::new();
        if a.element_type.is_array() {
            out.push(Arc::new(match n.layouts.first() {
                Some(l) if l.len() == a.rank() => PhysicalShape::laid_out(a, l, true),
                _ => PhysicalShape::laid_out(a, &tiling::row_major(a.rank()), true),
            }));
        }
        return out;
    }
    leaf_shapes(&n.shape)
        .iter()
        .enumerate()
        .filter(|(_, a)| a.element_type.is_array())
        .map(|(i, a)| {
            Arc::new(match n.layouts.get(i) {
                Some(l) if l.len() == a.rank() => PhysicalShape::laid_out(a, l, true),
                _ => PhysicalShape::laid_out(a, &tiling::row_major(a.rank()), true),
            })
        })
        .collect()
}

type Phys = SmallVec<[Arc<PhysicalShape>; 1]>;

/// Physical shapes of nodes, shared by the kernels that read or write them. Kept
/// between compilations ([`NodeSlots`]) for nodes with one array leaf (checked
/// against the input shape and the layout); other nodes are computed once per
/// compilation.
#[derive(Default)]
struct PhysCache {
    slots: NodeSlots<Phys, 1>,
    /// This compilation's shapes of the other nodes: node → index in `store`.
    idx: Vec<u32>,
    store: Vec<Phys>,
}

impl PhysCache {
    fn reset(&mut self, n: usize) {
        refill(&mut self.idx, n, NONE);
        self.store.clear();
    }

    fn get(&mut self, fi: usize, fc: &FComp<'_>, x: u32) -> &[Arc<PhysicalShape>] {
        let n = &fc.nodes[x as usize];
        if let Some(p) = self.slots.get(fi, x, n, || phys(n)) {
            return p;
        }
        let i = self.idx[x as usize];
        let i = if i == NONE {
            self.store.push(phys(n));
            let i = (self.store.len() - 1) as u32;
            self.idx[x as usize] = i;
            i
        } else {
            i
        };
        &self.store[i as usize]
    }

    fn all(&mut self, fi: usize, fc: &FComp<'_>, xs: &[u32]) -> Vec<Arc<PhysicalShape>> {
        let mut v = Vec::with_capacity(xs.len());
        for &x in xs {
            v.extend_from_slice(self.get(fi, fc, x));
        }
        v
    }
}

/// The output attributes of node `n` from `src` (its input instruction's, with calls
/// remapped or not): a transpose/reshape turned bitcast loses its dimensions; a
/// synthetic get-tuple-element gets its index.
fn node_attrs(n: &FNode<'_>, src: Option<SharedAttrs>) -> SharedAttrs {
    match (src, n.src) {
        (Some(mut attrs), Some(s)) => {
            if n.opcode != s.opcode && attrs.dimensions.is_some() {
                attrs.dimensions = None;
            }
            attrs
        }
        _ => {
            let mut attrs = SharedAttrs::default();
            if n.opcode == Opcode::GetTupleElement {
                attrs.tuple_index = Some(n.tuple_index);
            }
            attrs
        }
    }
}

/// The name of copy `k` of an instruction named `base` (see `Emitter::clone_number`).
fn clone_name(base: &str, k: u64) -> Name {
    match k {
        0 => Name::from(base),
        k => numbered(base, None, k),
    }
}

/// `v = vec![x; n]`, keeping the allocation.
fn refill<T: Clone>(v: &mut Vec<T>, n: usize, x: T) {
    v.clear();
    v.resize(n, x);
}

/// Work buffers of the emitter, kept between compilations (see `PreparedModule`).
#[derive(Default)]
pub(crate) struct EmitScratch {
    pc: PhysCache,
    shapes: ShapeCache,
    body_nodes: BodyNodes,
    remapped: RemapCache,
    /// Kernels (and their bodies in [`EmitMode::Bodies`]) in emission order, taken out
    /// in execution order.
    all: Vec<Option<(Kernel, Option<BodySpan>)>>,
    /// Inputs of every fusion, concatenated; `input_end[g]` ends fusion g's.
    inputs: Vec<u32>,
    input_end: Vec<u32>,
    mark: Vec<u32>,
    seen: Vec<u32>,
    live: Vec<bool>,
    stack: Vec<u32>,
    new_ids: Vec<u32>,
    named: Vec<bool>,
    local: Vec<u32>,
    /// `parameter_number = i` attributes of fusion parameters, shared by all of them.
    param_attrs: Vec<SharedAttrs>,
    /// Instructions and nodes of the last compilation's kernel bodies: the next one's
    /// lists start that large (they leave with the bodies, so they cannot be reused).
    body_sizes: (usize, usize),
}

fn bad(m: &Module, msg: impl Into<String>) -> CompileError {
    CompileError::Verify {
        module: m.name.clone(),
        message: msg.into(),
    }
}

/// Point called computations at their output ids. Attributes that call nothing, or
/// whose callees keep their ids, stay shared with the input instruction.
fn remap_called(
    attrs: &mut SharedAttrs,
    new_id: &[Option<CompId>],
    m: &Module,
    who: &str,
) -> Result<(), CompileError> {
    if attrs
        .called
        .iter()
        .all(|&(_, c)| new_id.get(c).copied().flatten() == Some(c))
    {
        return Ok(());
    }
    for (_, c) in attrs.called.iter_mut() {
        *c = new_id.get(*c).copied().flatten().ok_or_else(|| {
            bad(
                m,
                format!("'{who}' calls a computation that was not emitted"),
            )
        })?;
    }
    Ok(())
}

/// Attributes of input instructions that call computations, with the calls pointed at
/// the output's computation ids; kept between compilations (the ids rarely change), so
/// that a `reduce` does not copy its attributes every time.
#[derive(Default)]
struct RemapCache {
    /// By address of the input instruction (stable while the module is borrowed).
    attrs: std::collections::HashMap<usize, SharedAttrs, super::flat::FxBuild>,
}

impl RemapCache {
    fn get(
        &mut self,
        src: &Instruction,
        new_id: &[Option<CompId>],
        m: &Module,
    ) -> Result<SharedAttrs, CompileError> {
        let key = src as *const Instruction as usize;
        if let Some(a) = self.attrs.get(&key) {
            let same = a.called.len() == src.attrs.called.len()
                && a.called
                    .iter()
                    .zip(&src.attrs.called)
                    .all(|(&(_, c), &(_, o))| new_id.get(o).copied().flatten() == Some(c));
            if same {
                return Ok(a.clone());
            }
        }
        let mut a = src.attrs.clone();
        remap_called(&mut a, new_id, m, &src.name)?;
        self.attrs.insert(key, a.clone());
        Ok(a)
    }
}

struct Emitter<'e, 'a> {
    m: &'a Module,
    names: &'e mut Namer<'a>,
    dry: bool,
    /// List kernel bodies (`EmitMode::Bodies` and `EmitMode::Skeleton`).
    bodies: bool,
    /// Their instructions, kernel after kernel in emission order.
    arena: Vec<BodyInstr>,
    /// The nodes they are made of.
    nodes: Vec<BodyNode<'a>>,
    new_id: Vec<Option<CompId>>,
    comps: IndexMap<String, Computation>,
    /// Computations emitted so far (= next CompId).
    n_comps: usize,
    instructions: usize,
    /// Per flat computation: (flat node, index in `all`) in emission order.
    kernels: Vec<Vec<(u32, u32)>>,
}

impl<'e, 'a> Emitter<'e, 'a> {
    fn instr(
        &self,
        n: &FNode<'a>,
        name: Name,
        shape: SharedShape,
        remapped: &mut RemapCache,
    ) -> Result<Instruction, CompileError> {
        let attrs = match n.src {
            Some(src) if !src.attrs.called.is_empty() => {
                Some(remapped.get(src, &self.new_id, self.m)?)
            }
            Some(src) => Some(src.attrs.clone()),
            None => None,
        };
        Ok(Instruction {
            name,
            opcode: n.opcode,
            async_wrapped: n.src.and_then(|s| s.async_wrapped),
            shape,
            attrs: node_attrs(n, attrs),
            line: n.src.map_or(0, |s| s.line),
            col: n.src.map_or(0, |s| s.col),
        })
    }

    fn insert(&mut self, comp: Option<Computation>) -> Result<CompId, CompileError> {
        let id = self.n_comps;
        self.n_comps += 1;
        if let Some(comp) = comp {
            if self.comps.contains_key(&comp.name) {
                return Err(bad(
                    self.m,
                    format!("two computations named '{}'", comp.name),
                ));
            }
            self.instructions += comp.len();
            self.comps.insert(comp.name.clone(), comp);
        }
        Ok(id)
    }

    /// The output name of node `x`: its own the first time, a fresh one for clones.
    /// Returns None (but keeps the numbering) when the string is not `needed`.
    fn name_for(
        &mut self,
        nd: &FNode<'a>,
        x: u32,
        named: &mut [bool],
        needed: bool,
    ) -> Option<Name> {
        let k = self.clone_number(x, named);
        needed.then(|| clone_name(nd.name(), k))
    }

    /// 0 the first time node `x` is emitted (it keeps its name), else the number of
    /// its fresh name `{name}.{k}`.
    fn clone_number(&mut self, x: u32, named: &mut [bool]) -> u64 {
        if std::mem::replace(&mut named[x as usize], true) {
            self.names.number()
        } else {
            0
        }
    }

    fn fresh(&mut self, base: &str, needed: bool) -> Name {
        if needed {
            self.names.fresh(base)
        } else {
            self.names.skip();
            Name::default()
        }
    }

    fn emit_flat(
        &mut self,
        fi: usize,
        fc: &FComp<'a>,
        plan: &FusionPlan,
        s: &mut EmitScratch,
    ) -> Result<CompId, CompileError> {
        let m = self.m;
        let dry = self.dry;
        let n = fc.nodes.len();
        let standalone = |x: u32| plan.standalone.get(x as usize).copied().unwrap_or(true);
        // Inputs of each fusion: operands of members outside it, in first-use order.
        let EmitScratch {
            pc,
            shapes,
            body_nodes,
            remapped,
            all,
            inputs,
            input_end,
            mark,
            seen,
            live,
            stack,
            new_ids,
            named,
            local,
            param_attrs,
            body_sizes: _,
        } = s;
        inputs.clear();
        input_end.clear();
        refill(mark, n, u32::MAX);
        refill(seen, n, u32::MAX);
        for (g, gp) in plan.groups.iter().enumerate() {
            let g = g as u32;
            for &x in &gp.members {
                mark[x as usize] = g;
            }
            for &x in &gp.members {
                for &o in &fc.nodes[x as usize].operands {
                    if mark[o as usize] != g && seen[o as usize] != g {
                        seen[o as usize] = g;
                        inputs.push(o);
                    }
                }
            }
            input_end.push(inputs.len() as u32);
        }
        if self.bodies {
            let members: usize = plan.groups.iter().map(|g| g.members.len()).sum();
            self.arena.reserve(inputs.len() + members + 2 * n);
        }
        let inputs_of = |g: u32| -> &[u32] {
            let end = input_end[g as usize] as usize;
            let start = if g == 0 {
                0
            } else {
                input_end[g as usize - 1] as usize
            };
            &inputs[start..end]
        };
        // Liveness after fusion.
        refill(live, n, false);
        stack.clear();
        let push = |x: u32, live: &mut Vec<bool>, stack: &mut Vec<u32>| {
            if !live[x as usize] {
                live[x as usize] = true;
                stack.push(x);
            }
        };
        push(fc.root, live, stack);
        for &x in &fc.order {
            let nd = &fc.nodes[x as usize];
            if standalone(x)
                && (nd.opcode == Opcode::Parameter || nd.src.map(has_side_effect).unwrap_or(false))
            {
                push(x, live, stack);
            }
        }
        while let Some(x) = stack.pop() {
            if !standalone(x) {
                return Err(bad(
                    m,
                    format!(
                        "'{}' is used outside the fusion that absorbed it",
                        fc.nodes[x as usize].name()
                    ),
                ));
            }
            let g = plan.group_at.get(x as usize).copied().unwrap_or(NONE);
            if g != NONE {
                for &i in inputs_of(g) {
                    push(i, live, stack);
                }
            } else {
                for &o in &fc.nodes[x as usize].operands {
                    push(o, live, stack);
                }
            }
        }

        let orig = m.comp(fc.comp);
        let live_groups = fc
            .order
            .iter()
            .filter(|&&x| {
                live[x as usize] && plan.group_at.get(x as usize).copied().unwrap_or(NONE) != NONE
            })
            .count();
        let cid = self.n_comps + live_groups;
        let mut comp = if dry {
            None
        } else {
            let mut c = Computation::new(orig.name.clone());
            let nlive = live.iter().filter(|&&l| l).count();
            c.graph = StableDiGraph::with_capacity(nlive, nlive * 2);
            c.order.reserve(nlive);
            c.params.reserve(fc.params.len());
            c.execution_thread = orig.execution_thread.clone();
            c.line = orig.line;
            Some(c)
        };
        let mut next_id: u32 = 0;
        refill(new_ids, n, NONE);
        refill(named, n, false);
        let mut params: Vec<(i64, u32)> = Vec::with_capacity(fc.params.len());
        let mut kernels: Vec<(u32, u32)> = Vec::with_capacity(plan.groups.len() + n / 8);
        refill(local, n, NONE);
        pc.reset(n);
        // Control predecessors survive only if they are emitted earlier under their own
        // name in the same computation (inlining, fusion and renaming can remove them).
        let has_ctrl = !dry
            && fc.order.iter().any(|&x| {
                fc.nodes[x as usize]
                    .src
                    .map(|s| !s.attrs.control_predecessors.is_empty())
                    .unwrap_or(false)
            });
        let by_name: std::collections::HashMap<&str, u32> = if has_ctrl {
            fc.order
                .iter()
                .filter(|&&x| fc.nodes[x as usize].name.is_none())
                .filter_map(|&x| fc.nodes[x as usize].src.map(|s| (s.name.as_str(), x)))
                .collect()
        } else {
            Default::default()
        };
        let mut own_name = vec![false; if has_ctrl { n } else { 0 }];
        let ids = |v: &[u32], map: &[u32]| -> Option<SmallVec<[InstrId; 4]>> {
            v.iter()
                .map(|&o| {
                    Some(map[o as usize])
                        .filter(|&i| i != NONE)
                        .map(|i| NodeIndex::new(i as usize))
                })
                .collect()
        };
        for &x in &fc.order {
            if !live[x as usize] {
                continue;
            }
            let nd = &fc.nodes[x as usize];
            let g = plan.group_at.get(x as usize).copied().unwrap_or(NONE);
            if g == NONE {
                let is_kernel = !nd.opcode.emits_no_kernel();
                let clone_number = self.clone_number(x, named);
                let name = (!dry || is_kernel).then(|| clone_name(nd.name(), clone_number));
                let id = next_id;
                next_id += 1;
                if nd.opcode == Opcode::Parameter {
                    params.push((
                        nd.src.and_then(|s| s.attrs.parameter_number).unwrap_or(-1),
                        id,
                    ));
                }
                if let Some(c) = comp.as_mut() {
                    let mut ins = self.instr(
                        nd,
                        name.clone().unwrap_or_default(),
                        shapes.get(fi, x, nd),
                        remapped,
                    )?;
                    if has_ctrl {
                        own_name[x as usize] = ins.name == nd.name();
                    }
                    if has_ctrl && !ins.attrs.control_predecessors.is_empty() {
                        ins.attrs.control_predecessors.retain(|p| {
                            by_name
                                .get(p.as_str())
                                .map(|&y| new_ids[y as usize] != NONE && own_name[y as usize])
                                .unwrap_or(false)
                        });
                    }
                    let ops = ids(&nd.operands, new_ids).ok_or_else(|| {
                        bad(m, format!("operand of '{}' was not emitted", ins.name))
                    })?;
                    c.add(ins, &ops);
                }
                new_ids[x as usize] = id;
                if is_kernel {
                    let name = name.unwrap_or_default();
                    let parameters = pc.all(fi, fc, &nd.operands);
                    let body = if self.bodies {
                        // distinct operands, then the instruction
                        let start = self.arena.len();
                        let mut leaves: SmallVec<[u32; 4]> = SmallVec::new();
                        let mut ops = SmallVec::new();
                        for &o in &nd.operands {
                            let pos = leaves.iter().position(|&l| l == o).unwrap_or_else(|| {
                                let on = &fc.nodes[o as usize];
                                let node = body_nodes.index(&mut self.nodes, fi, o, on, shapes);
                                self.arena.push(BodyInstr::of(node, 0, SmallVec::new()));
                                leaves.push(o);
                                leaves.len() - 1
                            });
                            ops.push(pos as u32);
                        }
                        let node = body_nodes.index(&mut self.nodes, fi, x, nd, shapes);
                        self.arena.push(BodyInstr::of(node, clone_number, ops));
                        Some(BodySpan {
                            start: start as u32,
                            len: leaves.len() as u32 + 1,
                            root: leaves.len() as u32,
                            leaves: leaves.len() as u32,
                            single: true,
                        })
                    } else {
                        None
                    };
                    kernels.push((x, all.len() as u32));
                    all.push(Some((
                        Kernel {
                            index: 0,
                            hero_name: name.clone(),
                            name,
                            kind: KernelKind::Unfused,
                            hero: nd.opcode,
                            computation: cid,
                            computation_name: Name::from(orig.name.as_str()),
                            instruction: id,
                            fused_computation: None,
                            hero_operands: parameters.clone(),
                            parameters,
                            outputs: pc.get(fi, fc, x).to_vec(),
                            tile: None,
                            instruction_count: 1,
                            call_site: None,
                        },
                        body,
                    )));
                }
                continue;
            }
            // A fusion.
            let gp = &plan.groups[g as usize];
            let ins_g = inputs_of(g);
            let fname = self.fresh("fused_computation", !dry);
            let mut f = if dry {
                None
            } else if self.bodies {
                Some(Computation::new(fname))
            } else {
                let mut f = Computation::new(fname);
                let size = gp.members.len() + ins_g.len();
                f.graph = StableDiGraph::with_capacity(size, size * 2);
                f.order.reserve(size);
                f.params.reserve(ins_g.len());
                Some(f)
            };
            let mut fid: u32 = 0;
            let mut parameters = Vec::with_capacity(ins_g.len());
            let start = self.arena.len();
            for (i, &inp) in ins_g.iter().enumerate() {
                let on = &fc.nodes[inp as usize];
                parameters.extend_from_slice(pc.get(fi, fc, inp));
                while param_attrs.len() <= i {
                    let mut a = SharedAttrs::default();
                    a.parameter_number = Some(param_attrs.len() as i64);
                    param_attrs.push(a);
                }
                if self.bodies {
                    self.arena.push(BodyInstr {
                        node: body_nodes.index(&mut self.nodes, fi, inp, on, shapes),
                        parameter: i as u32,
                        clone_number: 0,
                        operands: SmallVec::new(),
                    });
                }
                let pname = if dry || self.bodies {
                    self.names.skip();
                    Name::default()
                } else {
                    self.names.fresh_indexed("param_", i as u64)
                };
                if let Some(f) = f.as_mut().filter(|_| !self.bodies) {
                    let mut p = Instruction::new(pname, Opcode::Parameter, shapes.get(fi, inp, on));
                    p.attrs = param_attrs[i].clone();
                    let id = f.add(p, &[]);
                    f.params.push(id);
                }
                local[inp as usize] = fid;
                fid += 1;
            }
            let mut hero_name = Name::default();
            for &x2 in &gp.members {
                let nd2 = &fc.nodes[x2 as usize];
                let is_hero = x2 == gp.hero;
                if self.bodies {
                    // the name as `name_for` would make it, made only if asked for
                    let number = self.clone_number(x2, named);
                    let ops: Option<SmallVec<[u32; 4]>> = nd2
                        .operands
                        .iter()
                        .map(|&o| Some(local[o as usize]).filter(|&l| l != NONE))
                        .collect();
                    let ops = ops.ok_or_else(|| {
                        bad(m, format!("fused operand of '{}' missing", nd2.name()))
                    })?;
                    if is_hero {
                        hero_name = clone_name(nd2.name(), number);
                    }
                    let node = body_nodes.index(&mut self.nodes, fi, x2, nd2, shapes);
                    self.arena.push(BodyInstr::of(node, number, ops));
                    local[x2 as usize] = fid;
                    fid += 1;
                    continue;
                }
                let name = self.name_for(nd2, x2, named, !dry || is_hero);
                if is_hero {
                    hero_name = name.clone().unwrap_or_default();
                }
                if let Some(f) = f.as_mut() {
                    let mut ins = self.instr(
                        nd2,
                        name.unwrap_or_default(),
                        shapes.get(fi, x2, nd2),
                        remapped,
                    )?;
                    if !ins.attrs.control_predecessors.is_empty() {
                        ins.attrs.control_predecessors.clear();
                    }
                    let ops = ids(&nd2.operands, local).ok_or_else(|| {
                        bad(m, format!("fused operand of '{}' missing", ins.name))
                    })?;
                    f.add(ins, &ops);
                }
                local[x2 as usize] = fid;
                fid += 1;
            }
            let root_local = local[gp.root as usize];
            for &x2 in gp.members.iter().chain(ins_g) {
                local[x2 as usize] = NONE;
            }
            if let Some(f) = f.as_mut().filter(|_| !self.bodies) {
                f.root = NodeIndex::new(root_local as usize);
            }
            let fcid = self.insert(f)?;
            if dry || self.bodies {
                self.instructions += fid as usize;
            }
            let fu_name = self.names.fresh("fusion");
            let id = next_id;
            next_id += 1;
            if let Some(c) = comp.as_mut() {
                let root_shape = shapes.get(fi, gp.root, &fc.nodes[gp.root as usize]);
                let mut fu = Instruction::new(fu_name.clone(), Opcode::Fusion, root_shape);
                fu.attrs.fusion_kind = Some(gp.kind);
                fu.attrs.called.push((CallRole::Calls, fcid));
                if let Some(md) = fc.nodes[gp.hero as usize]
                    .src
                    .and_then(|s| s.attrs.metadata.clone())
                {
                    fu.attrs.metadata = Some(md);
                }
                let ops = ids(ins_g, new_ids).ok_or_else(|| {
                    bad(
                        m,
                        format!("an operand of fusion '{fu_name}' was not emitted"),
                    )
                })?;
                c.add(fu, &ops);
            }
            new_ids[x as usize] = id;
            let hero = &fc.nodes[gp.hero as usize];
            let body = self.bodies.then(|| BodySpan {
                start: start as u32,
                len: (self.arena.len() - start) as u32,
                root: root_local,
                leaves: ins_g.len() as u32,
                single: false,
            });
            kernels.push((x, all.len() as u32));
            all.push(Some((
                Kernel {
                    index: 0,
                    name: fu_name,
                    kind: KernelKind::from_fusion(gp.kind),
                    hero: hero.opcode,
                    hero_name,
                    computation: cid,
                    computation_name: Name::from(orig.name.as_str()),
                    instruction: id,
                    fused_computation: Some(fcid),
                    parameters,
                    outputs: pc.get(fi, fc, gp.root).to_vec(),
                    hero_operands: pc.all(fi, fc, &hero.operands),
                    tile: None,
                    instruction_count: gp.members.len(),
                    call_site: None,
                },
                body,
            )));
        }
        if new_ids.get(fc.root as usize).copied().unwrap_or(NONE) == NONE {
            return Err(bad(m, format!("root of '{}' not emitted", orig.name)));
        }
        params.sort_by_key(|p| p.0);
        for (k, &(num, _)) in params.iter().enumerate() {
            if num != k as i64 {
                return Err(bad(
                    m,
                    format!("parameters of '{}' are not numbered 0..n", orig.name),
                ));
            }
        }
        if let Some(c) = comp.as_mut() {
            c.root = NodeIndex::new(new_ids[fc.root as usize] as usize);
            c.params = params
                .iter()
                .map(|&(_, id)| NodeIndex::new(id as usize))
                .collect();
        }
        if dry {
            self.instructions += next_id as usize;
        }
        let got = self.insert(comp)?;
        if got != cid {
            return Err(bad(m, "internal: computation numbering"));
        }
        self.kernels[fi] = kernels;
        Ok(cid)
    }
}

/// Emit the compiled module (or, by `mode`, nothing or the kernel bodies) and its
/// kernels in execution order.
pub(crate) fn emit<'a>(
    flat: &mut Flat<'a>,
    plans: &[FusionPlan],
    mode: EmitMode,
    scratch: &mut EmitScratch,
) -> Result<Emitted<'a>, CompileError> {
    let m = flat.module;
    scratch.all.clear();
    let nflat = flat.comps.len();
    let dry = matches!(mode, EmitMode::Dry | EmitMode::Bodies);
    let bodies = matches!(mode, EmitMode::Bodies | EmitMode::Skeleton);
    if bodies {
        scratch.body_nodes.reset(flat);
    }
    let mut e = Emitter {
        m,
        names: &mut flat.names,
        dry,
        bodies,
        arena: Vec::with_capacity(if bodies { scratch.body_sizes.0 } else { 0 }),
        nodes: Vec::with_capacity(if bodies { scratch.body_sizes.1 } else { 0 }),
        new_id: vec![None; m.computations.len()],
        comps: IndexMap::with_capacity(if dry {
            0
        } else {
            m.computations.len() + plans.iter().map(|p| p.groups.len()).sum::<usize>()
        }),
        n_comps: 0,
        instructions: 0,
        kernels: vec![Vec::new(); nflat],
    };
    for c in 0..m.computations.len() {
        match flat.kinds[c] {
            CompKind::Dropped => {}
            CompKind::Embedded => {
                let comp = if dry {
                    e.instructions += m.comp(c).len();
                    None
                } else {
                    let mut comp = m.comp(c).clone();
                    let tile = flat.fused[c];
                    for &id in &comp.order.clone() {
                        let name = comp.instr(id).name.clone();
                        let ins = comp.instr_mut(id);
                        remap_called(&mut ins.attrs, &e.new_id, m, &name)?;
                        if tile {
                            // An input fusion's computation: tiles like everything else.
                            let leaves: Vec<Dims> = leaf_shapes(&ins.shape)
                                .iter()
                                .map(|a| a.minor_to_major())
                                .collect();
                            ins.shape = laid_out(&ins.shape, &leaves).into();
                        }
                    }
                    Some(comp)
                };
                e.new_id[c] = Some(e.insert(comp)?);
            }
            CompKind::Flat => {
                let fi = flat.flat_of[c].ok_or_else(|| bad(m, "flat computation missing"))?;
                let cid = e.emit_flat(fi, &flat.comps[fi], &plans[fi], scratch)?;
                e.new_id[c] = Some(cid);
            }
        }
    }
    let entry = e.new_id[m.entry].ok_or_else(|| bad(m, "entry computation not emitted"))?;
    let Emitter {
        comps,
        mut kernels,
        instructions,
        arena,
        nodes,
        ..
    } = e;
    let module = if dry {
        None
    } else {
        let mut module = Module {
            name: m.name.clone(),
            attrs: m.attrs.clone(),
            stack_frames: m.stack_frames.clone(),
            computations: comps,
            entry,
        };
        module.attrs.is_scheduled = false;
        let ec = module.entry();
        let params: Vec<Shape> = ec
            .params
            .iter()
            .map(|&p| (*ec.instr(p).shape).clone())
            .collect();
        let result = (*ec.instr(ec.root).shape).clone();
        module.attrs.entry_computation_layout = Some((params, result));
        Some(module)
    };
    // Kernels in execution order.
    let mut out = Vec::new();
    let mut visited = vec![false; nflat];
    if let Some(fe) = flat.flat_of.get(m.entry).copied().flatten() {
        collect(
            flat,
            fe,
            None,
            &mut kernels,
            &mut scratch.all,
            &mut visited,
            &mut out,
            0,
        );
    }
    if bodies {
        scratch.body_sizes = (arena.len(), nodes.len());
    }
    let mut bodies = KernelBodies {
        instrs: arena,
        nodes,
        parameter_attrs: scratch.param_attrs.clone(),
        spans: Vec::with_capacity(if bodies { out.len() } else { 0 }),
    };
    let kernels = out
        .into_iter()
        .enumerate()
        .map(|(i, (mut k, span))| {
            k.index = i;
            bodies.spans.extend(span);
            k
        })
        .collect();
    Ok(Emitted {
        module,
        kernels,
        bodies,
        instructions,
    })
}

#[allow(clippy::too_many_arguments)]
fn collect(
    flat: &Flat<'_>,
    fi: usize,
    site: Option<CallSite>,
    kernels: &mut [Vec<(u32, u32)>],
    all: &mut [Option<(Kernel, Option<BodySpan>)>],
    visited: &mut [bool],
    out: &mut Vec<(Kernel, Option<BodySpan>)>,
    depth: usize,
) {
    if depth > 64 || visited.get(fi).copied().unwrap_or(true) {
        return;
    }
    visited[fi] = true;
    let mine = std::mem::take(&mut kernels[fi]);
    let mut mine = mine.into_iter().peekable();
    out.reserve(all.len());
    let fc = &flat.comps[fi];
    let cname = &flat.module.comp(fc.comp).name;
    for &x in &fc.order {
        while let Some((_, k)) = mine.next_if(|(kx, _)| *kx == x) {
            if let Some(mut k) = all.get_mut(k as usize).and_then(Option::take) {
                k.0.call_site = site.clone();
                out.push(k);
            }
        }
        let nd = &fc.nodes[x as usize];
        let callee = |c: CompId| flat.flat_of.get(c).copied().flatten();
        match nd.opcode {
            Opcode::While => {
                // The loop of the input module: its count is a fact of the source.
                let trip = flat
                    .table
                    .nodes
                    .get(nd.origin as usize)
                    .and_then(|&(c, i)| {
                        let m = flat.module;
                        crate::analysis::while_loop::known_trip_count(m, m.comp(c), i)
                    })
                    .map(|(n, _)| n);
                for (role, label) in [
                    (CallRole::Condition, SiteRole::Condition),
                    (CallRole::Body, SiteRole::Body),
                ] {
                    if let Some(f) = nd
                        .src
                        .and_then(|s| s.attrs.called_with(role))
                        .and_then(callee)
                    {
                        let s = CallSite {
                            computation: cname.clone(),
                            instruction: nd.name().to_string(),
                            role: label,
                            trip_count: trip,
                        };
                        collect(flat, f, Some(s), kernels, all, visited, out, depth + 1);
                    }
                }
            }
            Opcode::Conditional => {
                for (k, &(_, c)) in nd.called().iter().enumerate() {
                    if let Some(f) = callee(c) {
                        let s = CallSite {
                            computation: cname.clone(),
                            instruction: nd.name().to_string(),
                            role: SiteRole::Branch(k),
                            trip_count: None,
                        };
                        collect(flat, f, Some(s), kernels, all, visited, out, depth + 1);
                    }
                }
            }
            _ => {}
        }
    }
}
