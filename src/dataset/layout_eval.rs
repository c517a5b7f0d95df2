//! The layout configurations of a module and their runtime.
//!
//! [`LayoutEvaluator`] lists a module's configurable nodes (the TpuGraphs layout
//! nodes, [`configurable_nodes`]), turns a configuration (one [`NodeChoice`] per node)
//! into the [`CompilationConfig`] that `tpusim compile|estimate --config` read, and gives
//! its runtime by the one model: the module compiled under that configuration (layout
//! assignment, fusion), every kernel lowered and estimated ([`recompiled_ns`]). So every
//! label `generate layout` writes is what `tpusim estimate --config` prints for it, to the
//! nanosecond (`tests/layout_eval.rs`, `tests/generate.rs`).

use super::graph::GraphEncoding;

use crate::ir::{CompId, Dims, InstrId, Module, Opcode};
use crate::kernels::program::{compiled_total_ns, remembered_total_ns, timed_total_ns};
use crate::kernels::{KernelMemo, KernelTimes, ProgramError};
use crate::passes::{
    complete_layout, configurable_nodes, written_minor_to_major, CompilationConfig, LayoutEntry,
    NodeRef, PreparedModule,
};
use crate::tpu::TpuTarget;

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

/// Why configurable nodes cannot be put in graph order.
#[derive(Debug, thiserror::Error)]
pub enum LayoutEvalError {
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

/// The layout configurations of one module: its configurable nodes, and the runtime of
/// a configuration on a target.
pub struct LayoutEvaluator {
    /// The kernels of the configurations evaluated so far ([`KernelMemo`]), when
    /// configurations are evaluated through it.
    memo: KernelMemo,
    /// The times of small kernel bodies, when configurations are not evaluated through
    /// the memo ([`KernelTimes`]).
    times: KernelTimes,
    remember: bool,
    /// The configurable nodes, in the order configurations list their choices.
    pub nodes: Vec<ConfigNode>,
}

impl LayoutEvaluator {
    /// The configurable nodes of `m`, in module order, with their default layouts.
    pub fn new(m: &Module, target: &TpuTarget) -> Self {
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
            for k in 0..3 {
                if let Some(a) = shape_of(k).and_then(|s| s.as_array()) {
                    ranks[k] = a.rank();
                    default_m2m[k] = written_minor_to_major(a);
                }
            }
            nodes.push(ConfigNode {
                index,
                comp: ci,
                instr: ii,
                name: ins.name.to_string(),
                opcode: ins.opcode,
                ranks,
                default_m2m,
            });
        }
        LayoutEvaluator {
            memo: KernelMemo::new(m, target),
            times: KernelTimes::new(m, target),
            remember: true,
            nodes,
        }
    }

    /// The compilation configuration of a layout configuration (one choice per node, in
    /// `self.nodes` order): a layout entry, by TpuGraphs node index (as a `--config` file's
    /// `node = N`, unambiguous where two computations share an instruction name), for
    /// every node with a choice; an unchosen tensor of such a node is left to the
    /// compiler (empty list).
    pub fn compilation_config(&self, config: &[NodeChoice]) -> CompilationConfig {
        let list = |d: &Option<Dims>| d.as_ref().map(|d| d.to_vec()).unwrap_or_default();
        let mut c = CompilationConfig::default();
        c.layout
            .reserve(config.iter().filter(|ch| !ch.is_default()).count());
        for (n, ch) in self.nodes.iter().zip(config) {
            if ch.is_default() {
                continue;
            }
            c.layout.push(LayoutEntry {
                node: NodeRef::Index(n.index),
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
    /// before any is drawn.
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
        Ok(self
            .nodes
            .iter()
            .filter_map(|n| g.node_of(n.comp, n.instr).map(|x| x as i64))
            .collect())
    }

    /// Runtime of a configuration (one choice per node, in `self.nodes` order) of the
    /// module `prepared` was made from, ns: [`recompiled_ns`] of its
    /// [`LayoutEvaluator::compilation_config`], with the kernels that earlier
    /// configurations share with it taken from the evaluator's [`KernelMemo`]
    /// ([`remembered_ns`]), or, when it does not remember kernels, with the times of the
    /// small kernel bodies earlier configurations share with it taken from its
    /// [`KernelTimes`] ([`timed_ns`]); either changes nothing but the time.
    pub fn runtime_ns(
        &self,
        prepared: &PreparedModule,
        config: &[NodeChoice],
    ) -> Result<f64, ProgramError> {
        let c = self.compilation_config(config);
        if self.remember {
            remembered_ns(prepared, &c, &self.memo)
        } else {
            timed_ns(prepared, &c, &self.times)
        }
    }

    /// Whether [`LayoutEvaluator::runtime_ns`] goes through the memo (the default). It
    /// pays when configurations change a few tensors (the `default` search); when each
    /// sets every tensor (`random`), most kernels are new and keeping them costs as
    /// much as the hits save, but the small bodies (copies, lone elementwise ops and
    /// reductions) recur, and only their times are kept. The runtimes are the same
    /// either way.
    pub fn remember(&mut self, on: bool) {
        self.remember = on;
    }
}

/// Runtime of the whole program compiled under `config`, ns: layout assignment and
/// fusion, lowering every kernel ([`crate::kernels::compile_program`]), and the
/// estimate of the program under the configuration's tiles (each kernel's default where
/// it sets none) — what `tpusim estimate` reports for the module compiled with `config`
/// ([`CompiledProgram::total_ns`](crate::kernels::CompiledProgram::total_ns)), to the
/// bit; the compiler's kernel list is made without the physical shapes no cost reads
/// (`kernels::program::compiled_total_ns`). `Sync`: call it from many threads on one
/// prepared module.
pub fn recompiled_ns(
    prepared: &PreparedModule,
    config: &CompilationConfig,
    target: &TpuTarget,
) -> Result<f64, ProgramError> {
    compiled_total_ns(prepared, config, target)
}

/// [`recompiled_ns`] on `memo`'s target, with the kernels `memo` remembers taken from it
/// instead of lowered and evaluated again (`kernels::memo`: a remembered kernel is the
/// kernel): the same runtime, to the bit (`tests/kernel_memo.rs`).
pub fn remembered_ns(
    prepared: &PreparedModule,
    config: &CompilationConfig,
    memo: &KernelMemo,
) -> Result<f64, ProgramError> {
    remembered_total_ns(prepared, config, memo)
}

/// [`recompiled_ns`] on `times`' target, with the small kernel bodies whose times
/// `times` keeps costed by them instead of lowered and evaluated again, the kernel
/// classes it keeps costed without being evaluated again, and the times of the new ones
/// kept (`kernels::memo::KernelTimes`: a kept time is the time of a kernel lowered from
/// an equal body, or of one of the same structure): the same runtime, to the bit
/// (`tests/kernel_memo.rs`).
pub fn timed_ns(
    prepared: &PreparedModule,
    config: &CompilationConfig,
    times: &KernelTimes,
) -> Result<f64, ProgramError> {
    timed_total_ns(prepared, config, times)
}
