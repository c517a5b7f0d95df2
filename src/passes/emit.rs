//! Build the compiled program from the flattened, laid-out computations and the fusion
//! plans (each input instruction is cloned exactly once per place it appears), and list
//! its kernels, in one of two modes ([`EmitMode`]): the program the cost model reads (the
//! instructions of every kernel, and for a program with loops or conditionals the output
//! module's skeleton), or the output module itself, built only to be printed. Names, ids
//! and kernels come out the same in both.

use indexmap::IndexMap;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;

use super::error::CompileError;
use super::flat::{
    has_side_effect, numbered, CompKind, FComp, FNode, Flat, FxBuild, Namer, ShapeRef, NONE,
};
use super::fusion::{FusionPlan, GroupPlan};
use super::kernel::{
    BodyAttrs, BodyInstr, BodyNode, BodySpan, CallSite, Kernel, KernelBodies, KernelKind,
    ParameterNumber, PhysicalShape, SiteRole,
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
    /// What the cost model reads: the instructions of each kernel ([`KernelBodies`]),
    /// and with `skeleton` the output module without the contents of the fusions the
    /// compiler makes (their computations are empty placeholders: not valid HLO, only
    /// for walking the program's loops, conditionals and input fusions). Without
    /// `shapes` the kernel list leaves out the physical shapes of the kernels' operands
    /// and outputs (`Kernel::parameters`, `outputs`, `hero_operands`), which costing
    /// does not read.
    Program { skeleton: bool, shapes: bool },
    /// The output module, to be printed.
    Module,
}

/// Output of the emitter.
pub(crate) struct Emitted<'a> {
    /// In [`EmitMode::Module`], and the skeleton of `EmitMode::Program { skeleton: true }`.
    pub module: Option<Module>,
    pub kernels: Vec<Kernel>,
    /// In [`EmitMode::Program`], one per kernel (else empty).
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
    /// [`tiling::layout_key`] of the node's layouts.
    key: u64,
    value: Option<T>,
}

impl<T: Clone, const W: usize> NodeSlots<T, W> {
    /// The value of node `x` of flat computation `fi`, made by `make` unless one of the
    /// last `W` made still holds; None (nothing made) for nodes without a [`shape_id`].
    fn get(&mut self, fi: usize, x: u32, n: &FNode<'_>, make: impl FnOnce() -> T) -> Option<&T> {
        self.get_at(fi, x, shape_id(n), make)
    }

    /// [`NodeSlots::get`] for a node whose [`shape_id`] is `id`.
    fn get_at(
        &mut self,
        fi: usize,
        x: u32,
        id: Option<(usize, u64)>,
        make: impl FnOnce() -> T,
    ) -> Option<&T> {
        let (src, key) = id?;
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
            let (shape, shape_id, model_layout) = shapes.get_with_id(n);
            list.push(BodyNode {
                name: n.body_name(),
                opcode: n.opcode,
                async_wrapped: n.src.and_then(|s| s.async_wrapped),
                shape,
                shape_id,
                model_layout,
                attrs,
            });
        }
        *i
    }
}

/// Laid-out shapes by [`shape_id`]: emitting a node laid out as any earlier compilation
/// of this scratch laid it out copies a pointer. A random configuration gives a node
/// one of a few dozen layouts; one table of every pair made (bounded: emptied when it
/// holds [`ShapeCache::MAX`]) finds nearly all of them, where the last two layouts of
/// each node found about half.
#[derive(Default)]
struct ShapeCache(HashMap<(usize, u64), (SharedShape, u64), FxBuild>);

impl ShapeCache {
    /// Shapes kept at most (a few hundred bytes each).
    const MAX: usize = 1 << 18;

    fn get(&mut self, n: &FNode<'_>) -> SharedShape {
        self.get_with_id(n).0
    }

    /// The laid-out shape of node `n`, its [`shape_id`], and the packed layout the cost
    /// model reads of it ([`tiling::model_layout_key`]; 0 without a shape id), kept with
    /// the shape.
    fn get_with_id(&mut self, n: &FNode<'_>) -> (SharedShape, Option<(usize, u64)>, u64) {
        let id = shape_id(n);
        let make = || SharedShape::new(laid_out(&n.shape, &n.layouts));
        let Some(key) = id else {
            return (make(), id, 0);
        };
        if let Some((s, model)) = self.0.get(&key) {
            return (s.clone(), id, *model);
        }
        if self.0.len() >= Self::MAX {
            self.0.clear();
        }
        let s = make();
        // a shape id is one array leaf with one layout
        let model = match (n.shape.as_array(), n.layouts.first()) {
            (Some(a), Some(l)) => tiling::model_layout_key(&a.dims, l, key.1),
            _ => key.1,
        };
        self.0.insert(key, (s.clone(), model));
        (s, id, model)
    }
}

/// What a node's laid-out shape is made of, in two words: the address of the input
/// shape it borrows (stable while the module is borrowed) and its [`tiling::layout_key`]; the
/// laid-out shape is a function of the two, so equal ids are equal shapes. None for
/// shapes the passes made themselves (they live for one compilation, and their address
/// could be reused by another shape) and for tuples.
pub(crate) fn shape_id(n: &FNode<'_>) -> Option<(usize, u64)> {
    match &n.shape {
        ShapeRef::Borrowed(s) => {
            tiling::layout_key(&n.layouts).map(|k| (*s as *const Shape as usize, k))
        }
        ShapeRef::Owned(_) => None,
    }
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

/// `v.reserve(additional)`, but an empty vector too small for it gets a new allocation
/// (growing one would copy its dead bytes).
fn reserve<T>(v: &mut Vec<T>, additional: usize) {
    if v.is_empty() && v.capacity() < additional {
        *v = Vec::with_capacity(additional);
    } else {
        v.reserve(additional);
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
    inputs: FusionInputs,
    /// Nodes live after fusion, and the work list that finds them.
    live: Vec<bool>,
    stack: Vec<u32>,
    nodes: NodeBuffers,
}

/// What emitting the nodes of a computation reads and writes.
#[derive(Default)]
struct NodeBuffers {
    pc: PhysCache,
    shapes: ShapeCache,
    body_nodes: BodyNodes,
    remapped: RemapCache,
    /// Kernels (and their bodies in [`EmitMode::Program`]) in emission order, taken out
    /// in execution order.
    all: Vec<Option<(Kernel, Option<BodySpan>)>>,
    /// Output id of each node (NONE until emitted).
    new_ids: Vec<u32>,
    /// Per node: emitted already (a further copy gets a fresh name).
    named: Vec<bool>,
    /// Id of each node in the fused computation being emitted.
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
    /// Build no module (`EmitMode::Program` without a skeleton).
    no_module: bool,
    /// List kernel bodies ([`EmitMode::Program`]).
    bodies: bool,
    /// Give each kernel the physical shapes of its operands and outputs.
    shapes: bool,
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

    /// Emits flat computation `fi` (its fusions first, each as a computation of its
    /// own) and records its kernels; its id in the output module.
    fn emit_flat(
        &mut self,
        fi: usize,
        fc: &FComp<'a>,
        plan: &FusionPlan,
        s: &mut EmitScratch,
    ) -> Result<CompId, CompileError> {
        s.inputs.find(fc, plan);
        if self.bodies {
            let members: usize = plan.groups.iter().map(|g| g.members.len()).sum();
            reserve(
                &mut self.arena,
                s.inputs.inputs.len() + members + 2 * fc.nodes.len(),
            );
            // a body node is listed once per node of the computation at most
            reserve(&mut self.nodes, fc.nodes.len());
        }
        live_after_fusion(self.m, fc, plan, &s.inputs, &mut s.live, &mut s.stack)?;
        let mut out = self.begin_comp(fi, fc, plan, &s.live, &mut s.nodes);
        for &x in &fc.order {
            if !s.live[x as usize] {
                continue;
            }
            let g = plan.group_at.get(x as usize).copied().unwrap_or(NONE);
            if g == NONE {
                self.emit_unfused(&mut out, x, &mut s.nodes)?;
            } else {
                let gp = &plan.groups[g as usize];
                self.emit_fusion(&mut out, x, gp, s.inputs.of(g), &mut s.nodes)?;
            }
        }
        self.finish_comp(out, &s.nodes.new_ids)
    }

    /// The output computation of flat computation `fi`, empty, with its future id
    /// (after those of its live fusions); the node buffers reset for it.
    fn begin_comp<'c>(
        &self,
        fi: usize,
        fc: &'c FComp<'a>,
        plan: &FusionPlan,
        live: &[bool],
        b: &mut NodeBuffers,
    ) -> CompOut<'c, 'a> {
        let n = fc.nodes.len();
        let orig = self.m.comp(fc.comp);
        let live_groups = fc
            .order
            .iter()
            .filter(|&&x| {
                live[x as usize] && plan.group_at.get(x as usize).copied().unwrap_or(NONE) != NONE
            })
            .count();
        let comp = if self.no_module {
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
        refill(&mut b.new_ids, n, NONE);
        refill(&mut b.named, n, false);
        refill(&mut b.local, n, NONE);
        b.pc.reset(n);
        CompOut {
            fi,
            fc,
            orig,
            cid: self.n_comps + live_groups,
            comp,
            next_id: 0,
            params: Vec::with_capacity(fc.params.len()),
            kernels: Vec::with_capacity(plan.groups.len() + n / 8),
            ctrl: ControlPreds::of(fc, self.no_module),
        }
    }

    /// Emits node `x`, outside any fusion, and its kernel unless it makes none.
    fn emit_unfused(
        &mut self,
        out: &mut CompOut<'_, 'a>,
        x: u32,
        b: &mut NodeBuffers,
    ) -> Result<(), CompileError> {
        let (fi, fc) = (out.fi, out.fc);
        let nd = &fc.nodes[x as usize];
        let is_kernel = !nd.opcode.emits_no_kernel();
        let clone_number = self.clone_number(x, &mut b.named);
        let name = (!self.no_module || is_kernel).then(|| clone_name(nd.name(), clone_number));
        let id = out.next_id;
        out.next_id += 1;
        if nd.opcode == Opcode::Parameter {
            out.params.push((
                nd.src.and_then(|s| s.attrs.parameter_number).unwrap_or(-1),
                id,
            ));
        }
        if out.comp.is_some() {
            self.add_unfused(out, x, name.clone().unwrap_or_default(), b)?;
        }
        b.new_ids[x as usize] = id;
        if !is_kernel {
            return Ok(());
        }
        let name = name.unwrap_or_default();
        let parameters = self.kernel_shapes(fi, fc, &nd.operands, &mut b.pc);
        let body = self
            .bodies
            .then(|| self.unfused_body(fi, fc, x, clone_number, b));
        out.kernels.push((x, b.all.len() as u32));
        b.all.push(Some((
            Kernel {
                index: 0,
                hero_name: name.clone(),
                name,
                kind: KernelKind::Unfused,
                hero: nd.opcode,
                computation: out.cid,
                computation_name: Name::from(out.orig.name.as_str()),
                instruction: id,
                fused_computation: None,
                hero_operands: parameters.clone(),
                parameters,
                outputs: self.kernel_outputs(fi, fc, x, &mut b.pc),
                tile: None,
                instruction_count: 1,
                call_site: None,
            },
            body,
        )));
        Ok(())
    }

    /// Adds unfused node `x` to the output computation (none without a module), keeping the
    /// control predecessors that survive.
    fn add_unfused(
        &self,
        out: &mut CompOut<'_, 'a>,
        x: u32,
        name: Name,
        b: &mut NodeBuffers,
    ) -> Result<(), CompileError> {
        let Some(c) = out.comp.as_mut() else {
            return Ok(());
        };
        let nd = &out.fc.nodes[x as usize];
        let mut ins = self.instr(nd, name, b.shapes.get(nd), &mut b.remapped)?;
        let ctrl = &mut out.ctrl;
        if ctrl.any {
            ctrl.own_name[x as usize] = ins.name == nd.name();
        }
        if ctrl.any && !ins.attrs.control_predecessors.is_empty() {
            ins.attrs
                .control_predecessors
                .retain(|p| ctrl.keeps(p, &b.new_ids));
        }
        let ops = emitted_ids(&nd.operands, &b.new_ids)
            .ok_or_else(|| bad(self.m, format!("operand of '{}' was not emitted", ins.name)))?;
        c.add(ins, &ops);
        Ok(())
    }

    /// The body of an unfused kernel: its distinct operands, then the instruction.
    fn unfused_body(
        &mut self,
        fi: usize,
        fc: &FComp<'a>,
        x: u32,
        clone_number: u64,
        b: &mut NodeBuffers,
    ) -> BodySpan {
        let nd = &fc.nodes[x as usize];
        let start = self.arena.len();
        let mut leaves: SmallVec<[u32; 4]> = SmallVec::new();
        let mut ops = SmallVec::new();
        for &o in &nd.operands {
            let pos = leaves.iter().position(|&l| l == o).unwrap_or_else(|| {
                let on = &fc.nodes[o as usize];
                let node = b
                    .body_nodes
                    .index(&mut self.nodes, fi, o, on, &mut b.shapes);
                self.arena.push(BodyInstr::of(node, 0, SmallVec::new()));
                leaves.push(o);
                leaves.len() - 1
            });
            ops.push(InstrId::new(pos));
        }
        let node = b
            .body_nodes
            .index(&mut self.nodes, fi, x, nd, &mut b.shapes);
        self.arena.push(BodyInstr::of(node, clone_number, ops));
        BodySpan {
            start: start as u32,
            len: leaves.len() as u32 + 1,
            root: leaves.len() as u32,
            leaves: leaves.len() as u32,
            single: true,
        }
    }

    /// Emits fusion `gp` (rooted at node `x`, reading `inputs`): its computation, the
    /// fusion instruction, its kernel.
    fn emit_fusion(
        &mut self,
        out: &mut CompOut<'_, 'a>,
        x: u32,
        gp: &GroupPlan,
        inputs: &[u32],
        b: &mut NodeBuffers,
    ) -> Result<(), CompileError> {
        let (fi, fc) = (out.fi, out.fc);
        let mut f = self.begin_fused(gp, inputs);
        let parameters = self.fused_parameters(out, inputs, &mut f, b);
        let hero_name = self.fused_members(out, gp, &mut f, b)?;
        let root_local = b.local[gp.root as usize];
        for &x2 in gp.members.iter().chain(inputs) {
            b.local[x2 as usize] = NONE;
        }
        let FusedOut {
            mut comp,
            len,
            start,
        } = f;
        if let Some(f) = comp.as_mut().filter(|_| !self.bodies) {
            f.root = NodeIndex::new(root_local as usize);
        }
        let fcid = self.insert(comp)?;
        if self.no_module || self.bodies {
            self.instructions += len as usize;
        }
        let fu_name = self.names.fresh("fusion");
        let id = out.next_id;
        out.next_id += 1;
        if let Some(c) = out.comp.as_mut() {
            let root_shape = b.shapes.get(&fc.nodes[gp.root as usize]);
            let mut fu = Instruction::new(fu_name.clone(), Opcode::Fusion, root_shape);
            fu.attrs.fusion_kind = Some(gp.kind);
            fu.attrs.called.push((CallRole::Calls, fcid));
            if let Some(md) = fc.nodes[gp.hero as usize]
                .src
                .and_then(|s| s.attrs.metadata.clone())
            {
                fu.attrs.metadata = Some(md);
            }
            let ops = emitted_ids(inputs, &b.new_ids).ok_or_else(|| {
                bad(
                    self.m,
                    format!("an operand of fusion '{fu_name}' was not emitted"),
                )
            })?;
            c.add(fu, &ops);
        }
        b.new_ids[x as usize] = id;
        let hero = &fc.nodes[gp.hero as usize];
        let body = self.bodies.then(|| BodySpan {
            start: start as u32,
            len: (self.arena.len() - start) as u32,
            root: root_local,
            leaves: inputs.len() as u32,
            single: false,
        });
        out.kernels.push((x, b.all.len() as u32));
        b.all.push(Some((
            Kernel {
                index: 0,
                name: fu_name,
                kind: KernelKind::from_fusion(gp.kind),
                hero: hero.opcode,
                hero_name,
                computation: out.cid,
                computation_name: Name::from(out.orig.name.as_str()),
                instruction: id,
                fused_computation: Some(fcid),
                parameters,
                outputs: self.kernel_outputs(fi, fc, gp.root, &mut b.pc),
                hero_operands: self.kernel_shapes(fi, fc, &hero.operands, &mut b.pc),
                tile: None,
                instruction_count: gp.members.len(),
                call_site: None,
            },
            body,
        )));
        Ok(())
    }

    /// The fused computation of `gp`, empty (none without a module; an empty placeholder when
    /// listing bodies).
    fn begin_fused(&mut self, gp: &GroupPlan, inputs: &[u32]) -> FusedOut {
        let fname = self.fresh("fused_computation", !self.no_module);
        let comp = if self.no_module {
            None
        } else if self.bodies {
            Some(Computation::new(fname))
        } else {
            let mut f = Computation::new(fname);
            let size = gp.members.len() + inputs.len();
            f.graph = StableDiGraph::with_capacity(size, size * 2);
            f.order.reserve(size);
            f.params.reserve(inputs.len());
            Some(f)
        };
        FusedOut {
            comp,
            len: 0,
            start: self.arena.len(),
        }
    }

    /// The physical shapes of nodes `xs`, for a kernel's operands (none without
    /// [`Emitter::shapes`]).
    fn kernel_shapes(
        &self,
        fi: usize,
        fc: &FComp<'_>,
        xs: &[u32],
        pc: &mut PhysCache,
    ) -> Vec<Arc<PhysicalShape>> {
        if self.shapes {
            pc.all(fi, fc, xs)
        } else {
            Vec::new()
        }
    }

    /// The physical shapes of node `x`'s outputs, for its kernel (none without
    /// [`Emitter::shapes`]).
    fn kernel_outputs(
        &self,
        fi: usize,
        fc: &FComp<'_>,
        x: u32,
        pc: &mut PhysCache,
    ) -> Vec<Arc<PhysicalShape>> {
        if self.shapes {
            pc.get(fi, fc, x).to_vec()
        } else {
            Vec::new()
        }
    }

    /// One parameter of the fused computation per input; the inputs' physical shapes
    /// (none without [`Emitter::shapes`]).
    fn fused_parameters(
        &mut self,
        out: &CompOut<'_, 'a>,
        inputs: &[u32],
        f: &mut FusedOut,
        b: &mut NodeBuffers,
    ) -> Vec<Arc<PhysicalShape>> {
        let (fi, fc) = (out.fi, out.fc);
        let mut parameters = Vec::with_capacity(inputs.len());
        for (i, &inp) in inputs.iter().enumerate() {
            let on = &fc.nodes[inp as usize];
            if self.shapes {
                parameters.extend_from_slice(b.pc.get(fi, fc, inp));
            }
            while b.param_attrs.len() <= i {
                let mut a = SharedAttrs::default();
                a.parameter_number = Some(b.param_attrs.len() as i64);
                b.param_attrs.push(a);
            }
            if self.bodies {
                self.arena.push(BodyInstr {
                    node: b
                        .body_nodes
                        .index(&mut self.nodes, fi, inp, on, &mut b.shapes),
                    parameter: ParameterNumber::new(i as u32),
                    clone_number: 0,
                    operands: SmallVec::new(),
                });
            }
            let pname = if self.no_module || self.bodies {
                self.names.skip();
                Name::default()
            } else {
                self.names.fresh_indexed("param_", i as u64)
            };
            if let Some(fcomp) = f.comp.as_mut().filter(|_| !self.bodies) {
                let mut p = Instruction::new(pname, Opcode::Parameter, b.shapes.get(on));
                p.attrs = b.param_attrs[i].clone();
                let id = fcomp.add(p, &[]);
                fcomp.params.push(id);
            }
            b.local[inp as usize] = f.len;
            f.len += 1;
        }
        parameters
    }

    /// The members of fusion `gp`, in order, into its computation (or its body); the
    /// hero's name.
    fn fused_members(
        &mut self,
        out: &CompOut<'_, 'a>,
        gp: &GroupPlan,
        f: &mut FusedOut,
        b: &mut NodeBuffers,
    ) -> Result<Name, CompileError> {
        let (fi, fc) = (out.fi, out.fc);
        let m = self.m;
        let mut hero_name = Name::default();
        for &x2 in &gp.members {
            let nd2 = &fc.nodes[x2 as usize];
            let is_hero = x2 == gp.hero;
            if self.bodies {
                // the name as `name_for` would make it, made only if asked for
                let number = self.clone_number(x2, &mut b.named);
                if is_hero {
                    hero_name = clone_name(nd2.name(), number);
                }
                let node = b
                    .body_nodes
                    .index(&mut self.nodes, fi, x2, nd2, &mut b.shapes);
                // The operands are written where they stay: a list built aside and
                // moved in reads its words back before their stores have landed.
                let at = self.arena.len();
                self.arena
                    .push(BodyInstr::of(node, number, SmallVec::new()));
                if !emitted_ids_into(&nd2.operands, &b.local, &mut self.arena[at].operands) {
                    return Err(bad(m, format!("fused operand of '{}' missing", nd2.name())));
                }
                b.local[x2 as usize] = f.len;
                f.len += 1;
                continue;
            }
            let name = self.name_for(nd2, x2, &mut b.named, !self.no_module || is_hero);
            if is_hero {
                hero_name = name.clone().unwrap_or_default();
            }
            if let Some(fcomp) = f.comp.as_mut() {
                let mut ins = self.instr(
                    nd2,
                    name.unwrap_or_default(),
                    b.shapes.get(nd2),
                    &mut b.remapped,
                )?;
                if !ins.attrs.control_predecessors.is_empty() {
                    ins.attrs.control_predecessors.clear();
                }
                let ops = emitted_ids(&nd2.operands, &b.local)
                    .ok_or_else(|| bad(m, format!("fused operand of '{}' missing", ins.name)))?;
                fcomp.add(ins, &ops);
            }
            b.local[x2 as usize] = f.len;
            f.len += 1;
        }
        Ok(hero_name)
    }

    /// Checks and closes the output computation (root, parameters numbered 0..n),
    /// inserts it under the id [`Self::begin_comp`] gave it, and records its kernels.
    fn finish_comp(
        &mut self,
        out: CompOut<'_, 'a>,
        new_ids: &[u32],
    ) -> Result<CompId, CompileError> {
        let m = self.m;
        let CompOut {
            fi,
            fc,
            orig,
            cid,
            mut comp,
            next_id,
            mut params,
            kernels,
            ..
        } = out;
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
        if self.no_module {
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

/// The output computation of one flat computation, while it is emitted.
struct CompOut<'c, 'a> {
    fi: usize,
    fc: &'c FComp<'a>,
    /// The input computation.
    orig: &'a Computation,
    /// Its id in the output module.
    cid: CompId,
    /// None without a module.
    comp: Option<Computation>,
    /// Instructions emitted so far (= next id).
    next_id: u32,
    /// (parameter number, id) of its parameters.
    params: Vec<(i64, u32)>,
    /// (flat node, index in `NodeBuffers::all`) of its kernels, in emission order.
    kernels: Vec<(u32, u32)>,
    ctrl: ControlPreds<'a>,
}

/// A fused computation, while it is emitted.
struct FusedOut {
    /// None without a module; an empty placeholder when listing bodies.
    comp: Option<Computation>,
    /// Instructions so far (= next local id).
    len: u32,
    /// Where its body starts in the arena.
    start: usize,
}

/// Control predecessors survive only if they are emitted earlier under their own name
/// in the same computation (inlining, fusion and renaming can remove them).
struct ControlPreds<'a> {
    /// Some instruction of the computation has control predecessors (never without a module).
    any: bool,
    /// Nodes by input name, of those that keep it.
    by_name: std::collections::HashMap<&'a str, u32>,
    /// Per node: emitted under its own name.
    own_name: Vec<bool>,
}

impl<'a> ControlPreds<'a> {
    fn of(fc: &FComp<'a>, no_module: bool) -> Self {
        let any = !no_module
            && fc.order.iter().any(|&x| {
                fc.nodes[x as usize]
                    .src
                    .map(|s| !s.attrs.control_predecessors.is_empty())
                    .unwrap_or(false)
            });
        let by_name = if any {
            fc.order
                .iter()
                .filter(|&&x| fc.nodes[x as usize].name.is_none())
                .filter_map(|&x| fc.nodes[x as usize].src.map(|s| (s.name.as_str(), x)))
                .collect()
        } else {
            Default::default()
        };
        ControlPreds {
            any,
            by_name,
            own_name: vec![false; if any { fc.nodes.len() } else { 0 }],
        }
    }

    /// Whether control predecessor `p` is kept: emitted already under its own name.
    fn keeps(&self, p: &str, new_ids: &[u32]) -> bool {
        self.by_name
            .get(p)
            .map(|&y| new_ids[y as usize] != NONE && self.own_name[y as usize])
            .unwrap_or(false)
    }
}

/// The output ids of nodes `v` (by `map`); None if one is not emitted.
fn emitted_ids(v: &[u32], map: &[u32]) -> Option<SmallVec<[InstrId; 4]>> {
    let mut out = SmallVec::new();
    emitted_ids_into(v, map, &mut out).then_some(out)
}

/// [`emitted_ids`] appended to `out`, where they are to stay; false if one is missing.
fn emitted_ids_into(v: &[u32], map: &[u32], out: &mut SmallVec<[InstrId; 4]>) -> bool {
    for &o in v {
        let i = map[o as usize];
        if i == NONE {
            return false;
        }
        out.push(NodeIndex::new(i as usize));
    }
    true
}

/// Marks in `live` the nodes live after fusion: from the root, parameters and side
/// effects through operands (a fusion's inputs for its root). A live node absorbed by
/// a fusion is an error.
fn live_after_fusion(
    m: &Module,
    fc: &FComp<'_>,
    plan: &FusionPlan,
    inputs: &FusionInputs,
    live: &mut Vec<bool>,
    stack: &mut Vec<u32>,
) -> Result<(), CompileError> {
    let standalone = |x: u32| plan.standalone.get(x as usize).copied().unwrap_or(true);
    refill(live, fc.nodes.len(), false);
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
            for &i in inputs.of(g) {
                push(i, live, stack);
            }
        } else {
            for &o in &fc.nodes[x as usize].operands {
                push(o, live, stack);
            }
        }
    }
    Ok(())
}

/// Inputs of each fusion of a computation: operands of members outside it, in
/// first-use order.
#[derive(Default)]
struct FusionInputs {
    /// Inputs of every fusion, concatenated; `end[g]` ends fusion g's.
    inputs: Vec<u32>,
    end: Vec<u32>,
    mark: Vec<u32>,
    seen: Vec<u32>,
}

impl FusionInputs {
    fn find(&mut self, fc: &FComp<'_>, plan: &FusionPlan) {
        let n = fc.nodes.len();
        let FusionInputs {
            inputs,
            end,
            mark,
            seen,
        } = self;
        inputs.clear();
        end.clear();
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
            end.push(inputs.len() as u32);
        }
    }

    /// The inputs of fusion `g`.
    fn of(&self, g: u32) -> &[u32] {
        let end = self.end[g as usize] as usize;
        let start = if g == 0 {
            0
        } else {
            self.end[g as usize - 1] as usize
        };
        &self.inputs[start..end]
    }
}

/// Emit the compiled program (by `mode`: the kernel bodies, with or without the
/// skeleton, or the output module) and its kernels in execution order.
pub(crate) fn emit<'a>(
    flat: &mut Flat<'a>,
    plans: &[FusionPlan],
    mode: EmitMode,
    scratch: &mut EmitScratch,
) -> Result<Emitted<'a>, CompileError> {
    let m = flat.module;
    scratch.nodes.all.clear();
    let nflat = flat.comps.len();
    let no_module = matches!(
        mode,
        EmitMode::Program {
            skeleton: false,
            ..
        }
    );
    let bodies = matches!(mode, EmitMode::Program { .. });
    let shapes = !matches!(mode, EmitMode::Program { shapes: false, .. });
    if bodies {
        scratch.nodes.body_nodes.reset(flat);
    }
    // the body lists leave with the bodies: sized as the last compilation's
    let hint = if bodies {
        scratch.nodes.body_sizes
    } else {
        (0, 0)
    };
    let mut e = Emitter {
        m,
        names: &mut flat.names,
        no_module,
        bodies,
        shapes,
        arena: Vec::with_capacity(hint.0),
        nodes: Vec::with_capacity(hint.1),
        new_id: vec![None; m.computations.len()],
        comps: IndexMap::with_capacity(if no_module {
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
                let comp = if no_module {
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
    let module = if no_module {
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
    // Kernels in execution order (as places in `all`, with their call sites).
    let mut out = Vec::new();
    let mut visited = vec![false; nflat];
    if let Some(fe) = flat.flat_of.get(m.entry).copied().flatten() {
        collect(flat, fe, None, &mut kernels, &mut visited, &mut out, 0);
    }
    if bodies {
        scratch.nodes.body_sizes = (arena.len(), nodes.len());
    }
    let mut bodies = KernelBodies {
        instrs: arena,
        nodes,
        parameter_attrs: scratch.nodes.param_attrs.clone(),
        spans: Vec::with_capacity(if bodies { out.len() } else { 0 }),
    };
    // Each kernel moved once, from where it was made to its place in the list.
    let all = &mut scratch.nodes.all;
    let mut kernels = Vec::with_capacity(out.len());
    for (k, site) in out {
        if let Some((mut kernel, span)) = all.get_mut(k as usize).and_then(Option::take) {
            kernel.index = kernels.len();
            kernel.call_site = site;
            bodies.spans.extend(span);
            kernels.push(kernel);
        }
    }
    Ok(Emitted {
        module,
        kernels,
        bodies,
        instructions,
    })
}

/// The kernels of flat computation `fi` and of the loops and conditionals it calls, in
/// execution order, into `out`: each as its place among the kernels made (`kernels`
/// lists a computation's, by node) with the call site it runs under.
fn collect(
    flat: &Flat<'_>,
    fi: usize,
    site: Option<CallSite>,
    kernels: &mut [Vec<(u32, u32)>],
    visited: &mut [bool],
    out: &mut Vec<(u32, Option<CallSite>)>,
    depth: usize,
) {
    if depth > 64 || visited.get(fi).copied().unwrap_or(true) {
        return;
    }
    visited[fi] = true;
    let mine = std::mem::take(&mut kernels[fi]);
    let mut mine = mine.into_iter().peekable();
    out.reserve(mine.len());
    let fc = &flat.comps[fi];
    let cname = &flat.module.comp(fc.comp).name;
    for &x in &fc.order {
        while let Some((_, k)) = mine.next_if(|(kx, _)| *kx == x) {
            out.push((k, site.clone()));
        }
        let nd = &fc.nodes[x as usize];
        let callee = |c: CompId| flat.flat_of.get(c).copied().flatten();
        match nd.opcode {
            Opcode::While => {
                // The loop of the input module: its count is a fact of the source.
                let trip = nd
                    .origin
                    .get()
                    .and_then(|i| flat.table.nodes.get(i))
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
                        collect(flat, f, Some(s), kernels, visited, out, depth + 1);
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
                        collect(flat, f, Some(s), kernels, visited, out, depth + 1);
                    }
                }
            }
            _ => {}
        }
    }
}
