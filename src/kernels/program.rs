//! Program model: the runtime of a whole module as the sum of its kernels in
//! program order, with `while` loops multiplied by their trip count and
//! `conditional`s costed by their most expensive branch.
//!
//! Lowering (HLO → [`KernelDesc`]s, loop structure, trip counts) happens once
//! in [`LoweredProgram::new`]; [`LoweredProgram::estimate`] /
//! [`LoweredProgram::total_ns`] re-evaluate it for any target and tile
//! overrides (the dataset generator calls them many times). Identical kernel
//! descriptions are evaluated once per call.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use serde::Serialize;
use thiserror::Error;

use super::lower::{describe, lower_body, lower_kernel_full, LowerError, LoweredKernel};
use super::memo::{Found, KernelMemo, KernelTimes, MemoKernel, Remembered};
use crate::hlo::printer::{print_computation, print_instruction};
use crate::ir::{CallRole, CompId, InstrId, Module, Name, Opcode};
use crate::passes::{CompilationConfig, CompileError, CompileStats, Kernel, PreparedModule};
use crate::tpu::{
    derive, Bottleneck, Derivation, Estimate, Figure, Formula, KernelDesc, KernelKind, ModelError,
    TileConfig, TpuTarget,
};

/// Tile overrides: a tile per kernel, by the kernel's (instruction's) name — the
/// configuration's tiles ([`tile_overrides`]) or a caller's (`explain`, a replayed
/// tile run). Kernels not listed use the compiler default
/// ([`crate::tpu::default_tile`]). Kept in name order, so that the first unknown kernel
/// reported does not depend on the order of insertion.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TileOverrides(BTreeMap<Name, TileConfig>);

impl TileOverrides {
    /// No overrides: every kernel under its default tile.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `kernel`'s tile; returns the one it replaces.
    pub fn insert(&mut self, kernel: impl Into<Name>, tile: TileConfig) -> Option<TileConfig> {
        self.0.insert(kernel.into(), tile)
    }

    /// `kernel`'s tile, if it is overridden.
    pub fn get(&self, kernel: &str) -> Option<&TileConfig> {
        self.0.get(kernel)
    }

    /// Takes `kernel`'s tile out.
    pub fn remove(&mut self, kernel: &str) -> Option<TileConfig> {
        self.0.remove(kernel)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The overrides in kernel-name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &TileConfig)> {
        self.0.iter().map(|(k, t)| (k.as_str(), t))
    }
}

impl<N: Into<Name>> FromIterator<(N, TileConfig)> for TileOverrides {
    fn from_iter<I: IntoIterator<Item = (N, TileConfig)>>(it: I) -> Self {
        TileOverrides(it.into_iter().map(|(k, t)| (k.into(), t)).collect())
    }
}

pub use crate::analysis::while_loop::{TripSource, DEFAULT_TRIP_COUNT};

/// A configuration compiled and lowered ([`compile_program`]): what every command
/// costs (`estimate`, `sweep`, `report`, the labels of `generate`, replays).
#[derive(Debug, Clone)]
pub struct CompiledProgram {
    pub program: LoweredProgram,
    /// The compiler's kernel list (with the configuration's tiles).
    pub kernels: Vec<Kernel>,
    pub stats: CompileStats,
    /// Fusion overrides that could not be honoured, with the reason.
    pub notes: Vec<String>,
}

impl CompiledProgram {
    /// The configuration's tiles, by kernel name ([`tile_overrides`]).
    pub fn tiles(&self) -> TileOverrides {
        tile_overrides(&self.kernels)
    }

    /// The program's estimate on `target` under the configuration's tiles: what
    /// `tpusim estimate` prints.
    pub fn estimate(&self, target: &TpuTarget) -> Result<ProgramEstimate, ProgramError> {
        self.program.estimate(target, &self.tiles())
    }

    /// [`CompiledProgram::estimate`]'s total, ns.
    pub fn total_ns(&self, target: &TpuTarget) -> Result<f64, ProgramError> {
        self.program.total_ns(target, &self.tiles())
    }
}

/// Compiles `config` on `prepared` and lowers every kernel from the compilation's kernel
/// bodies ([`PreparedModule::compile_bodies`]), never from an output module: a
/// straight-line program is the kernel list in order; any other program's loops,
/// conditionals and input fusions are walked on the compilation's skeleton. The program
/// equals `LoweredProgram::new(&prepared.compile(config)?.module)`, the lowering of the
/// module `tpusim compile` prints (`tests/compile_bodies.rs`), without building it.
pub fn compile_program(
    prepared: &PreparedModule,
    config: &CompilationConfig,
) -> Result<CompiledProgram, ProgramError> {
    compile_program_with(prepared, config, None)
}

/// [`compile_program`], taking the kernels that `memo` remembers from it instead of
/// lowering them again (a remembered kernel is the kernel: `kernels::memo`), and
/// remembering the others. The program is the same with or without a memo
/// (`tests/kernel_memo.rs`); its estimate on the memo's target reuses the remembered
/// kernels' evaluations.
pub fn compile_program_with(
    prepared: &PreparedModule,
    config: &CompilationConfig,
    memo: Option<&KernelMemo>,
) -> Result<CompiledProgram, ProgramError> {
    let c = prepared.compile_bodies(config)?;
    let program = LoweredProgram::lower(prepared.module(), &c, memo)?;
    Ok(CompiledProgram {
        program,
        kernels: c.kernels,
        stats: c.stats,
        notes: c.notes,
    })
}

/// [`compile_program`]`(prepared, config)?.total_ns(target)`, for a caller that keeps
/// only the number (the labels of `generate`): the same compilation, lowering and
/// estimate, with the compiler's kernel list made without the physical shapes of the
/// kernels' operands and outputs, which none of them reads
/// ([`PreparedModule::compile_bodies_for_cost`]).
pub(crate) fn compiled_total_ns(
    prepared: &PreparedModule,
    config: &CompilationConfig,
    target: &TpuTarget,
) -> Result<f64, ProgramError> {
    let c = prepared.compile_bodies_for_cost(config)?;
    lowered_total_ns(prepared.module(), &c, None, target)
}

/// The total of the program `c` lowers to, under its configuration's tiles.
fn lowered_total_ns(
    module: &Module,
    c: &crate::passes::CompiledBodies<'_>,
    memo: Option<&KernelMemo>,
    target: &TpuTarget,
) -> Result<f64, ProgramError> {
    let program = LoweredProgram::lower(module, c, memo)?;
    program.total_ns(target, &tile_overrides(&c.kernels))
}

/// The evaluation of `kernel` on `target` that `kept` (a memo entry's) holds, else
/// made now and kept there.
fn eval_kept(
    kernel: &LoweredKernel,
    target: &TpuTarget,
    kept: Option<&OnceLock<Eval>>,
) -> Result<Eval, ProgramError> {
    if let Some(e) = kept.and_then(|e| e.get()) {
        return Ok(*e);
    }
    let e = eval_kernel(kernel, target, None)?;
    if let Some(kept) = kept {
        let _ = kept.set(e);
    }
    Ok(e)
}

/// [`compile_program_with`]`(prepared, config, Some(memo))?.total_ns(memo.target())`,
/// without building the program: a straight-line program's estimate is the sum of its
/// kernels' times in order, so each kernel the memo remembers is costed by its entry
/// (its evaluation, once made) without its kernel being copied out, renamed or
/// grouped into classes. The same sum of the same times in the same order, to the
/// bit; the same first error. A program with loops or conditionals, or with tiles the
/// configuration sets, is costed through the program.
pub(crate) fn remembered_total_ns(
    prepared: &PreparedModule,
    config: &CompilationConfig,
    memo: &KernelMemo,
) -> Result<f64, ProgramError> {
    let c = prepared.compile_bodies_for_cost(config)?;
    let module = prepared.module();
    let target = memo.target();
    if !sums_kernels(&c) {
        return lowered_total_ns(module, &c, Some(memo), target);
    }
    // Every kernel found or lowered first, so that a lowering error comes first, as in
    // `LoweredProgram::lower`.
    let mut key = Vec::new();
    let mut found = Vec::with_capacity(c.kernels.len());
    for (k, body) in c.kernels.iter().zip(c.bodies.iter()) {
        found.push(memo.find(module, body, &k.name, &mut key)?);
    }
    let mut total = 0.0;
    for (k, f) in c.kernels.iter().zip(&found) {
        let (kernel, kept) = match f {
            Found::Entry(r) => match r.kernel() {
                Some(kernel) => (kernel, Some(&r.eval)),
                None => continue,
            },
            Found::Lowered(Some(kernel)) => (&**kernel, None),
            Found::Lowered(None) => continue,
        };
        // (a remembered kernel bears the name of the body it was lowered from)
        let e = eval_kept(kernel, target, kept).map_err(|e| match e {
            ProgramError::Tile { source, .. } => ProgramError::Tile {
                kernel: k.name.to_string(),
                source,
            },
            e => e,
        })?;
        total += e.total_ns;
    }
    Ok(total)
}

/// Whether the total of compilation `c` is the sum of its kernels' default-tile times
/// in kernel order: a straight-line program (no skeleton of loops or conditionals)
/// whose configuration sets no tile.
fn sums_kernels(c: &crate::passes::CompiledBodies<'_>) -> bool {
    c.skeleton.is_none() && c.kernels.iter().all(|k| k.tile.is_none())
}

/// [`compiled_total_ns`]`(prepared, config, times.target())` with the small kernel
/// bodies whose times `times` keeps costed by those times, without being lowered or
/// evaluated again, and the times of the new ones kept there. A straight-line program's
/// estimate is the sum of its kernels' times in order: the other kernels are lowered
/// and grouped into classes as [`LoweredProgram::lower`] groups them, each class's time
/// taken from `times` under its [`structure_key`] or evaluated once (and kept), and
/// every kernel's time is added in program order, the kept ones among them — the same
/// sum of the same times in the same order, to the bit (a kept time is the time of a
/// kernel that lowered from an equal body, or of a kernel of the same structure); the
/// same first error (a kept body or class was evaluated without one). A program with loops or
/// conditionals, or with tiles the configuration sets, is costed through the program.
pub(crate) fn timed_total_ns(
    prepared: &PreparedModule,
    config: &CompilationConfig,
    times: &KernelTimes,
) -> Result<f64, ProgramError> {
    let c = prepared.compile_bodies_for_cost(config)?;
    let module = prepared.module();
    let target = times.target();
    if !sums_kernels(&c) || !times.is_for(module) {
        return lowered_total_ns(module, &c, None, target);
    }
    /// A kernel's time: kept, or its class's once evaluated (with the span of its
    /// body's key in `keys` when it is to be kept).
    enum Time {
        Kept(f64),
        Class(usize, Option<(usize, usize)>),
    }
    // The small bodies' keys, one after another, and each kernel's span among them;
    // looked up together.
    let ids = times.content_ids(module);
    // This thread's key buffer, kept at the size the last configuration grew it to:
    // a configuration's keys take a few hundred kilobytes, and growing a fresh buffer
    // to that size copied them about five times.
    let mut keys = KEY_BUF.with(|b| b.take());
    keys.clear();
    let spans: Vec<Option<(usize, usize)>> = c
        .bodies
        .iter()
        .map(|body| {
            let at = keys.len();
            let kept = KernelTimes::append_key(body, ids, &mut keys);
            if at == 0 && kept {
                // room for as many keys as long as the first, not a doubling a few bodies
                keys.reserve(keys.len() * c.bodies.len());
            }
            kept.then(|| (at, keys.len() - at))
        })
        .collect();
    let found = {
        let batch: Vec<&[u8]> = spans
            .iter()
            .flatten()
            .map(|&(at, len)| &keys[at..at + len])
            .collect();
        let mut found = Vec::with_capacity(batch.len());
        times.get_many(&batch, &mut found);
        found
    };
    let mut found = found.into_iter();
    let mut order = Vec::with_capacity(c.kernels.len());
    let mut kernels = Vec::with_capacity(c.kernels.len());
    let mut nodes = Vec::with_capacity(c.kernels.len());
    for ((k, body), &span) in c.kernels.iter().zip(c.bodies.iter()).zip(&spans) {
        if span.is_some() {
            match found.next().flatten() {
                Some(Some(t)) => {
                    order.push(Time::Kept(t));
                    continue;
                }
                Some(None) => continue,
                None => {}
            }
        }
        let Some(kernel) = lower_body(module, body, &k.name)? else {
            if let Some((at, len)) = span {
                times.insert(&keys[at..at + len], None);
            }
            continue;
        };
        order.push(Time::Class(kernels.len(), span));
        nodes.push(Node::Kernel(kernels.len()));
        kernels.push(ProgramKernel {
            lowered: kernel,
            computation: k.computation_name.clone(),
            class: 0,
            entry: None,
        });
    }
    let program = LoweredProgram::assemble(kernels, nodes, Vec::new(), None);
    // Each class's time: kept under its structure key, or evaluated now (and kept).
    let class_keys: Vec<&[u8]> = (0..program.classes.len())
        .map(|c| program.class_key(c))
        .collect();
    let mut kept = Vec::with_capacity(class_keys.len());
    times.class_times(&class_keys, &mut kept);
    let totals: Vec<f64> = kept
        .iter()
        .zip(&class_keys)
        .enumerate()
        .map(|(c, (&t, key))| {
            if let Some(t) = t {
                return Ok(t);
            }
            let t = eval_kept(&program.kernels[program.classes[c]].lowered, target, None)?.total_ns;
            times.keep_class(key, t);
            Ok(t)
        })
        .collect::<Result<_, ProgramError>>()?;
    let mut total = 0.0;
    for t in &order {
        total += match *t {
            Time::Kept(t) => t,
            Time::Class(i, span) => {
                let t = totals[program.kernels[i].class];
                if let Some((at, len)) = span {
                    times.insert(&keys[at..at + len], Some(t));
                }
                t
            }
        };
    }
    KEY_BUF.with(|b| b.set(keys));
    Ok(total)
}

thread_local! {
    /// The key buffer of [`timed_total_ns`] (taken while a configuration is costed; a
    /// configuration that fails leaves a fresh one).
    static KEY_BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Why a program cannot be estimated.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ProgramError {
    /// The configuration could not be compiled ([`compile_program`]).
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// An instruction could not be lowered.
    #[error(transparent)]
    Lower(#[from] LowerError),
    /// A tile configuration was rejected by the model (infeasible, wrong length, out of range).
    #[error("kernel `{kernel}`: {source}")]
    Tile {
        /// Kernel (instruction) name.
        kernel: String,
        /// Model error.
        source: ModelError,
    },
    /// A tile override or `explain` names no kernel of the module.
    #[error("no kernel named `{0}` in the module")]
    UnknownKernel(String),
    /// The named instruction exists but lowers to no kernel (zero cost or control flow).
    #[error("instruction `{0}` is not a kernel (zero cost or control flow)")]
    NotAKernel(String),
    /// The named instruction is fused into another kernel.
    #[error("instruction `{name}` is part of fusion `{fusion}`; explain the fusion instead")]
    InsideFusion {
        /// Instruction name.
        name: String,
        /// Name of the fusion instruction that calls its computation.
        fusion: String,
    },
    /// Computations call each other recursively or nest too deeply.
    #[error("computation `{0}` is called recursively or nested deeper than 64 levels")]
    Recursion(String),
}

#[derive(Debug, Clone)]
enum Node {
    Kernel(usize),
    Loop {
        trips: f64,
        body: Vec<Node>,
        cond: Vec<Node>,
    },
    Cond {
        branches: Vec<Vec<Node>>,
    },
}

/// One lowered kernel of the program.
#[derive(Debug, Clone)]
pub struct ProgramKernel {
    /// The lowered kernel.
    pub lowered: LoweredKernel,
    /// Computation that holds the instruction.
    pub computation: Name,
    /// Index of the structurally identical kernel evaluated for it.
    class: usize,
    /// The memo entry the kernel was taken from or remembered in.
    entry: Option<Arc<Remembered>>,
}

/// One row of the per-kernel report (times per execution, in ns).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelRow {
    /// Kernel (instruction) name.
    pub name: String,
    /// Computation holding the instruction.
    pub computation: String,
    /// `Mxu`, `Elementwise`, `Reduction`, `CopyTranspose` or `Other`.
    pub kind: &'static str,
    /// Opcode of the hero instruction.
    pub hero: &'static str,
    /// Tile actually used (per-iteration-dim sizes in TpuGraphs form).
    pub tile: TileConfig,
    /// Logical FLOPs of one execution.
    pub flops: f64,
    /// HBM bytes of one execution (re-fetches, padding, side outputs).
    pub bytes: f64,
    /// Σ MXU busy time.
    pub mxu_ns: f64,
    /// Σ VPU busy time.
    pub vpu_ns: f64,
    /// Σ XLU busy time.
    pub xlu_ns: f64,
    /// Σ DMA time (including side outputs).
    pub hbm_ns: f64,
    /// Fixed costs (steps, launch, dispatch, MXU fill).
    pub overhead_ns: f64,
    /// Un-hidden write time of side outputs (included in `total_ns`).
    pub side_output_ns: f64,
    /// Time of one execution.
    pub total_ns: f64,
    /// What limits the kernel.
    pub bottleneck: Bottleneck,
    /// Executions per program run: product of enclosing trip counts, 0 for
    /// kernels in conditional branches that are not the most expensive one.
    pub multiplier: f64,
    /// True when the default tile did not fit VMEM and the untiled roofline
    /// fallback was used.
    pub untiled: bool,
}

/// Whole-program estimate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProgramEstimate {
    /// Σ multiplier × kernel time, ns.
    pub total_ns: f64,
    /// One row per kernel in program order (loop bodies in place).
    pub kernels: Vec<KernelRow>,
    /// Approximations worth knowing (default trip counts, fallbacks).
    pub warnings: Vec<String>,
}

/// A module lowered once, to be estimated many times.
#[derive(Debug, Clone)]
pub struct LoweredProgram {
    /// Kernels in program order (a computation called from several places
    /// is lowered once and appears once).
    pub kernels: Vec<ProgramKernel>,
    /// One representative kernel index per class: kernels of equal [`structure_key`].
    classes: Vec<usize>,
    /// The classes' structure keys, one after another; `class_keys[c]` is the span of
    /// class `c`'s.
    keys: Vec<u8>,
    class_keys: Vec<(usize, usize)>,
    nodes: Vec<Node>,
    /// Kernel indices by kernel name, made when first asked for (costing a
    /// configuration without tile overrides never looks a kernel up by name).
    by_name: OnceLock<HashMap<String, Vec<usize>>>,
    /// `while` loops: (instruction name, trip count, source).
    pub loops: Vec<(String, u64, TripSource)>,
    /// The target of the memo the kernels came from, whose evaluations it keeps.
    memo_target: Option<Arc<TpuTarget>>,
}

/// Evaluation of one kernel under one target/tile.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Eval {
    est: Option<Estimate>,
    total_ns: f64,
    side_ns: f64,
    bytes: f64,
    hbm_ns: f64,
}

struct Walker<'m> {
    module: &'m Module,
    /// Lowering a skeleton module: the bodies of its fusions.
    bodies: Option<BodyHook<'m>>,
    kernels: Vec<ProgramKernel>,
    cache: HashMap<CompId, Vec<Node>>,
    active: Vec<CompId>,
    loops: Vec<(String, u64, TripSource)>,
    /// Buffer of the memo's body keys.
    key: Vec<u8>,
}

/// [`lower_body`], through `memo` when there is one.
fn lower_with(
    module: &Module,
    body: crate::passes::KernelBody<'_>,
    name: &str,
    memo: Option<&KernelMemo>,
    key: &mut Vec<u8>,
) -> Result<Option<MemoKernel>, LowerError> {
    match memo {
        Some(m) => m.lower(module, body, name, key),
        None => Ok(lower_body(module, body, name)?.map(|kernel| MemoKernel {
            kernel,
            entry: None,
        })),
    }
}

/// The kernel bodies of a skeleton module's fusions (`CompiledBodies::skeleton`).
struct BodyHook<'m> {
    /// The input module (the bodies' called computations).
    input: &'m Module,
    bodies: &'m crate::passes::KernelBodies<'m>,
    /// (computation, instruction) of each fusion the compiler made → its body.
    at: HashMap<(CompId, u32), usize>,
    memo: Option<&'m KernelMemo>,
}

impl Walker<'_> {
    fn walk(&mut self, comp: CompId) -> Result<Vec<Node>, ProgramError> {
        if let Some(n) = self.cache.get(&comp) {
            return Ok(n.clone());
        }
        let module = self.module;
        let c = module
            .computations
            .get_index(comp)
            .map(|(_, c)| c)
            .ok_or(LowerError::NoComputation(comp))?;
        if self.active.contains(&comp) || self.active.len() > 64 {
            return Err(ProgramError::Recursion(c.name.clone()));
        }
        self.active.push(comp);
        let mut nodes = Vec::new();
        for &id in &c.order {
            let ins = c.instr(id);
            match (ins.opcode, ins.async_wrapped) {
                (Opcode::While, _) => {
                    let body = match ins.attrs.called_with(CallRole::Body) {
                        Some(b) => self.walk(b)?,
                        None => vec![],
                    };
                    let cond = match ins.attrs.called_with(CallRole::Condition) {
                        Some(b) => self.walk(b)?,
                        None => vec![],
                    };
                    let (n, src) = crate::analysis::while_loop::trip_count(module, c, id);
                    self.loops.push((ins.name.to_string(), n, src));
                    nodes.push(Node::Loop {
                        trips: n as f64,
                        body,
                        cond,
                    });
                }
                (Opcode::Conditional, _) => {
                    let mut branches = Vec::new();
                    for &(role, b) in &ins.attrs.called {
                        if matches!(
                            role,
                            CallRole::BranchComputations
                                | CallRole::TrueComputation
                                | CallRole::FalseComputation
                        ) {
                            branches.push(self.walk(b)?);
                        }
                    }
                    nodes.push(Node::Cond { branches });
                }
                (Opcode::Call, _) | (Opcode::AsyncStart, None) => {
                    let callee = ins
                        .attrs
                        .called_with(CallRole::ToApply)
                        .or_else(|| ins.attrs.called_with(CallRole::Calls))
                        .or_else(|| ins.attrs.called.first().map(|(_, c)| *c));
                    if let Some(cb) = callee {
                        nodes.extend(self.walk(cb)?);
                    }
                }
                _ => {
                    let body = self.bodies.as_ref().and_then(|h| {
                        let i = *h.at.get(&(comp, id.index() as u32))?;
                        Some((h.input, h.bodies.get(i)?))
                    });
                    let memo = self.bodies.as_ref().and_then(|h| h.memo);
                    let lowered = match body {
                        Some((input, b)) => lower_with(input, b, &ins.name, memo, &mut self.key)?,
                        None => lower_kernel_full(module, comp, id)?.map(|kernel| MemoKernel {
                            kernel,
                            entry: None,
                        }),
                    };
                    if let Some(k) = lowered {
                        nodes.push(Node::Kernel(self.kernels.len()));
                        self.kernels.push(ProgramKernel {
                            lowered: k.kernel,
                            computation: Name::from(c.name.as_str()),
                            class: 0,
                            entry: k.entry,
                        });
                    }
                }
            }
        }
        self.active.pop();
        self.cache.insert(comp, nodes.clone());
        Ok(nodes)
    }
}

/// The structure of kernel `k` as bytes, into `out` (cleared first): everything the cost
/// model reads of it, its description but the name and its side outputs. Kernels with
/// equal keys cost the same on any target and tile: they make one class of a program
/// ([`LoweredProgram`]), and one entry of the random search's table of class times
/// ([`KernelTimes`]). Every list is prefixed by its length, every enum by its variant
/// and every float is written bit for bit, so that equal bytes are equal values.
/// Destructured, so that a new field of `KernelDesc` must be considered here.
pub(crate) fn structure_key(k: &LoweredKernel, out: &mut Vec<u8>) {
    use crate::tpu::kernel::{
        DimMap, InputDesc, MxuSpec, OpCounts, ReduceAxis, ReductionDim, ReductionKind, TensorDesc,
        VpuWork,
    };
    struct Key<'a>(&'a mut Vec<u8>);
    impl Key<'_> {
        fn u(&mut self, mut x: u64) {
            while x >= 0x80 {
                self.0.push(x as u8 | 0x80);
                x >>= 7;
            }
            self.0.push(x as u8);
        }
        fn i(&mut self, x: i64) {
            self.u(((x << 1) ^ (x >> 63)) as u64);
        }
        fn f(&mut self, x: f64) {
            self.0.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        fn tensor(&mut self, t: &TensorDesc) {
            let TensorDesc {
                dims,
                elem_bits,
                elem,
            } = t;
            self.u(dims.len() as u64);
            for &d in dims {
                self.i(d);
            }
            self.u(u64::from(*elem_bits));
            self.i(i64::from(*elem as i32));
        }
        fn ops(&mut self, o: &OpCounts) {
            let OpCounts {
                cheap,
                medium,
                expensive,
            } = *o;
            self.f(cheap);
            self.f(medium);
            self.f(expensive);
        }
    }
    let KernelDesc {
        name: _,
        kind,
        output,
        reduction_dims,
        inputs,
        kernel_operand,
        vpu,
        transcendentals,
        flops,
    } = k.desc();
    out.clear();
    let mut w = Key(out);
    match kind {
        KernelKind::Mxu(MxuSpec { roles, precision }) => {
            w.u(0);
            w.u(roles.len() as u64);
            for &r in roles {
                w.u(r as u64);
            }
            w.u(*precision as u64);
        }
        KernelKind::Elementwise => w.u(1),
        KernelKind::Reduction => w.u(2),
        KernelKind::CopyTranspose => w.u(3),
        KernelKind::Other => w.u(4),
    }
    w.tensor(output);
    w.u(reduction_dims.len() as u64);
    for &ReductionDim { size, kind } in reduction_dims {
        w.i(size);
        match kind {
            ReductionKind::Contraction => w.u(0),
            ReductionKind::Window => w.u(1),
            ReductionKind::Reduce(ReduceAxis::Lanes) => w.u(2),
            ReductionKind::Reduce(ReduceAxis::Sublanes) => w.u(3),
            ReductionKind::Reduce(ReduceAxis::Major) => w.u(4),
        }
    }
    w.u(inputs.len() as u64);
    for InputDesc { tensor, dims } in inputs {
        w.tensor(tensor);
        w.u(dims.len() as u64);
        for &m in dims {
            match m {
                DimMap::Iter(d) => {
                    w.u(0);
                    w.u(d as u64);
                }
                DimMap::Window {
                    out,
                    win,
                    stride,
                    dilation,
                } => {
                    w.u(1);
                    w.u(out as u64);
                    w.u(win as u64);
                    w.i(stride);
                    w.i(dilation);
                }
                DimMap::Full => w.u(2),
                DimMap::Outer { iter, inner } => {
                    w.u(3);
                    w.u(iter as u64);
                    w.i(inner);
                }
            }
        }
    }
    match kernel_operand {
        None => w.u(0),
        Some(o) => w.u(*o as u64 + 1),
    }
    let VpuWork {
        per_output_element,
        per_reduction_point,
    } = vpu;
    w.ops(per_output_element);
    w.ops(per_reduction_point);
    w.f(*transcendentals);
    w.f(*flops);
    w.u(k.side_outputs.len() as u64);
    for t in &k.side_outputs {
        w.tensor(t);
    }
}

fn kind_name(k: &KernelKind) -> &'static str {
    match k {
        KernelKind::Mxu(_) => "Mxu",
        KernelKind::Elementwise => "Elementwise",
        KernelKind::Reduction => "Reduction",
        KernelKind::CopyTranspose => "CopyTranspose",
        KernelKind::Other => "Other",
    }
}

impl LoweredProgram {
    /// Lowers a module as written (one that XLA compiled, or that `tpusim compile`
    /// printed): every kernel reachable from the entry computation (through `while`,
    /// `conditional`, `call` and async wrappers), once. A configuration of a module is
    /// costed through [`compile_program`] instead, which the tests hold equal to this
    /// on the printed module.
    pub fn new(module: &Module) -> Result<Self, ProgramError> {
        Self::walked(module, None)
    }

    /// Walks `module` from its entry; with `bodies`, its compiler-made fusions are
    /// lowered from their bodies (a skeleton module).
    fn walked<'m>(module: &'m Module, bodies: Option<BodyHook<'m>>) -> Result<Self, ProgramError> {
        let memo_target = bodies
            .as_ref()
            .and_then(|h| h.memo)
            .map(KernelMemo::shared_target);
        let mut w = Walker {
            module,
            bodies,
            kernels: Vec::new(),
            cache: HashMap::new(),
            active: Vec::new(),
            loops: Vec::new(),
            key: Vec::new(),
        };
        let nodes = w.walk(module.entry)?;
        Ok(Self::assemble(w.kernels, nodes, w.loops, memo_target))
    }

    /// Lowers a compilation (`module` is the input module, `compiled` its
    /// [`PreparedModule::compile_bodies`]): a straight-line program from its kernel
    /// list, any other by walking its skeleton with the compiler-made fusions lowered
    /// from their bodies, through `memo` when there is one. The second step of
    /// [`compile_program_with`], which is this after `compile_bodies`.
    pub fn lower(
        module: &Module,
        compiled: &crate::passes::CompiledBodies<'_>,
        memo: Option<&KernelMemo>,
    ) -> Result<Self, ProgramError> {
        if let Some(skeleton) = &compiled.skeleton {
            let at = compiled
                .kernels
                .iter()
                .enumerate()
                .filter(|(_, k)| k.fused_computation.is_some())
                .map(|(i, k)| ((k.computation, k.instruction), i))
                .collect();
            let hook = BodyHook {
                input: module,
                bodies: &compiled.bodies,
                at,
                memo,
            };
            return Self::walked(skeleton, Some(hook));
        }
        let mut kernels = Vec::with_capacity(compiled.bodies.len());
        let mut nodes = Vec::with_capacity(compiled.bodies.len());
        let mut key = Vec::new();
        for (k, body) in compiled.kernels.iter().zip(compiled.bodies.iter()) {
            if let Some(l) = lower_with(module, body, &k.name, memo, &mut key)? {
                nodes.push(Node::Kernel(kernels.len()));
                kernels.push(ProgramKernel {
                    lowered: l.kernel,
                    computation: k.computation_name.clone(),
                    class: 0,
                    entry: l.entry,
                });
            }
        }
        let memo_target = memo.map(KernelMemo::shared_target);
        Ok(Self::assemble(kernels, nodes, Vec::new(), memo_target))
    }

    /// Groups structurally identical kernels and indexes them by name.
    fn assemble(
        mut kernels: Vec<ProgramKernel>,
        nodes: Vec<Node>,
        loops: Vec<(String, u64, TripSource)>,
        memo_target: Option<Arc<TpuTarget>>,
    ) -> Self {
        use std::hash::BuildHasher;
        let mut classes: Vec<usize> = Vec::new();
        let mut keys: Vec<u8> = Vec::new();
        let mut class_keys: Vec<(usize, usize)> = Vec::new();
        let mut key = Vec::new();
        let hasher = foldhash::fast::FixedState::default();
        // Key hash → classes with that hash (looked up, never iterated).
        let mut seen: HashMap<u64, smallvec::SmallVec<[usize; 2]>, foldhash::fast::FixedState> =
            HashMap::with_capacity_and_hasher(kernels.len(), Default::default());
        let kernels_len = kernels.len();
        for (i, k) in kernels.iter_mut().enumerate() {
            structure_key(&k.lowered, &mut key);
            if i == 0 {
                // room for as many keys as long as the first, not a doubling a few kernels
                keys.reserve(key.len() * kernels_len);
            }
            let bucket = seen.entry(hasher.hash_one(&key[..])).or_default();
            let found = bucket.iter().copied().find(|&c| {
                let (at, len) = class_keys[c];
                keys[at..at + len] == key[..]
            });
            k.class = match found {
                Some(c) => c,
                None => {
                    classes.push(i);
                    class_keys.push((keys.len(), key.len()));
                    keys.extend_from_slice(&key);
                    bucket.push(classes.len() - 1);
                    classes.len() - 1
                }
            };
        }
        Self {
            kernels,
            classes,
            keys,
            class_keys,
            nodes,
            by_name: OnceLock::new(),
            loops,
            memo_target,
        }
    }

    /// Kernel indices by kernel name, in program order.
    fn by_name(&self) -> &HashMap<String, Vec<usize>> {
        self.by_name.get_or_init(|| {
            let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
            for (i, k) in self.kernels.iter().enumerate() {
                by_name
                    .entry(k.lowered.desc().name.to_string())
                    .or_default()
                    .push(i);
            }
            by_name
        })
    }

    /// Number of structurally distinct kernels (evaluated once per call).
    pub fn distinct_kernels(&self) -> usize {
        self.classes.len()
    }

    /// The [`structure_key`] of class `c`'s kernels.
    fn class_key(&self, c: usize) -> &[u8] {
        let (at, len) = self.class_keys[c];
        &self.keys[at..at + len]
    }

    /// Index of the kernel named `name`.
    pub fn kernel_index(&self, name: &str) -> Option<usize> {
        self.by_name().get(name).and_then(|v| v.first()).copied()
    }

    /// Evaluates every distinct kernel on `target` with its default tile.
    /// The result answers [`PreparedProgram::total_ns`] /
    /// [`PreparedProgram::estimate`] for any tile overrides by re-evaluating
    /// only the overridden kernels — the fast path for dataset generation,
    /// where one target is used with many configurations.
    pub fn prepare<'a>(
        &'a self,
        target: &'a TpuTarget,
    ) -> Result<PreparedProgram<'a>, ProgramError> {
        let class_evals = self.class_evals(target, |e| e).collect::<Result<_, _>>()?;
        Ok(PreparedProgram {
            program: self,
            target,
            class_evals,
        })
    }

    /// `part` of each class's evaluation on `target` under its default tile, in class
    /// order (through the memo's entries when the memo is on `target`).
    fn class_evals<'s, T: 's>(
        &'s self,
        target: &'s TpuTarget,
        part: impl Fn(Eval) -> T + 's,
    ) -> impl Iterator<Item = Result<T, ProgramError>> + 's {
        // the memo keeps evaluations on its own target only
        let memo = self.memo_target.as_deref().is_some_and(|t| t == target);
        self.classes.iter().map(move |&rep| {
            let k = &self.kernels[rep];
            let kept = k.entry.as_ref().filter(|_| memo).map(|e| &e.eval);
            eval_kept(&k.lowered, target, kept).map(&part)
        })
    }

    /// Total time in ns only (no per-kernel rows).
    pub fn total_ns(&self, target: &TpuTarget, tiles: &TileOverrides) -> Result<f64, ProgramError> {
        if !tiles.is_empty() {
            return self.prepare(target)?.total_ns(tiles);
        }
        // [`PreparedProgram::total_ns`] without overrides, keeping each class's total
        // alone rather than its whole evaluation.
        let totals: Vec<f64> = self
            .class_evals(target, |e| e.total_ns)
            .collect::<Result<_, _>>()?;
        let at = |i: usize| {
            let class = self.kernels.get(i).map(|k| k.class);
            class.and_then(|c| totals.get(c)).copied().unwrap_or(0.0)
        };
        Ok(fold(&self.nodes, &at, 1.0, &mut None))
    }

    /// Full estimate with one row per kernel.
    pub fn estimate(
        &self,
        target: &TpuTarget,
        tiles: &TileOverrides,
    ) -> Result<ProgramEstimate, ProgramError> {
        self.prepare(target)?.estimate(tiles)
    }
}

/// A [`LoweredProgram`] with every distinct kernel evaluated once on one
/// target under its default tile (see [`LoweredProgram::prepare`]).
#[derive(Debug, Clone)]
pub struct PreparedProgram<'a> {
    program: &'a LoweredProgram,
    target: &'a TpuTarget,
    class_evals: Vec<Eval>,
}

impl PreparedProgram<'_> {
    /// Evaluations of the overridden kernels, by kernel index.
    fn overrides(&self, tiles: &TileOverrides) -> Result<Vec<(usize, Eval)>, ProgramError> {
        let p = self.program;
        let mut own = Vec::with_capacity(tiles.len());
        // in name order, so that the first error reported does not depend on insertion
        for (name, cfg) in tiles.iter() {
            let Some(idx) = p.by_name().get(name) else {
                return Err(ProgramError::UnknownKernel(name.to_string()));
            };
            for &i in idx {
                if let Some(k) = p.kernels.get(i) {
                    own.push((i, eval_kernel(&k.lowered, self.target, Some(cfg))?));
                }
            }
        }
        own.sort_unstable_by_key(|x| x.0);
        Ok(own)
    }

    fn eval_of<'e>(&'e self, own: &'e [(usize, Eval)], i: usize) -> Option<&'e Eval> {
        if !own.is_empty() {
            if let Ok(j) = own.binary_search_by_key(&i, |x| x.0) {
                return own.get(j).map(|x| &x.1);
            }
        }
        let class = self.program.kernels.get(i)?.class;
        self.class_evals.get(class)
    }

    /// Total time in ns only (no per-kernel rows).
    pub fn total_ns(&self, tiles: &TileOverrides) -> Result<f64, ProgramError> {
        let own = self.overrides(tiles)?;
        let at = |i: usize| self.eval_of(&own, i).map(|e| e.total_ns).unwrap_or(0.0);
        Ok(fold(&self.program.nodes, &at, 1.0, &mut None))
    }

    /// Full estimate with one row per kernel.
    pub fn estimate(&self, tiles: &TileOverrides) -> Result<ProgramEstimate, ProgramError> {
        let p = self.program;
        let target = self.target;
        let own = self.overrides(tiles)?;
        let at = |i: usize| self.eval_of(&own, i).map(|e| e.total_ns).unwrap_or(0.0);
        let mut mult = vec![0.0; p.kernels.len()];
        let total_ns = fold(&p.nodes, &at, 1.0, &mut Some(&mut mult));
        let mut warnings = Vec::new();
        for (name, n, src) in &p.loops {
            if *src == TripSource::Default {
                warnings.push(format!(
                    "while `{name}`: trip count unknown, assumed {n} (DEFAULT_TRIP_COUNT)"
                ));
            }
        }
        let mut rows = Vec::with_capacity(p.kernels.len());
        for (i, (k, &m)) in p.kernels.iter().zip(&mult).enumerate() {
            let Some(e) = self.eval_of(&own, i) else {
                continue;
            };
            let d = k.lowered.desc();
            if e.est.is_none() {
                warnings.push(format!(
                    "kernel `{}`: its tile does not fit VMEM, untiled roofline used",
                    d.name
                ));
            }
            let (tile, mxu_ns, vpu_ns, xlu_ns, overhead_ns, bottleneck) = match &e.est {
                Some(est) => (
                    TileConfig::from_sizes(d, &est.tile[..est.n_iter.min(est.tile.len())]),
                    est.mxu_ns,
                    est.vpu_ns,
                    est.xlu_ns,
                    est.overhead_ns,
                    if e.side_ns > 0.0 && e.hbm_ns > est.compute_ns.max(est.overhead_ns) {
                        Bottleneck::Hbm
                    } else {
                        est.bottleneck
                    },
                ),
                None => (
                    TileConfig::default(),
                    0.0,
                    0.0,
                    0.0,
                    target.kernel_launch_overhead_ns,
                    Bottleneck::Hbm,
                ),
            };
            rows.push(KernelRow {
                name: d.name.to_string(),
                computation: k.computation.to_string(),
                kind: kind_name(&d.kind),
                hero: k.lowered.hero.name(),
                tile,
                flops: d.flops,
                bytes: e.bytes,
                mxu_ns,
                vpu_ns,
                xlu_ns,
                hbm_ns: e.hbm_ns,
                overhead_ns,
                side_output_ns: e.side_ns,
                total_ns: e.total_ns,
                bottleneck,
                multiplier: m,
                untiled: e.est.is_none(),
            });
        }
        Ok(ProgramEstimate {
            total_ns,
            kernels: rows,
            warnings,
        })
    }
}

/// One kernel on `target` under `cfg` (`None` = no override: the default tile), or its
/// untiled roofline when that tile does not fit VMEM; side-output writes included.
fn eval_kernel(
    k: &LoweredKernel,
    target: &TpuTarget,
    cfg: Option<&TileConfig>,
) -> Result<Eval, ProgramError> {
    let desc = k.desc();
    let default = TileConfig::default();
    let res = crate::tpu::model::estimate_valid(desc, cfg.unwrap_or(&default), target);
    let est = match res {
        Ok(e) => e,
        // A tile that does not fit the scoped VMEM (the default, or one a configuration
        // or a measured run sets) is costed by the untiled roofline, with a warning.
        Err(ModelError::Infeasible { .. }) => {
            return Ok(roofline(k, target));
        }
        Err(source) => {
            return Err(ProgramError::Tile {
                kernel: desc.name.to_string(),
                source,
            })
        }
    };
    let (side_ns, side_bytes) = side_write(k, target, est.steps.max(1) as f64);
    // side writes hide behind compute slack, else add to the time
    let slack = (est.compute_ns - est.hbm_ns).max(0.0);
    let extra = (side_ns - slack).max(0.0);
    Ok(Eval {
        est: Some(est),
        total_ns: est.total_ns + extra,
        side_ns: extra,
        bytes: est.hbm_bytes + side_bytes,
        hbm_ns: est.hbm_ns + side_ns,
    })
}

/// Side-output write time (ns, not yet overlapped) and padded bytes.
fn side_write(k: &LoweredKernel, target: &TpuTarget, steps: f64) -> (f64, f64) {
    let mut ns = 0.0;
    let mut bytes = 0.0;
    let bw = target.core_hbm_bandwidth();
    for t in &k.side_outputs {
        let b = t.padded_bytes();
        let eff = target.hbm_efficiency_at(b / steps).max(1e-6);
        ns += b / (bw * eff) * 1e9;
        bytes += b;
    }
    (ns, bytes)
}

/// Untiled roofline for kernels whose default tile cannot fit VMEM (e.g. an
/// input dim that must be read whole): max(MXU-peak time, one pass over
/// every operand at the large-transfer bandwidth) + launch.
fn roofline(k: &LoweredKernel, target: &TpuTarget) -> Eval {
    let d = k.desc();
    let mut bytes = d.output.padded_bytes();
    for i in &d.inputs {
        bytes += i.tensor.padded_bytes();
    }
    for t in &k.side_outputs {
        bytes += t.padded_bytes();
    }
    let bw = target.core_hbm_bandwidth() * target.hbm_efficiency_at(bytes).max(1e-6);
    let hbm_ns = bytes / bw * 1e9;
    let compute_ns = d.flops / target.core_peak_bf16() * 1e9;
    let dispatch = if target.include_host_dispatch {
        target.host_dispatch_overhead_ns
    } else {
        0.0
    };
    Eval {
        est: None,
        total_ns: hbm_ns.max(compute_ns) + target.kernel_launch_overhead_ns + dispatch,
        side_ns: 0.0,
        bytes,
        hbm_ns,
    }
}

/// Σ over the node tree (`at(i)` = time of kernel `i`); records per-kernel
/// multipliers when asked.
fn fold(
    nodes: &[Node],
    at: &dyn Fn(usize) -> f64,
    mult: f64,
    rec: &mut Option<&mut Vec<f64>>,
) -> f64 {
    let mut total = 0.0;
    for n in nodes {
        match n {
            Node::Kernel(i) => {
                total += at(*i);
                if let Some(m) = rec.as_deref_mut() {
                    if let Some(slot) = m.get_mut(*i) {
                        *slot += mult;
                    }
                }
            }
            Node::Loop { trips, body, cond } => {
                let b = fold(body, at, mult * trips, rec);
                let c = fold(cond, at, mult * (trips + 1.0), rec);
                total += trips * b + (trips + 1.0) * c;
            }
            Node::Cond { branches } => {
                let mut best: Option<(usize, f64)> = None;
                for (bi, b) in branches.iter().enumerate() {
                    let t = fold(b, at, 0.0, &mut None);
                    if best.is_none_or(|(_, bt)| t > bt) {
                        best = Some((bi, t));
                    }
                }
                if let Some((bi, t)) = best {
                    total += t;
                    if rec.is_some() {
                        if let Some(b) = branches.get(bi) {
                            fold(b, at, mult, rec);
                        }
                    }
                }
            }
        }
    }
    total
}

/// Estimates `module` on `target` with `tiles` overriding the default tile of
/// the named kernels (see [`LoweredProgram`] to lower once and estimate many
/// times).
pub fn estimate_program(
    module: &Module,
    target: &TpuTarget,
    tiles: &TileOverrides,
) -> Result<ProgramEstimate, ProgramError> {
    LoweredProgram::new(module)?.estimate(target, tiles)
}

/// The teaching view of one kernel ([`explain_kernel`]); its `Display` is the text
/// `tpusim explain` prints, its JSON what `explain --json` prints (with the printed
/// lines and their formulas as `figures`).
#[derive(Debug, Clone)]
pub struct KernelExplanation {
    /// Kernel (instruction) name.
    pub kernel: String,
    /// Computation that holds it.
    pub computation: String,
    /// The instruction, and for a fusion its fused computation, as HLO text.
    pub hlo: String,
    /// How the kernel was lowered (its description, hero, side outputs).
    pub lowering: LoweredKernel,
    /// The tile evaluated (empty bounds = the compiler's default).
    pub tile: TileConfig,
    /// The same tile with every bound filled in, as TpuGraphs records a configuration
    /// (tile counts of the physical tiled shapes); `None` when the tile is not evaluable.
    pub tile_counts: Option<TileConfig>,
    /// The model's derivation under that tile.
    pub derivation: Derivation,
    /// The write of the side outputs (absent when there are none or the tile is not
    /// evaluable).
    pub side_outputs: Option<SideOutputs>,
    /// The tile does not fit VMEM, so the program model times the kernel with
    /// its untiled roofline (`total_ns`) instead of the derivation.
    pub untiled: bool,
    /// Time of one execution as the program model (`tpusim estimate`) counts it, ns;
    /// `None` when the tile override is not evaluable (estimate rejects it too).
    pub total_ns: Option<f64>,
}

/// Section 7 of an explanation: outputs written besides the main output.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SideOutputs {
    /// Padded bytes written.
    pub bytes: f64,
    /// DMA time of that write, ns.
    pub dma_ns: f64,
    /// What the write adds to the derivation's total (the part compute slack does not
    /// hide), ns.
    pub added_ns: f64,
}

impl KernelExplanation {
    /// The lines printed before the derivation (the lowering, the tile in TpuGraphs
    /// form), each with the formulas of its figures.
    pub fn head_figures(&self) -> Vec<Figure> {
        let mut v = describe(&self.lowering);
        v.push(Figure::plain(""));
        if let Some(t) = &self.tile_counts {
            v.push(Figure::new(
                format!(
                    "Tile, as TpuGraphs records it (tiles of the physical tiled shapes): output_bounds {:?}, kernel_bounds {:?}, input_bounds {:?}",
                    t.output_bounds, t.kernel_bounds, t.input_bounds
                ),
                &[Formula::TileCounts],
            ));
            v.push(Figure::plain(""));
        }
        v
    }

    /// The lines printed after the derivation (side outputs, the untiled roofline).
    pub fn tail_figures(&self) -> Vec<Figure> {
        let mut v = Vec::new();
        if let Some(s) = &self.side_outputs {
            v.push(Figure::plain(""));
            v.push(Figure::new(
                format!(
                    "7. Side outputs: {:.0} B padded written besides the main output, {:.1} ns of DMA; \
                     the program model adds max(0, side − max(0, compute − DMA)) to the total: {:.1} ns.",
                    s.bytes, s.dma_ns, s.added_ns
                ),
                &[Formula::SideOutputs],
            ));
            if let Some(t) = self.total_ns {
                v.push(Figure::new(
                    format!("   kernel time = {t:.1} ns ({:.3} µs)", t / 1e3),
                    &[Formula::KernelTotal, Formula::SideOutputs],
                ));
            }
        }
        if let (true, Some(t)) = (self.untiled, self.total_ns) {
            v.push(Figure::plain(""));
            v.push(Figure::new(
                format!(
                    "The tile does not fit VMEM: the program model uses the untiled roofline, \
                     max(peak-MXU time, one pass over every operand) + launch = {t:.1} ns ({:.3} µs).",
                    t / 1e3
                ),
                &[Formula::UntiledRoofline],
            ));
        }
        v
    }
}

/// The explanation's fields, and `figures`: the lines printed around the derivation
/// ([`KernelExplanation::head_figures`], then [`KernelExplanation::tail_figures`]); the
/// derivation's own lines are its `figures`.
impl Serialize for KernelExplanation {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("KernelExplanation", 11)?;
        st.serialize_field("kernel", &self.kernel)?;
        st.serialize_field("computation", &self.computation)?;
        st.serialize_field("hlo", &self.hlo)?;
        st.serialize_field("lowering", &self.lowering)?;
        st.serialize_field("tile", &self.tile)?;
        st.serialize_field("tile_counts", &self.tile_counts)?;
        st.serialize_field("derivation", &self.derivation)?;
        st.serialize_field("side_outputs", &self.side_outputs)?;
        st.serialize_field("untiled", &self.untiled)?;
        st.serialize_field("total_ns", &self.total_ns)?;
        let mut figures = self.head_figures();
        figures.extend(self.tail_figures());
        st.serialize_field("figures", &figures)?;
        st.end()
    }
}

impl std::fmt::Display for KernelExplanation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HLO:\n  {}\n", self.hlo)?;
        for x in self.head_figures() {
            writeln!(f, "{x}")?;
        }
        write!(f, "{}", self.derivation)?;
        for x in self.tail_figures() {
            writeln!(f, "{x}")?;
        }
        Ok(())
    }
}

/// The teaching view of one kernel: its HLO (the instruction, and the fused
/// computation for a fusion), how it was lowered, the model's full derivation
/// ([`derive`]) under `tile` (`None` = no override: the compiler's default, with the
/// program model's roofline fallback when that does not fit VMEM), and the kernel time
/// the program model counts (equal to `tpusim estimate`'s row).
pub fn explain_kernel(
    module: &Module,
    target: &TpuTarget,
    kernel_name: &str,
    tile: Option<&TileConfig>,
) -> Result<KernelExplanation, ProgramError> {
    let (ci, id, k) = find_kernel(module, kernel_name)?;
    let c = &module.computations[ci];
    let mut hlo = String::new();
    print_instruction(&mut hlo, module, c, id);
    hlo.push('\n');
    let ins = c.instr(id);
    if ins.opcode == Opcode::Fusion || ins.async_wrapped == Some(Opcode::Fusion) {
        if let Some(fc) = ins
            .attrs
            .called_with(CallRole::Calls)
            .and_then(|f| module.computations.get_index(f))
        {
            print_computation(&mut hlo, module, fc.1, false);
        }
    }
    let cfg = tile.cloned().unwrap_or_default();
    let derivation = derive(k.desc(), &cfg, target);
    let pk = ProgramKernel {
        lowered: k,
        computation: Name::from(c.name.as_str()),
        class: 0,
        entry: None,
    };
    // Only a tile override the model rejects fails here; the derivation says why.
    let eval = eval_kernel(&pk.lowered, target, tile).ok();
    let side_outputs = match (eval.and_then(|e| e.est), pk.lowered.side_outputs.is_empty()) {
        (Some(est), false) => {
            let (dma_ns, bytes) = side_write(&pk.lowered, target, est.steps.max(1) as f64);
            Some(SideOutputs {
                bytes,
                dma_ns,
                added_ns: eval.map_or(0.0, |e| e.side_ns),
            })
        }
        _ => None,
    };
    let tile_counts = crate::tpu::tile_sizes(pk.lowered.desc(), &cfg, target)
        .ok()
        .map(|sizes| TileConfig::from_sizes(pk.lowered.desc(), &sizes));
    Ok(KernelExplanation {
        kernel: pk.lowered.desc().name.to_string(),
        computation: pk.computation.to_string(),
        hlo,
        lowering: pk.lowered,
        tile_counts,
        tile: cfg,
        derivation,
        side_outputs,
        untiled: eval.is_some_and(|e| e.est.is_none()),
        total_ns: eval.map(|e| e.total_ns),
    })
}

/// The tile entries of a compilation configuration, as the program model's overrides
/// (kernel name → tile).
pub fn tile_overrides(kernels: &[Kernel]) -> TileOverrides {
    kernels
        .iter()
        .filter_map(|k| {
            k.tile.as_ref().map(|t| {
                (
                    k.name.clone(),
                    TileConfig {
                        output_bounds: t.output_bounds.clone(),
                        kernel_bounds: t.kernel_bounds.clone(),
                        input_bounds: t.input_bounds.clone(),
                    },
                )
            })
        })
        .collect()
}

/// The kernel named `kernel_name` (a fusion or an unfused instruction of the compiled
/// `module`), lowered: its computation, its instruction and its description. A name
/// inside a fused computation, or of an instruction that costs nothing, is an error
/// that says so.
pub fn find_kernel(
    module: &Module,
    kernel_name: &str,
) -> Result<(CompId, InstrId, LoweredKernel), ProgramError> {
    // fused computation → the fusion that calls it
    let mut fused_by: HashMap<CompId, &str> = HashMap::new();
    for c in module.computations.values() {
        for &id in &c.order {
            let ins = c.instr(id);
            if ins.opcode == Opcode::Fusion || ins.async_wrapped == Some(Opcode::Fusion) {
                for &(_, callee) in &ins.attrs.called {
                    fused_by.entry(callee).or_insert(ins.name.as_str());
                }
            }
        }
    }
    for (ci, c) in module.computations.values().enumerate() {
        let Some(id) = c.find(kernel_name) else {
            continue;
        };
        if let Some(f) = fused_by.get(&ci) {
            return Err(ProgramError::InsideFusion {
                name: kernel_name.to_string(),
                fusion: (*f).to_string(),
            });
        }
        let Some(k) = lower_kernel_full(module, ci, id)? else {
            return Err(ProgramError::NotAKernel(kernel_name.to_string()));
        };
        return Ok((ci, id, k));
    }
    Err(ProgramError::UnknownKernel(kernel_name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::generate::{sample_layouts, Search};
    use crate::dataset::layout_eval::LayoutEvaluator;

    /// What a kernel's structure key stands for: its description but the name, and its
    /// side outputs, compared as values.
    fn structure(k: &LoweredKernel) -> (KernelDesc, Vec<crate::tpu::kernel::TensorDesc>) {
        let mut d = k.desc().clone();
        d.name = Default::default();
        (d, k.side_outputs.clone())
    }

    /// Two kernels have equal structure keys (and so share a class) exactly when their
    /// descriptions but the name, and their side outputs, are equal: over the default
    /// and random layout configurations of two sample models.
    #[test]
    fn structure_keys_name_the_classes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("hlo_samples");
        for (name, configs) in [
            ("resnet18_infer_b8.hlo", 3),
            ("bert_base_infer_b8s128.hlo", 2),
        ] {
            let p = dir.join(name);
            let text = std::fs::read_to_string(&p).unwrap();
            let m = crate::hlo::parse_module(&p.display().to_string(), &text).unwrap();
            let v3 = TpuTarget::v3();
            let ev = LayoutEvaluator::new(&m, &v3);
            let prepared = PreparedModule::new(&m).unwrap();
            // kernels that share a class with an earlier one
            let mut shared = 0;
            let mut cfgs = vec![CompilationConfig::default()];
            cfgs.extend(
                sample_layouts(&ev, Search::Random, configs, 7)
                    .iter()
                    .map(|c| ev.compilation_config(c)),
            );
            for (c, cfg) in cfgs.iter().enumerate() {
                let program = compile_program(&prepared, cfg).unwrap().program;
                let keys: Vec<Vec<u8>> = program
                    .kernels
                    .iter()
                    .map(|k| {
                        let mut key = Vec::new();
                        structure_key(&k.lowered, &mut key);
                        key
                    })
                    .collect();
                let ks = &program.kernels;
                shared += ks.len() - program.classes.len();
                let structures: Vec<_> = ks.iter().map(|k| structure(&k.lowered)).collect();
                for i in 0..ks.len() {
                    for j in 0..ks.len() {
                        let same = keys[i] == keys[j];
                        assert!(
                            same == (structures[i] == structures[j])
                                && same == (ks[i].class == ks[j].class),
                            "{name}, config {c}: kernels {} and {}",
                            ks[i].lowered.desc().name,
                            ks[j].lowered.desc().name
                        );
                    }
                }
            }
            assert!(shared > 0, "{name}: no kernels share a class");
        }
    }
}
