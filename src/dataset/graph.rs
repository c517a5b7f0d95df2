//! A module as a TpuGraphs graph: nodes, opcodes, features, edges and `node_splits`
//! (spec §1.4–§1.5, `tpu_graphs/process_data/xla/hlo_encoder.cc::EncodeHloModule`).
//!
//! * One node per instruction. Node order = computations in the order XLA serialises
//!   them (callees before callers, entry last; see [`computation_order`]), and inside a
//!   computation the order of `HloComputationProto.instructions`
//!   (`HloComputation::MakeInstructionPostOrder`, see [`NodeOrder`]).
//! * Edges `[u, v]`: u uses v. One per distinct operand, plus one from an instruction to
//!   the root of each computation it calls. Rows are sorted lexicographically and unique.
//! * `node_splits`: starts with 0; after each computation whose name contains
//!   `cluster`, `while` or `cond` the running node count is appended; the total is
//!   appended if the last value is below it.

use petgraph::visit::{EdgeRef, NodeIndexable};
use petgraph::Direction;
use smallvec::SmallVec;
use thiserror::Error;

use super::features::{write_node_features, FeatureOptions, NODE_FEATURE_COUNT};
use super::opcodes::opcode_id;
use crate::ir::{CallRole, CompId, Computation, InstrId, Instruction, Module, Opcode};

/// How instructions are ordered inside a computation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NodeOrder {
    /// What `HloComputation::ToProto` writes: `MakeInstructionPostOrder` (DFS from every
    /// user-less instruction in program order, operands in slot order, then control
    /// predecessors). For unscheduled modules printed by XLA this is the text order
    /// (checked on the JAX corpus and its `.hlo.pb` files); for scheduled modules it
    /// differs from the schedule.
    #[default]
    XlaPostOrder,
    /// Instructions in program (text) order.
    Program,
}

/// Options of [`encode_graph_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncodeOptions {
    /// −1 padding of the no-aggregate feature lists (see [`FeatureOptions`]).
    pub pad_minus_one: bool,
    pub order: NodeOrder,
}

/// Errors of graph encoding (malformed IR).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GraphError {
    #[error("instruction '{instr}' in computation '{comp}' calls computation #{callee}, but the module has only {count} computations")]
    DanglingCallee {
        comp: String,
        instr: String,
        callee: CompId,
        count: usize,
    },
    #[error("computation '{0}' has no root instruction")]
    NoRoot(String),
    #[error("computation '{0}' calls itself (directly or through other computations); HLO call graphs must be acyclic")]
    CallCycle(String),
    #[error("entry computation #{entry} does not exist (the module has {count} computations)")]
    BadEntry { entry: CompId, count: usize },
    #[error("the module has {0} instructions; at most {max} are supported", max = u32::MAX - 1)]
    TooManyNodes(usize),
}

/// A module encoded as TpuGraphs arrays (before writing to npz).
#[derive(Debug, Clone, PartialEq)]
pub struct GraphEncoding {
    /// `node_opcode` (n,), TpuGraphs opcode ids.
    pub node_opcode: Vec<u8>,
    /// `node_feat` (n, 140), row-major.
    pub node_feat: Vec<f32>,
    /// `edge_index` (m, 2): `[user, operand]`, sorted, unique.
    pub edge_index: Vec<[i64; 2]>,
    /// `node_splits` as a flat list (write it with shape (1, s)).
    pub node_splits: Vec<i64>,
    /// Node k = instruction `nodes[k].1` of computation `nodes[k].0`.
    pub nodes: Vec<(CompId, InstrId)>,
    /// Computations in node order.
    pub comp_order: Vec<CompId>,
    /// Per computation, node index by `InstrId::index()` (`u32::MAX` = not a node).
    node_of: Vec<Vec<u32>>,
}

impl GraphEncoding {
    /// Number of nodes n.
    pub fn num_nodes(&self) -> usize {
        self.node_opcode.len()
    }

    /// Node index of an instruction.
    pub fn node_of(&self, comp: CompId, instr: InstrId) -> Option<usize> {
        let v = *self.node_of.get(comp)?.get(instr.index())?;
        (v != u32::MAX).then_some(v as usize)
    }

    /// Feature row of node `k`.
    pub fn features(&self, k: usize) -> Option<&[f32]> {
        self.node_feat
            .get(k * NODE_FEATURE_COUNT..(k + 1) * NODE_FEATURE_COUNT)
    }

    /// Feature `col` of node `k`.
    pub fn feature(&self, k: usize, col: usize) -> Option<f32> {
        if col >= NODE_FEATURE_COUNT {
            return None;
        }
        self.node_feat.get(k * NODE_FEATURE_COUNT + col).copied()
    }

    /// Node index of instruction `name` in computation `comp` (linear scan; for tests
    /// and tools).
    pub fn node_by_name(&self, m: &Module, comp: &str, name: &str) -> Option<usize> {
        let cid = m.comp_id(comp)?;
        let id = m.comp(cid).find(name)?;
        self.node_of(cid, id)
    }
}

/// Encode with the official defaults (0 padding, XLA serialisation order).
pub fn encode_graph(m: &Module) -> Result<GraphEncoding, GraphError> {
    encode_graph_with(m, &EncodeOptions::default())
}

/// Called computations of an instruction in XLA's `called_computations()` order
/// (a while stores body before condition; everything else as written).
fn xla_callees(instr: &Instruction) -> SmallVec<[CompId; 2]> {
    let c = &instr.attrs.called;
    if instr.opcode == Opcode::While {
        let mut v: SmallVec<[CompId; 2]> = c
            .iter()
            .filter(|(r, _)| *r == CallRole::Body)
            .map(|(_, id)| *id)
            .collect();
        v.extend(
            c.iter()
                .filter(|(r, _)| *r != CallRole::Body)
                .map(|(_, id)| *id),
        );
        v
    } else {
        c.iter().map(|(_, id)| *id).collect()
    }
}

/// Validate callee ids and return, per computation, the computations its instructions
/// call (program order, XLA order within an instruction).
fn call_lists(m: &Module) -> Result<Vec<Vec<CompId>>, GraphError> {
    let n = m.computations.len();
    let mut out = Vec::with_capacity(n);
    for comp in m.computations.values() {
        let mut v = Vec::new();
        for &id in &comp.order {
            let instr = &comp.graph[id];
            for c in xla_callees(instr) {
                if c >= n {
                    return Err(GraphError::DanglingCallee {
                        comp: comp.name.clone(),
                        instr: instr.name.to_string(),
                        callee: c,
                        count: n,
                    });
                }
                v.push(c);
            }
        }
        out.push(v);
    }
    Ok(out)
}

/// `HloModule::MakeComputationPostOrder`: for every computation nobody calls, in module
/// order, its not-yet-listed callees in DFS post-order, then itself.
fn xla_computation_post_order(
    m: &Module,
    calls: &[Vec<CompId>],
) -> Result<Vec<CompId>, GraphError> {
    let n = m.computations.len();
    let mut called = vec![false; n];
    for v in calls {
        for &c in v {
            called[c] = true;
        }
    }
    // 0 = new, 1 = on the DFS stack, 2 = listed.
    let mut state = vec![0u8; n];
    let mut out = Vec::with_capacity(n);
    let mut stack: Vec<(CompId, usize)> = Vec::new();
    for root in (0..n).filter(|&c| !called[c]) {
        state[root] = 1;
        stack.push((root, 0));
        while let Some(top) = stack.last_mut() {
            let (c, i) = *top;
            match calls[c].get(i) {
                Some(&d) => {
                    top.1 += 1;
                    match state[d] {
                        0 => {
                            state[d] = 1;
                            stack.push((d, 0));
                        }
                        1 => return Err(GraphError::CallCycle(m.comp(d).name.clone())),
                        _ => {}
                    }
                }
                None => {
                    state[c] = 2;
                    out.push(c);
                    stack.pop();
                }
            }
        }
    }
    if let Some(c) = (0..n).find(|&c| state[c] != 2) {
        return Err(GraphError::CallCycle(m.comp(c).name.clone()));
    }
    Ok(out)
}

/// Computation order (the same for both [`NodeOrder`]s): module order when it already
/// has callees before callers and the entry last — which is what XLA writes (checked:
/// `HloModuleProto.computations` of the JAX corpus `.hlo.pb` files is in text order,
/// which is not a DFS post order) — else `MakeComputationPostOrder` of 2023 XLA (DFS
/// post order from each uncalled computation), with the entry moved last.
pub fn computation_order(m: &Module) -> Result<Vec<CompId>, GraphError> {
    let n = m.computations.len();
    if n > 0 && m.entry >= n {
        return Err(GraphError::BadEntry {
            entry: m.entry,
            count: n,
        });
    }
    // Fast path: every call goes to an earlier computation (so the call graph is
    // acyclic) and the entry is last.
    let mut module_order_ok = n == 0 || m.entry == n - 1;
    for (c, comp) in m.computations.values().enumerate() {
        for &id in &comp.order {
            for &(_, d) in &comp.graph[id].attrs.called {
                if d >= n {
                    return Err(GraphError::DanglingCallee {
                        comp: comp.name.clone(),
                        instr: comp.graph[id].name.to_string(),
                        callee: d,
                        count: n,
                    });
                }
                module_order_ok &= d < c;
            }
        }
    }
    if module_order_ok {
        return Ok((0..n).collect());
    }
    let calls = call_lists(m)?;
    let mut post = xla_computation_post_order(m, &calls)?;
    if n > 0 && !calls.iter().any(|v| v.contains(&m.entry)) {
        post.retain(|&c| c != m.entry);
        post.push(m.entry);
    }
    Ok(post)
}

/// `HloComputation::MakeInstructionPostOrder`: DFS from each user-less instruction in
/// program order; a node is emitted once its operands (slot order) and control
/// predecessors are. Channel dependencies between send/recv pairs are not modelled.
pub fn xla_instruction_post_order(comp: &Computation) -> Vec<InstrId> {
    let g = &comp.graph;
    let bound = g.node_bound();
    let has_ctrl = comp
        .order
        .iter()
        .any(|&id| !g[id].attrs.control_predecessors.is_empty());
    let names = if has_ctrl {
        Some(comp.name_index())
    } else {
        None
    };
    // 0 = new, 1 = visiting, 2 = emitted.
    let mut state = vec![0u8; bound];
    let mut out = Vec::with_capacity(comp.order.len());
    let mut stack: Vec<InstrId> = Vec::new();
    let mut ops: Vec<(u32, InstrId)> = Vec::new();
    for &start in &comp.order {
        if g.edges_directed(start, Direction::Outgoing)
            .next()
            .is_some()
        {
            continue;
        }
        stack.push(start);
        while let Some(&cur) = stack.last() {
            let Some(st) = state.get_mut(cur.index()) else {
                stack.pop();
                continue;
            };
            match *st {
                0 => {
                    *st = 1;
                    // Operands in slot order, pushed reversed so slot 0 is visited first.
                    ops.clear();
                    ops.extend(
                        g.edges_directed(cur, Direction::Incoming)
                            .map(|e| (*e.weight(), e.source())),
                    );
                    ops.sort_unstable();
                    stack.extend(ops.iter().rev().map(|&(_, id)| id));
                    if let Some(names) = &names {
                        for p in &g[cur].attrs.control_predecessors {
                            if let Some(&pid) = names.get(p.as_str()) {
                                stack.push(pid);
                            }
                        }
                    }
                }
                1 => {
                    *st = 2;
                    out.push(cur);
                    stack.pop();
                }
                _ => {
                    stack.pop();
                }
            }
        }
    }
    // Instructions on a use cycle (invalid HLO) are never user-less roots; keep them
    // in program order so every instruction is a node.
    if out.len() < comp.order.len() {
        for &id in &comp.order {
            if state.get(id.index()) != Some(&2) {
                out.push(id);
            }
        }
    }
    out
}

/// Encode a module with options.
pub fn encode_graph_with(m: &Module, opts: &EncodeOptions) -> Result<GraphEncoding, GraphError> {
    let comp_order = computation_order(m)?;
    let total = m.instruction_count();
    if total >= u32::MAX as usize {
        return Err(GraphError::TooManyNodes(total));
    }
    for c in m.computations.values() {
        if !c.is_empty() && c.graph.node_weight(c.root).is_none() {
            return Err(GraphError::NoRoot(c.name.clone()));
        }
    }

    // Node numbering.
    let mut node_of: Vec<Vec<u32>> = m
        .computations
        .values()
        .map(|c| vec![u32::MAX; c.graph.node_bound()])
        .collect();
    let mut nodes: Vec<(CompId, InstrId)> = Vec::with_capacity(total);
    let mut node_splits = vec![0i64];
    for &cid in &comp_order {
        let comp = m.comp(cid);
        let order_buf;
        let order: &[InstrId] = match opts.order {
            NodeOrder::Program => &comp.order,
            NodeOrder::XlaPostOrder => {
                order_buf = xla_instruction_post_order(comp);
                &order_buf
            }
        };
        for &id in order {
            if let Some(slot) = node_of[cid].get_mut(id.index()) {
                *slot = nodes.len() as u32;
            }
            nodes.push((cid, id));
        }
        let name = comp.name.as_str();
        if name.contains("cluster") || name.contains("while") || name.contains("cond") {
            node_splits.push(nodes.len() as i64);
        }
    }
    let n = nodes.len();
    if node_splits.last().is_some_and(|&l| l < n as i64) {
        node_splits.push(n as i64);
    }

    // Root node of each computation.
    let root_node: Vec<Option<u32>> = m
        .computations
        .values()
        .enumerate()
        .map(|(cid, c)| {
            node_of[cid]
                .get(c.root.index())
                .copied()
                .filter(|&v| v != u32::MAX)
        })
        .collect();

    let fopts = FeatureOptions {
        pad_minus_one: opts.pad_minus_one,
    };
    let mut node_opcode = Vec::with_capacity(n);
    // Every column of a row is written, so rows are appended without zero-filling.
    let mut node_feat: Vec<f32> = Vec::with_capacity(n * NODE_FEATURE_COUNT);
    let mut row = [0.0f32; NODE_FEATURE_COUNT];
    let mut edge_index: Vec<[i64; 2]> = Vec::with_capacity(n * 2);
    let mut targets: Vec<i64> = Vec::with_capacity(16);
    for (u, &(cid, id)) in nodes.iter().enumerate() {
        let comp = m.comp(cid);
        let instr = &comp.graph[id];
        node_opcode.push(opcode_id(instr));
        write_node_features(instr, id == comp.root, fopts, &mut row);
        node_feat.extend_from_slice(&row);

        targets.clear();
        let map = &node_of[cid];
        for e in comp.graph.edges_directed(id, Direction::Incoming) {
            if let Some(&v) = map.get(e.source().index()) {
                if v != u32::MAX {
                    targets.push(v as i64);
                }
            }
        }
        for &(_, callee) in &instr.attrs.called {
            if let Some(Some(r)) = root_node.get(callee) {
                targets.push(*r as i64);
            }
        }
        targets.sort_unstable();
        targets.dedup();
        let u = u as i64;
        edge_index.extend(targets.iter().filter(|&&v| v != u).map(|&v| [u, v]));
    }

    Ok(GraphEncoding {
        node_opcode,
        node_feat,
        edge_index,
        node_splits,
        nodes,
        comp_order,
        node_of,
    })
}
