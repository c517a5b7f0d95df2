//! Fast, incremental runtime of layout configurations for the layout collection.
//!
//! Recompiling the whole program for every layout configuration costs tens of
//! milliseconds; the layout collection needs thousands of configurations per second.
//! The evaluator therefore compiles the module once with the default configuration and
//! then re-costs only what a layout choice touches:
//!
//! * the kernel that holds a configured node is re-evaluated with the chosen physical
//!   order of its output and of the operands the node reads from HBM (the kernel's
//!   `KernelDesc` is permuted, not re-lowered);
//! * every kernel-boundary edge at a configured node whose produced layout differs
//!   from the required one costs a physical transpose (`copy`) of that tensor;
//! * a configured node that compiles to no kernel (a `reshape` that became a bitcast)
//!   costs a relayout copy of its output when its layouts differ from the default.
//!
//! `runtime(config) = T_default + Σ_touched mult·(t_new − t_default) + Σ_copies mult·t_copy`.
//!
//! A node's kernel is evaluated with all of its chosen layouts at once. (A separable
//! first-order form — each tensor's effect alone, summed — was tried and rejected: on
//! random configurations its ranking agreed with the joint form at Kendall τ ≈ 0.03.)
//! `tests/layout_eval.rs` measures how the incremental model ranks configurations
//! against recompiling the module and estimating the whole program.
//!
//! [`recompiled_ns`] is that full pipeline for one configuration (layout assignment,
//! fusion, lowering, the estimate of every kernel): the exact label, which
//! `tpusim generate layout --labels recompile` writes instead of the incremental one.

use std::collections::HashMap;

use super::graph::GraphEncoding;

use crate::ir::{CompId, Dims, InstrId, Module, Opcode};
use crate::kernels::{compile_program, LoweredProgram, TileOverrides};
use crate::passes::{
    compile, complete_layout, configurable_nodes, written_minor_to_major, CompilationConfig,
    LayoutEntry, NodeRef, PreparedModule,
};
use crate::tpu::{default_tile, estimate, DimMap, KernelDesc, KernelKind, TpuTarget};

/// A layout choice for one configurable node; `None` = the compiler's choice. Each list
/// is a `minor_to_major` prefix, as TpuGraphs records it (the most-minor dims, most-minor
/// first; a full permutation is the longest prefix); the evaluator completes it with
/// [`complete_layout`] against [`ConfigNode::default_m2m`], as layout assignment does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct NodeChoice {
    pub output: Option<Dims>,
    pub input: Option<Dims>,
    pub kernel: Option<Dims>,
}

impl NodeChoice {
    pub fn is_default(&self) -> bool {
        self.output.is_none() && self.input.is_none() && self.kernel.is_none()
    }
}

/// Why the evaluator could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LayoutEvalError {
    #[error("compiling the default configuration failed: {0}")]
    Compile(String),
    #[error("lowering the compiled program failed: {0}")]
    Lower(String),
    #[error("configurable node '{0}' is not a node of the encoded graph")]
    NotInGraph(String),
}

/// One configurable node as the evaluator sees it.
#[derive(Debug, Clone)]
pub struct ConfigNode {
    /// TpuGraphs node index ([`configurable_nodes`]; a layout entry's `node = N`).
    pub index: usize,
    /// Position in the original module.
    pub comp: CompId,
    pub instr: InstrId,
    pub name: String,
    pub opcode: Opcode,
    /// Ranks of output, operand 0 and operand 1 (0 when absent / not an array).
    pub ranks: [usize; 3],
    /// Default minor_to_major of output, operand 0, operand 1: their layouts in the
    /// original module ([`written_minor_to_major`]), which configured prefixes complete.
    pub default_m2m: [Dims; 3],
    /// Logical dims of output, operand 0, operand 1.
    dims: [Dims; 3],
    elem_bits: [u32; 3],
    /// Kernel of the default compilation holding the node (index into the program).
    kernel: Option<usize>,
    /// For operand 0/1: the kernel input it is read from, if it comes from HBM.
    input_of: [Option<usize>; 2],
    /// Whether the node's output is the kernel's output.
    is_output: bool,
    /// Executions per program run of the node's kernel.
    mult: f64,
}

impl ConfigNode {
    /// A choice with every configured prefix completed to a full `minor_to_major`
    /// ([`complete_layout`] against [`ConfigNode::default_m2m`]).
    pub fn completed(&self, choice: &NodeChoice) -> NodeChoice {
        let full = |c: &Option<Dims>, k: usize| {
            c.as_ref().map(|p| complete_layout(p, &self.default_m2m[k]))
        };
        NodeChoice {
            output: full(&choice.output, 0),
            input: full(&choice.input, 1),
            kernel: full(&choice.kernel, 2),
        }
    }
}

/// Incremental evaluator of layout configurations of one module.
pub struct LayoutEvaluator {
    target: TpuTarget,
    program: LoweredProgram,
    /// Default runtime of the whole program, ns.
    pub default_ns: f64,
    /// Default time of each kernel under the model used for deltas, ns.
    kernel_ns: Vec<f64>,
    pub nodes: Vec<ConfigNode>,
    /// (node, chosen layouts) → time of the node's kernel.
    kernel_cache: HashMap<(usize, u64, u64, u64), f64>,
    /// (node, tensor, layout) → copy time (0 when no copy is needed).
    copy_cache: HashMap<(usize, usize, u64), f64>,
    /// Physical transposes by (dims, from, to, bits).
    transpose_cache: HashMap<(Dims, Dims, Dims, u32), f64>,
}

/// A layout (a permutation of up to 15 dims) packed into a u64: the rank in the low
/// 4 bits, then 4 bits per entry.
fn perm_key(m2m: &[i64]) -> u64 {
    let mut k = (m2m.len() as u64) & 0xF;
    for (i, &d) in m2m.iter().take(15).enumerate() {
        k |= ((d as u64) & 0xF) << (4 * (i + 1));
    }
    k
}

fn elem_bits_of(s: &crate::ir::Shape) -> u32 {
    s.as_array()
        .map(crate::kernels::ops::elem_bits)
        .unwrap_or(32)
}

/// For a new minor_to_major, the permutation `new_pos → old_pos` of physical dims.
fn phys_perm(old_m2m: &[i64], new_m2m: &[i64]) -> Option<Vec<usize>> {
    let r = old_m2m.len();
    if new_m2m.len() != r {
        return None;
    }
    let old_pos = |l: i64| old_m2m.iter().rev().position(|&x| x == l);
    new_m2m.iter().rev().map(|&l| old_pos(l)).collect()
}

impl LayoutEvaluator {
    /// Compile `m` with the default configuration and prepare the incremental model.
    pub fn new(m: &Module, target: &TpuTarget) -> Result<Self, LayoutEvalError> {
        let compiled = compile(m, &CompilationConfig::default())
            .map_err(|e| LayoutEvalError::Compile(e.to_string()))?;
        let program = LoweredProgram::new(&compiled.module)
            .map_err(|e| LayoutEvalError::Lower(e.to_string()))?;
        let est = program
            .estimate(target, &TileOverrides::default())
            .map_err(|e| LayoutEvalError::Lower(e.to_string()))?;
        // Multiplier per kernel name (a kernel may appear in several rows).
        let mut mult: HashMap<&str, f64> = HashMap::new();
        for r in &est.kernels {
            *mult.entry(r.name.as_str()).or_insert(0.0) += r.multiplier;
        }
        let kernel_ns: Vec<f64> = program
            .kernels
            .iter()
            .map(|k| desc_ns(&k.lowered.desc, target).unwrap_or(0.0))
            .collect();
        // Where each original instruction name ended up: (kernel index, instruction in the
        // compiled module's computation, computation).
        let cm = &compiled.module;
        let mut home: HashMap<&str, (usize, CompId, InstrId)> = HashMap::new();
        for (ki, k) in program.kernels.iter().enumerate() {
            let kname = k.lowered.desc.name.as_str();
            let Some(kc) = cm.comp_id(&k.computation) else {
                continue;
            };
            let Some(kid) = cm.comp(kc).find(kname) else {
                continue;
            };
            home.insert(kname, (ki, kc, kid));
            if let Some(fc) = cm
                .comp(kc)
                .instr(kid)
                .attrs
                .called_with(crate::ir::CallRole::Calls)
            {
                let f = cm.comp(fc);
                for &n in &f.order {
                    home.entry(f.instr(n).name.as_str()).or_insert((ki, fc, n));
                }
            }
        }
        let mut nodes = Vec::new();
        for (ci, ii, index) in configurable_nodes(m) {
            let c = m.comp(ci);
            let ins = c.instr(ii);
            let ops = c.operands(ii);
            let shape_of = |k: usize| -> Option<&crate::ir::Shape> {
                match k {
                    0 => Some(&*ins.shape),
                    _ => ops.get(k - 1).map(|&o| &*c.instr(o).shape),
                }
            };
            let mut ranks = [0usize; 3];
            let mut default_m2m: [Dims; 3] = Default::default();
            let mut dims: [Dims; 3] = Default::default();
            let mut elem_bits = [32u32; 3];
            for k in 0..3 {
                if let Some(a) = shape_of(k).and_then(|s| s.as_array()) {
                    ranks[k] = a.rank();
                    default_m2m[k] = written_minor_to_major(a);
                    dims[k] = a.dims.clone();
                    elem_bits[k] = elem_bits_of(shape_of(k).unwrap_or(&ins.shape));
                }
            }
            let mut node = ConfigNode {
                index,
                comp: ci,
                instr: ii,
                name: ins.name.to_string(),
                opcode: ins.opcode,
                ranks,
                default_m2m,
                dims,
                elem_bits,
                kernel: None,
                input_of: [None, None],
                is_output: false,
                mult: 1.0,
            };
            if let Some(&(ki, hc, hid)) = home.get(ins.name.as_str()) {
                let k = &program.kernels[ki];
                node.kernel = Some(ki);
                node.mult = mult
                    .get(k.lowered.desc.name.as_str())
                    .copied()
                    .unwrap_or(1.0);
                let hcomp = cm.comp(hc);
                let fused = hcomp.instr(hid).name != k.lowered.desc.name;
                if fused {
                    // Operands that are fusion parameters are HBM reads.
                    for s in 0..2 {
                        if let Some(op) = hcomp.operand(hid, s) {
                            if let Some(p) = hcomp.instr(op).attrs.parameter_number {
                                node.input_of[s] = k
                                    .lowered
                                    .operand_of_input
                                    .iter()
                                    .position(|&x| x as i64 == p);
                            }
                        }
                    }
                    node.is_output = hid == hcomp.root
                        || k.lowered.hero_name == ins.name
                            && matches!(k.lowered.desc.kind, KernelKind::Mxu(_));
                } else {
                    for s in 0..2 {
                        node.input_of[s] = k.lowered.operand_of_input.iter().position(|&x| x == s);
                    }
                    node.is_output = true;
                }
            }
            nodes.push(node);
        }
        Ok(LayoutEvaluator {
            target: target.clone(),
            default_ns: est.total_ns,
            program,
            kernel_ns,
            nodes,
            kernel_cache: HashMap::new(),
            copy_cache: HashMap::new(),
            transpose_cache: HashMap::new(),
        })
    }

    /// The compilation configuration of a layout configuration (one choice per node, in
    /// `self.nodes` order): a layout entry, by instruction name, for every node with a
    /// choice; an unchosen tensor of such a node is left to the compiler (empty list).
    pub fn compilation_config(&self, config: &[NodeChoice]) -> CompilationConfig {
        let list = |d: &Option<Dims>| d.as_ref().map(|d| d.to_vec()).unwrap_or_default();
        let mut c = CompilationConfig::default();
        for (n, ch) in self.nodes.iter().zip(config) {
            if ch.is_default() {
                continue;
            }
            c.layout.push(LayoutEntry {
                node: NodeRef::Name(n.name.clone()),
                output: list(&ch.output),
                input: list(&ch.input),
                kernel: list(&ch.kernel),
            });
        }
        c
    }

    /// Put the configurable nodes in the order of the encoded graph `g` and return their
    /// node indices in it: a TpuGraphs layout file lists its configurable nodes in
    /// ascending node order (`node_config_ids`) and its configuration rows follow them.
    /// The encoding puts computations in XLA's post order, which is not module order in
    /// optimized HLO. Configurations are given in `self.nodes` order, so this is done
    /// before any is evaluated; the caches, keyed by node position, are emptied.
    pub fn order_as_graph(&mut self, g: &GraphEncoding) -> Result<Vec<i64>, LayoutEvalError> {
        if let Some(n) = self
            .nodes
            .iter()
            .find(|n| g.node_of(n.comp, n.instr).is_none())
        {
            return Err(LayoutEvalError::NotInGraph(n.name.clone()));
        }
        self.nodes
            .sort_by_cached_key(|n| g.node_of(n.comp, n.instr));
        self.kernel_cache.clear();
        self.copy_cache.clear();
        Ok(self
            .nodes
            .iter()
            .filter_map(|n| g.node_of(n.comp, n.instr).map(|x| x as i64))
            .collect())
    }

    /// A copy with empty caches (one per thread).
    pub fn clone_empty(&self) -> Self {
        LayoutEvaluator {
            target: self.target.clone(),
            program: self.program.clone(),
            default_ns: self.default_ns,
            kernel_ns: self.kernel_ns.clone(),
            nodes: self.nodes.clone(),
            kernel_cache: HashMap::new(),
            copy_cache: HashMap::new(),
            transpose_cache: HashMap::new(),
        }
    }

    /// Runtime of a configuration (one choice per node, in `self.nodes` order), ns;
    /// each touched kernel is evaluated under all of its node's chosen layouts at once.
    pub fn runtime_ns(&mut self, config: &[NodeChoice]) -> f64 {
        let mut total = self.default_ns;
        for (i, choice) in config.iter().enumerate().take(self.nodes.len()) {
            if choice.is_default() {
                continue;
            }
            // The full layouts the compiler gives the configured prefixes.
            let full = self.nodes[i].completed(choice);
            let chosen = [&full.output, &full.input, &full.kernel];
            let keys = chosen.map(|c| c.as_deref().map(perm_key).unwrap_or(0));
            let mult = self.nodes[i].mult;
            // Copies on the edges where a chosen layout differs from the default one.
            for (k, m2m) in chosen.iter().enumerate() {
                let Some(m2m) = m2m else { continue };
                let t = match self.copy_cache.get(&(i, k, keys[k])) {
                    Some(&t) => t,
                    None => {
                        let node = &self.nodes[i];
                        let t = if *m2m != node.default_m2m[k] && node.ranks[k] > 1 {
                            let (d, f, b) = (
                                node.dims[k].clone(),
                                node.default_m2m[k].clone(),
                                node.elem_bits[k],
                            );
                            self.copy_ns(&d, &f, m2m, b)
                        } else {
                            0.0
                        };
                        self.copy_cache.insert((i, k, keys[k]), t);
                        t
                    }
                };
                total += mult * t;
            }
            // The node's own kernel under the chosen physical orders (keyed by node: two
            // configured nodes may share a kernel).
            if let Some(ki) = self.nodes[i].kernel {
                let key = (i, keys[0], keys[1], keys[2]);
                let t = match self.kernel_cache.get(&key) {
                    Some(&t) => t,
                    None => {
                        let node = self.nodes[i].clone();
                        let t = self.kernel_ns_with(&node, ki, &full);
                        self.kernel_cache.insert(key, t);
                        t
                    }
                };
                total += mult * (t - self.kernel_ns[ki]);
            }
        }
        total
    }

    /// The node's kernel with its output / HBM operands in the chosen physical order
    /// (`choice` holds full, completed layouts).
    fn kernel_ns_with(&self, node: &ConfigNode, ki: usize, choice: &NodeChoice) -> f64 {
        let base = self.kernel_ns[ki];
        let mut desc = self.program.kernels[ki].lowered.desc.clone();
        for s in 0..2 {
            let chosen = if s == 0 {
                &choice.input
            } else {
                &choice.kernel
            };
            if let (Some(m2m), Some(j)) = (chosen, node.input_of[s]) {
                if let Some(perm) = phys_perm(&node.default_m2m[s + 1], m2m) {
                    if let Some(inp) = desc.inputs.get_mut(j) {
                        if inp.dims.len() == perm.len() {
                            inp.tensor.dims = perm.iter().map(|&p| inp.tensor.dims[p]).collect();
                            inp.dims = perm.iter().map(|&p| inp.dims[p]).collect();
                        }
                    }
                }
            }
        }
        if let (Some(m2m), true) = (&choice.output, node.is_output) {
            if let Some(perm) = phys_perm(&node.default_m2m[0], m2m) {
                if perm.len() == desc.output.dims.len() {
                    permute_output(&mut desc, &perm);
                }
            }
        }
        desc_ns(&desc, &self.target).unwrap_or(base)
    }

    /// A physical transpose of a tensor from one layout to another, ns.
    fn copy_ns(&mut self, dims: &Dims, from: &Dims, to: &Dims, bits: u32) -> f64 {
        let key = (dims.clone(), from.clone(), to.clone(), bits);
        if let Some(&t) = self.transpose_cache.get(&key) {
            return t;
        }
        let t = (|| {
            let in_phys = crate::passes::tiling::physical_dims(dims, from);
            let perm = phys_perm(from, to)?;
            let d = KernelDesc::copy_transpose("copy", &in_phys, &perm, bits).ok()?;
            desc_ns(&d, &self.target)
        })()
        .unwrap_or(0.0);
        self.transpose_cache.insert(key, t);
        t
    }
}

/// Reorder the output (iteration) dims `0..r` of a kernel: new dim `j` is old dim
/// `perm[j]`; inputs' maps and MXU roles follow.
fn permute_output(desc: &mut KernelDesc, perm: &[usize]) {
    let r = perm.len();
    let mut inv = vec![0usize; r];
    for (j, &p) in perm.iter().enumerate() {
        inv[p] = j;
    }
    desc.output.dims = perm.iter().map(|&p| desc.output.dims[p]).collect();
    if let KernelKind::Mxu(spec) = &mut desc.kind {
        if spec.roles.len() == r {
            spec.roles = perm.iter().map(|&p| spec.roles[p]).collect();
        }
    }
    let remap = |d: usize| if d < r { inv[d] } else { d };
    for inp in &mut desc.inputs {
        for m in &mut inp.dims {
            *m = match *m {
                DimMap::Iter(d) => DimMap::Iter(remap(d)),
                DimMap::Window {
                    out,
                    win,
                    stride,
                    dilation,
                } => DimMap::Window {
                    out: remap(out),
                    win: remap(win),
                    stride,
                    dilation,
                },
                DimMap::Outer { iter, inner } => DimMap::Outer {
                    iter: remap(iter),
                    inner,
                },
                DimMap::Full => DimMap::Full,
            };
        }
    }
}

/// Kernel time under its default tile, ns.
fn desc_ns(desc: &KernelDesc, target: &TpuTarget) -> Option<f64> {
    let tile = default_tile(desc, target);
    estimate(desc, &tile, target).ok().map(|e| e.total_ns)
}

/// Runtime of the whole program compiled under `config`, ns: layout assignment and
/// fusion, lowering every kernel ([`compile_program`]), and the estimate of the program
/// under each kernel's default tile — what `tpusim estimate` reports for the module
/// compiled with `config`. `Sync`: call it from many threads on one prepared module.
/// Errors are the failing stage's message.
pub fn recompiled_ns(
    prepared: &PreparedModule,
    config: &CompilationConfig,
    target: &TpuTarget,
) -> Result<f64, String> {
    compile_program(prepared, config)
        .and_then(|c| c.program.total_ns(target, &TileOverrides::default()))
        .map_err(|e| e.to_string())
}
