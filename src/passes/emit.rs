//! Build the output module from the flattened, laid-out computations and the fusion
//! plans (each input instruction is cloned exactly once per place it appears), and list
//! its kernels.

use indexmap::IndexMap;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use std::collections::HashMap;

use super::error::CompileError;
use super::flat::{has_side_effect, CompKind, FComp, FNode, Flat, NONE};
use super::fusion::FusionPlan;
use super::kernel::{CallSite, Kernel, KernelKind, PhysicalShape};
use super::tiling;
use crate::ir::{
    Attrs, CallRole, CompId, Computation, Dims, InstrId, Instruction, Module, Opcode, Shape,
};

/// A kernel before it gets its index and call site.
struct Draft {
    kernel: Kernel,
}

/// Output of the emitter.
pub(crate) struct Emitted {
    pub module: Module,
    pub kernels: Vec<Kernel>,
}

/// Instructions that are not kernels (no code of their own).
pub(crate) fn is_trivial(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        Parameter
            | Constant
            | GetTupleElement
            | Tuple
            | Bitcast
            | While
            | Conditional
            | Call
            | AfterAll
            | AddDependency
            | OptimizationBarrier
            | Domain
            | PartitionId
            | ReplicaId
            | GetDimensionSize
    )
}

/// The shape with the final layouts (TPU tiles attached when `tiles`).
fn laid_out(shape: &Shape, layouts: &[Dims], tiles: bool) -> Shape {
    let mut s = shape.clone();
    let mut k = 0usize;
    fn walk(s: &mut Shape, layouts: &[Dims], k: &mut usize, tiles: bool) {
        match s {
            Shape::Array(a) => {
                let m2m = match layouts.get(*k) {
                    Some(l) if l.len() == a.rank() => l.clone(),
                    _ => tiling::row_major(a.rank()),
                };
                *k += 1;
                if !a.element_type.is_array() {
                    a.layout = None;
                    return;
                }
                a.layout = Some(if tiles {
                    tiling::tpu_layout(a.element_type, &a.dims, &m2m)
                } else {
                    crate::ir::Layout {
                        minor_to_major: m2m,
                        ..Default::default()
                    }
                });
            }
            Shape::Tuple(v) => v.iter_mut().for_each(|e| walk(e, layouts, k, tiles)),
            Shape::Buffer(b) => walk(b, layouts, k, tiles),
        }
    }
    walk(&mut s, layouts, &mut k, tiles);
    s
}

fn bad(m: &Module, msg: impl Into<String>) -> CompileError {
    CompileError::Verify {
        module: m.name.clone(),
        message: msg.into(),
    }
}

fn remap_called(attrs: &mut Attrs, new_id: &[Option<CompId>], m: &Module, who: &str) -> Result<(), CompileError> {
    for (_, c) in attrs.called.iter_mut() {
        *c = new_id
            .get(*c)
            .copied()
            .flatten()
            .ok_or_else(|| bad(m, format!("'{who}' calls a computation that was not emitted")))?;
    }
    Ok(())
}

struct Emitter<'e, 'a> {
    m: &'a Module,
    names: &'e mut super::flat::Namer<'a>,
    new_id: Vec<Option<CompId>>,
    comps: IndexMap<String, Computation>,
    drafts: HashMap<CompId, Vec<Draft>>,
}

impl<'e, 'a> Emitter<'e, 'a> {
    fn instr(&mut self, n: &FNode<'a>, name: String) -> Result<Instruction, CompileError> {
        let shape = laid_out(&n.shape, &n.layouts, true);
        match n.src {
            Some(src) => {
                let mut attrs = src.attrs.clone();
                remap_called(&mut attrs, &self.new_id, self.m, &src.name)?;
                if n.opcode != src.opcode {
                    // transpose/reshape turned into a bitcast
                    attrs.dimensions = None;
                }
                Ok(Instruction {
                    name,
                    opcode: n.opcode,
                    async_wrapped: src.async_wrapped,
                    shape,
                    attrs,
                    line: src.line,
                    col: src.col,
                })
            }
            None => {
                let mut ins = Instruction::new(name, n.opcode, shape);
                if n.opcode == Opcode::GetTupleElement {
                    ins.attrs.tuple_index = Some(n.tuple_index);
                }
                Ok(ins)
            }
        }
    }

    fn insert(&mut self, comp: Computation) -> Result<CompId, CompileError> {
        if self.comps.contains_key(&comp.name) {
            return Err(bad(self.m, format!("two computations named '{}'", comp.name)));
        }
        let id = self.comps.len();
        self.comps.insert(comp.name.clone(), comp);
        Ok(id)
    }

    fn emit_flat(&mut self, fc: &FComp<'a>, plan: &FusionPlan) -> Result<CompId, CompileError> {
        let m = self.m;
        let n = fc.nodes.len();
        let standalone = |x: u32| plan.standalone.get(x as usize).copied().unwrap_or(true);
        // Inputs of each fusion: operands of members outside it, in first-use order.
        let mut inputs: Vec<Vec<u32>> = Vec::with_capacity(plan.groups.len());
        let mut mark = vec![u32::MAX; n];
        for (g, gp) in plan.groups.iter().enumerate() {
            for &x in &gp.members {
                mark[x as usize] = g as u32;
            }
            let mut v: Vec<u32> = Vec::new();
            for &x in &gp.members {
                for &o in &fc.nodes[x as usize].operands {
                    if mark[o as usize] != g as u32 && !v.contains(&o) {
                        v.push(o);
                    }
                }
            }
            inputs.push(v);
        }
        // Liveness after fusion.
        let mut live = vec![false; n];
        let mut stack: Vec<u32> = Vec::new();
        let push = |x: u32, live: &mut Vec<bool>, stack: &mut Vec<u32>| {
            if !live[x as usize] {
                live[x as usize] = true;
                stack.push(x);
            }
        };
        push(fc.root, &mut live, &mut stack);
        for &x in &fc.order {
            let nd = &fc.nodes[x as usize];
            if standalone(x)
                && (nd.opcode == Opcode::Parameter || nd.src.map(has_side_effect).unwrap_or(false))
            {
                push(x, &mut live, &mut stack);
            }
        }
        while let Some(x) = stack.pop() {
            if !standalone(x) {
                return Err(bad(m, format!("'{}' is used outside the fusion that absorbed it", fc.nodes[x as usize].name())));
            }
            let g = plan.group_at.get(x as usize).copied().unwrap_or(NONE);
            if g != NONE {
                for &i in &inputs[g as usize] {
                    push(i, &mut live, &mut stack);
                }
            } else {
                for &o in &fc.nodes[x as usize].operands {
                    push(o, &mut live, &mut stack);
                }
            }
        }

        let orig = m.comp(fc.comp);
        let mut comp = Computation::new(orig.name.clone());
        let nlive = live.iter().filter(|&&l| l).count();
        comp.graph = StableDiGraph::with_capacity(nlive, nlive * 2);
        comp.execution_thread = orig.execution_thread.clone();
        comp.line = orig.line;
        let mut new_ids: Vec<InstrId> = vec![NodeIndex::end(); n];
        let mut named = vec![false; n];
        let mut params: Vec<(i64, InstrId)> = Vec::new();
        let mut drafts: Vec<Draft> = Vec::new();
        let mut local: Vec<InstrId> = vec![NodeIndex::end(); n];
        for &x in &fc.order {
            if !live[x as usize] {
                continue;
            }
            let nd = &fc.nodes[x as usize];
            let g = plan.group_at.get(x as usize).copied().unwrap_or(NONE);
            if g == NONE {
                let name = self.name_for(nd, x, &mut named);
                let ins = self.instr(nd, name)?;
                let ops: Vec<InstrId> = nd.operands.iter().map(|&o| new_ids[o as usize]).collect();
                if ops.iter().any(|o| *o == NodeIndex::end()) {
                    return Err(bad(m, format!("operand of '{}' was not emitted", ins.name)));
                }
                let is_kernel = !is_trivial(ins.opcode);
                let opcode = ins.opcode;
                if opcode == Opcode::Parameter {
                    params.push((ins.attrs.parameter_number.unwrap_or(-1), NodeIndex::end()));
                }
                let id = comp.add(ins, &ops);
                if let Some(p) = params.last_mut() {
                    if p.1 == NodeIndex::end() && opcode == Opcode::Parameter {
                        p.1 = id;
                    }
                }
                new_ids[x as usize] = id;
                if is_kernel {
                    let ins = comp.instr(id);
                    let parameters: Vec<PhysicalShape> = ops
                        .iter()
                        .flat_map(|&o| comp.instr(o).shape.leaves().into_iter().map(PhysicalShape::of).collect::<Vec<_>>())
                        .collect();
                    drafts.push(Draft {
                        kernel: Kernel {
                            index: 0,
                            name: ins.name.clone(),
                            kind: KernelKind::Unfused,
                            hero: ins.opcode,
                            hero_name: ins.name.clone(),
                            computation: 0,
                            computation_name: comp.name.clone(),
                            instruction: id.index() as u32,
                            fused_computation: None,
                            hero_operands: parameters.clone(),
                            parameters,
                            outputs: ins.shape.leaves().into_iter().map(PhysicalShape::of).collect(),
                            tile: None,
                            instruction_count: 1,
                            call_site: None,
                        },
                    });
                }
                continue;
            }
            // A fusion.
            let gp = &plan.groups[g as usize];
            let fname = self.names.fresh("fused_computation");
            let mut f = Computation::new(fname);
            let size = gp.members.len() + inputs[g as usize].len();
            f.graph = StableDiGraph::with_capacity(size, size * 2);
            let mut parameters = Vec::new();
            for (i, &inp) in inputs[g as usize].iter().enumerate() {
                let on = &fc.nodes[inp as usize];
                let shape = laid_out(&on.shape, &on.layouts, true);
                parameters.extend(shape.leaves().into_iter().map(PhysicalShape::of));
                let mut p = Instruction::new(self.names.fresh(&format!("param_{i}")), Opcode::Parameter, shape);
                p.attrs.parameter_number = Some(i as i64);
                let id = f.add(p, &[]);
                f.params.push(id);
                local[inp as usize] = id;
            }
            for &x2 in &gp.members {
                let nd2 = &fc.nodes[x2 as usize];
                let name = self.name_for(nd2, x2, &mut named);
                let ins = self.instr(nd2, name)?;
                let mut ops: Vec<InstrId> = Vec::with_capacity(nd2.operands.len());
                for &o in &nd2.operands {
                    match local[o as usize] {
                        id if id != NodeIndex::end() => ops.push(id),
                        _ => return Err(bad(m, format!("fused operand of '{}' missing", ins.name))),
                    }
                }
                let id = f.add(ins, &ops);
                local[x2 as usize] = id;
            }
            f.root = local[gp.root as usize];
            let hero_local = Some(local[gp.hero as usize]).filter(|h| *h != NodeIndex::end());
            for &x2 in gp.members.iter().chain(&inputs[g as usize]) {
                local[x2 as usize] = NodeIndex::end();
            }
            if f.root == NodeIndex::end() {
                return Err(bad(m, "fusion root missing"));
            }
            let hero_operands: Vec<PhysicalShape> = hero_local
                .map(|h| {
                    f.operands(h)
                        .iter()
                        .flat_map(|&o| f.instr(o).shape.leaves().into_iter().map(PhysicalShape::of).collect::<Vec<_>>())
                        .collect()
                })
                .unwrap_or_default();
            let (hero_op, hero_name) = hero_local
                .map(|h| (f.instr(h).opcode, f.instr(h).name.clone()))
                .unwrap_or((Opcode::Fusion, String::new()));
            let count = f.len() - f.params.len();
            let root_shape = f.instr(f.root).shape.clone();
            let fid = self.insert(f)?;
            let mut fu = Instruction::new(self.names.fresh("fusion"), Opcode::Fusion, root_shape);
            fu.attrs.fusion_kind = Some(gp.kind);
            fu.attrs.called.push((CallRole::Calls, fid));
            if let Some(md) = fc.nodes[gp.hero as usize].src.and_then(|s| s.attrs.metadata.clone()) {
                fu.attrs.metadata = Some(md);
            }
            let ops: Vec<InstrId> = inputs[g as usize].iter().map(|&o| new_ids[o as usize]).collect();
            if ops.iter().any(|o| *o == NodeIndex::end()) {
                return Err(bad(m, format!("an operand of fusion '{}' was not emitted", fu.name)));
            }
            let id = comp.add(fu, &ops);
            new_ids[x as usize] = id;
            let ins = comp.instr(id);
            drafts.push(Draft {
                kernel: Kernel {
                    index: 0,
                    name: ins.name.clone(),
                    kind: KernelKind::from_fusion(gp.kind),
                    hero: hero_op,
                    hero_name,
                    computation: 0,
                    computation_name: comp.name.clone(),
                    instruction: id.index() as u32,
                    fused_computation: Some(fid),
                    parameters,
                    outputs: ins.shape.leaves().into_iter().map(PhysicalShape::of).collect(),
                    hero_operands,
                    tile: None,
                    instruction_count: count,
                    call_site: None,
                },
            });
        }
        comp.root = new_ids
            .get(fc.root as usize)
            .copied()
            .filter(|r| *r != NodeIndex::end())
            .ok_or_else(|| bad(m, format!("root of '{}' not emitted", orig.name)))?;
        params.sort_by_key(|p| p.0);
        for (k, (num, id)) in params.iter().enumerate() {
            if *num != k as i64 {
                return Err(bad(m, format!("parameters of '{}' are not numbered 0..n", orig.name)));
            }
            comp.params.push(*id);
        }
        let cid = self.insert(comp)?;
        for d in &mut drafts {
            d.kernel.computation = cid;
        }
        self.drafts.insert(cid, drafts);
        Ok(cid)
    }

    fn name_for(&mut self, nd: &FNode<'a>, x: u32, named: &mut [bool]) -> String {
        if !named[x as usize] {
            named[x as usize] = true;
            nd.name().to_string()
        } else {
            self.names.fresh(nd.name())
        }
    }
}

/// Emit the compiled module and its kernels in execution order.
pub(crate) fn emit(flat: &mut Flat<'_>, plans: &[FusionPlan]) -> Result<Emitted, CompileError> {
    let m = flat.module;
    let mut e = Emitter {
        m,
        names: &mut flat.names,
        new_id: vec![None; m.computations.len()],
        comps: IndexMap::with_capacity(m.computations.len() + 64),
        drafts: HashMap::new(),
    };
    for c in 0..m.computations.len() {
        match flat.kinds[c] {
            CompKind::Dropped => {}
            CompKind::Embedded => {
                let mut comp = m.comp(c).clone();
                for &id in &comp.order.clone() {
                    let name = comp.instr(id).name.clone();
                    remap_called(&mut comp.instr_mut(id).attrs, &e.new_id, m, &name)?;
                }
                e.new_id[c] = Some(e.insert(comp)?);
            }
            CompKind::Flat => {
                let fi = flat.flat_of[c].ok_or_else(|| bad(m, "flat computation missing"))?;
                let cid = e.emit_flat(&flat.comps[fi], &plans[fi])?;
                e.new_id[c] = Some(cid);
            }
        }
    }
    let entry = e.new_id[m.entry].ok_or_else(|| bad(m, "entry computation not emitted"))?;
    let Emitter { comps, mut drafts, .. } = e;
    let mut module = Module {
        name: m.name.clone(),
        attrs: m.attrs.clone(),
        stack_frames: m.stack_frames.clone(),
        computations: comps,
        entry,
    };
    module.attrs.is_scheduled = false;
    {
        let ec = module.entry();
        let params: Vec<Shape> = ec.params.iter().map(|&p| ec.instr(p).shape.clone()).collect();
        let result = ec.instr(ec.root).shape.clone();
        module.attrs.entry_computation_layout = Some((params, result));
    }
    // Kernels in execution order.
    let mut kernels = Vec::new();
    let mut visited = vec![false; module.computations.len()];
    collect(&module, entry, None, &mut drafts, &mut visited, &mut kernels, 0);
    for (i, k) in kernels.iter_mut().enumerate() {
        k.index = i;
    }
    Ok(Emitted { module, kernels })
}

fn collect(
    m: &Module,
    c: CompId,
    site: Option<CallSite>,
    drafts: &mut HashMap<CompId, Vec<Draft>>,
    visited: &mut [bool],
    out: &mut Vec<Kernel>,
    depth: usize,
) {
    if depth > 64 || visited.get(c).copied().unwrap_or(true) {
        return;
    }
    visited[c] = true;
    let mine: HashMap<u32, Kernel> = drafts
        .remove(&c)
        .unwrap_or_default()
        .into_iter()
        .map(|d| (d.kernel.instruction, d.kernel))
        .collect();
    let mut mine = mine;
    let comp = m.comp(c);
    for &id in &comp.order {
        if let Some(mut k) = mine.remove(&(id.index() as u32)) {
            k.call_site = site.clone();
            out.push(k);
        }
        let ins = comp.instr(id);
        match ins.opcode {
            Opcode::While => {
                let trip = while_trip_count(m, comp, id);
                for (role, label) in [(CallRole::Condition, "condition"), (CallRole::Body, "body")] {
                    if let Some(callee) = ins.attrs.called_with(role) {
                        let s = CallSite {
                            computation: comp.name.clone(),
                            instruction: ins.name.clone(),
                            role: label.to_string(),
                            trip_count: trip,
                        };
                        collect(m, callee, Some(s), drafts, visited, out, depth + 1);
                    }
                }
            }
            Opcode::Conditional => {
                for (k, &(_, callee)) in ins.attrs.called.iter().enumerate() {
                    let s = CallSite {
                        computation: comp.name.clone(),
                        instruction: ins.name.clone(),
                        role: format!("branch {k}"),
                        trip_count: None,
                    };
                    collect(m, callee, Some(s), drafts, visited, out, depth + 1);
                }
            }
            _ => {}
        }
    }
}

fn scalar_int(c: &Computation, id: InstrId) -> Option<i64> {
    let ins = c.instr(id);
    match ins.opcode {
        Opcode::Constant if ins.shape.rank() == 0 => ins.attrs.literal.as_deref()?.trim().parse().ok(),
        Opcode::Convert | Opcode::Copy | Opcode::Bitcast => scalar_int(c, c.operand(id, 0)?),
        _ => None,
    }
}

/// Index `k` if `id` is `get-tuple-element(parameter(0)), index=k`.
fn param_elem(c: &Computation, id: InstrId) -> Option<i64> {
    let ins = c.instr(id);
    if ins.opcode != Opcode::GetTupleElement {
        return None;
    }
    let p = c.operand(id, 0)?;
    (c.instr(p).opcode == Opcode::Parameter).then_some(())?;
    ins.attrs.tuple_index
}

/// Trip count of a counted while loop: `i = init; while (i < limit) { i += step }`
/// (also `>`, `<=`, `>=`, `!=`), all three values compile-time scalars.
pub fn while_trip_count(m: &Module, parent: &Computation, w: InstrId) -> Option<u64> {
    let ins = parent.instr(w);
    let cond = m.comp(ins.attrs.called_with(CallRole::Condition)?);
    let body = m.comp(ins.attrs.called_with(CallRole::Body)?);
    let croot = cond.instr(cond.root);
    if croot.opcode != Opcode::Compare {
        return None;
    }
    let (a, b) = (cond.operand(cond.root, 0)?, cond.operand(cond.root, 1)?);
    let (k, limit, flipped) = match (param_elem(cond, a), param_elem(cond, b)) {
        (Some(k), None) => (k, scalar_int(cond, b)?, false),
        (None, Some(k)) => (k, scalar_int(cond, a)?, true),
        _ => return None,
    };
    let init_tuple = parent.operand(w, 0)?;
    if parent.instr(init_tuple).opcode != Opcode::Tuple {
        return None;
    }
    let init = scalar_int(parent, parent.operand(init_tuple, usize::try_from(k).ok()?)?)?;
    let broot = body.instr(body.root);
    if broot.opcode != Opcode::Tuple {
        return None;
    }
    let upd = body.operand(body.root, usize::try_from(k).ok()?)?;
    let ui = body.instr(upd);
    let step = match ui.opcode {
        Opcode::Add => {
            let (x, y) = (body.operand(upd, 0)?, body.operand(upd, 1)?);
            match (param_elem(body, x), param_elem(body, y)) {
                (Some(j), None) if j == k => scalar_int(body, y)?,
                (None, Some(j)) if j == k => scalar_int(body, x)?,
                _ => return None,
            }
        }
        _ => return None,
    };
    use crate::ir::Comparison::*;
    let dir = croot.attrs.comparison?;
    // Normalise to `i <dir> limit`.
    let dir = if flipped {
        match dir {
            Lt => Gt,
            Gt => Lt,
            Le => Ge,
            Ge => Le,
            d => d,
        }
    } else {
        dir
    };
    let n = match dir {
        Lt if step > 0 => (limit - init).max(0).div_euclid(step) + ((limit - init).max(0) % step != 0) as i64,
        Le if step > 0 => (limit - init + 1).max(0).div_euclid(step) + ((limit - init + 1).max(0) % step != 0) as i64,
        Gt if step < 0 => (init - limit).max(0).div_euclid(-step) + ((init - limit).max(0) % -step != 0) as i64,
        Ge if step < 0 => (init - limit + 1).max(0).div_euclid(-step) + ((init - limit + 1).max(0) % -step != 0) as i64,
        Ne if step != 0 && (limit - init) % step == 0 && (limit - init) / step >= 0 => (limit - init) / step,
        _ => return None,
    };
    u64::try_from(n).ok()
}
