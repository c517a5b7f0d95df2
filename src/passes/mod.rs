//! The compiler simulator: layout assignment and fusion under a [`CompilationConfig`],
//! as XLA's TPU pipeline does them (docs/passes.md).
//!
//! ```no_run
//! use tpusim::passes::{compile, CompilationConfig};
//! let text = std::fs::read_to_string("model.hlo").unwrap();
//! let module = tpusim::hlo::parse_module("model.hlo", &text).unwrap();
//! let compiled = compile(&module, &CompilationConfig::default()).unwrap();
//! println!("{}", tpusim::hlo::print_module(&compiled.module));
//! println!("{}", compiled.kernels_json());
//! ```

pub mod config;
pub mod emit;
pub mod error;
mod flat;
pub mod fusion;
pub mod kernel;
pub mod layout;
pub mod tiling;
pub mod verify;

pub use config::{
    configurable_nodes, is_configurable, CompilationConfig, FusionConfig, FusionOverride,
    FusionPolicy, KernelRef, LayoutEntry, NodeRef, NodeTable, TileBounds, TileEntry,
    CONFIGURABLE_OPCODES,
};
pub use error::CompileError;
pub use kernel::{
    BodyAttrs, BodyInstr, BodyNode, CallSite, Kernel, KernelBodies, KernelBody, KernelKind,
    ParameterNumber, PhysicalShape, SiteRole,
};
pub use layout::{complete_layout, written_minor_to_major, LayoutStats};

use serde::Serialize;

use crate::ir::{Module, Opcode};
use emit::EmitMode;

/// Counters of one compilation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CompileStats {
    /// Instructions in the input module.
    pub input_instructions: usize,
    /// Instructions in the output module (fused computations included).
    pub output_instructions: usize,
    /// `copy` instructions inserted by layout assignment.
    pub copies_inserted: usize,
    /// Transposes/reshapes that became bitcasts.
    pub bitcasts: usize,
    /// Fusion instructions created.
    pub fusions: usize,
}

/// A compiled module: the module after layout assignment and fusion, and its kernels.
#[derive(Debug, Clone)]
pub struct CompiledModule {
    /// Valid HLO: `hlo::print_module` prints it and `hlo::parse_module` reads it back.
    pub module: Module,
    /// Fusions and unfused instructions, in execution order (entry computation order;
    /// the kernels of a while body/condition or conditional branch follow the kernels
    /// before the `while`/`conditional`, tagged with their [`CallSite`]).
    pub kernels: Vec<Kernel>,
    pub stats: CompileStats,
    /// Fusion overrides that could not be honoured, with the reason.
    pub notes: Vec<String>,
}

/// JSON view of a compiled module's kernels.
#[derive(Debug, Serialize)]
pub struct KernelsView<'a> {
    pub module: &'a str,
    pub stats: CompileStats,
    pub kernels: &'a [Kernel],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub notes: &'a [String],
}

impl CompiledModule {
    /// Pretty JSON: `{"module", "stats", "kernels": [...], "notes"}`.
    pub fn kernels_json(&self) -> String {
        serde_json::to_string_pretty(&KernelsView {
            module: &self.module.name,
            stats: self.stats,
            kernels: &self.kernels,
            notes: &self.notes,
        })
        .unwrap_or_default()
    }
}

/// Compile `module` under `config`: inline calls, assign layouts (inserting copies and
/// bitcasts, attaching TPU tiles), fuse, and list the kernels. The input is not modified.
/// The module is self-checked with [`verify::verify`] in debug builds (call it yourself
/// in release builds if you want the check). To compile one module under many
/// configurations, use [`PreparedModule`].
pub fn compile(
    module: &Module,
    config: &CompilationConfig,
) -> Result<CompiledModule, CompileError> {
    PreparedModule::new(module)?.compile(config)
}

/// A compilation as the cost model reads it ([`PreparedModule::compile_bodies`]): the
/// kernels with their instructions, without building the output module. `'m` is the
/// input module's lifetime: the bodies borrow its attributes.
#[derive(Debug, Clone)]
pub struct CompiledBodies<'m> {
    /// Exactly `compile(module, config)?.kernels`.
    pub kernels: Vec<Kernel>,
    /// The instructions of each kernel, in the order of `kernels`.
    pub bodies: KernelBodies<'m>,
    /// For a program that is not straight-line, the output module without the contents
    /// of the fusions the compiler makes (their computations are empty placeholders, so
    /// it is not valid HLO and never leaves the crate): the program's loops,
    /// conditionals, called computations and input fusions, which
    /// `kernels::compile_program` walks.
    pub(crate) skeleton: Option<Module>,
    pub stats: CompileStats,
    pub notes: Vec<String>,
}

/// A module prepared for many compilations (one per configuration): node
/// numbering, call inlining and the name index are done once. `Sync`: share it across
/// threads and compile different configurations in parallel. It keeps the work buffers
/// of finished compilations (a few MB per thread that compiled at the same time) for
/// the next ones until it is dropped.
pub struct PreparedModule<'m> {
    module: &'m Module,
    flat: flat::Flat<'m>,
    /// The fusion pass's view of each computation of `flat`.
    fusion: Vec<fusion::FusionBase>,
    /// The layout solver's tables of each computation of `flat`.
    layout: Vec<layout::SolverStart>,
    names: std::sync::OnceLock<config::Names<'m>>,
    straight: std::sync::OnceLock<bool>,
    /// Work buffers of finished compilations, reused by the next ones (one per thread
    /// compiling at the same time): a compilation touches a few MB of scratch memory,
    /// and reusing it avoids the allocator handing fresh pages back and forth.
    pool: std::sync::Mutex<Vec<Scratch<'m>>>,
}

/// Reusable work buffers of one compilation.
struct Scratch<'m> {
    flat: flat::Flat<'m>,
    emit: emit::EmitScratch,
    fusion: fusion::FusionScratch,
    plans: Vec<fusion::FusionPlan>,
    layout: layout::LayoutScratch,
}

impl CompiledBodies<'_> {
    /// [`PreparedModule::is_straight_line`]: the kernels in order are the whole program
    /// (no skeleton was needed).
    pub fn is_straight_line(&self) -> bool {
        self.skeleton.is_none()
    }
}

impl<'m> PreparedModule<'m> {
    /// Number the nodes and inline calls.
    pub fn new(module: &'m Module) -> Result<Self, CompileError> {
        let flat = flat::Flat::build(module)?;
        Ok(PreparedModule {
            module,
            fusion: flat.comps.iter().map(fusion::FusionBase::new).collect(),
            layout: flat.comps.iter().map(layout::SolverStart::of).collect(),
            flat,
            names: std::sync::OnceLock::new(),
            straight: std::sync::OnceLock::new(),
            pool: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The module.
    pub fn module(&self) -> &'m Module {
        self.module
    }

    /// TpuGraphs node numbering of the module.
    pub fn node_table(&self) -> &NodeTable {
        &self.flat.table
    }

    /// Same as [`compile`].
    pub fn compile(&self, config: &CompilationConfig) -> Result<CompiledModule, CompileError> {
        let (out, kernels, _, stats, notes) = self.run(config, EmitMode::Module)?;
        let out = out.ok_or_else(|| CompileError::Verify {
            module: self.module.name.clone(),
            message: "internal: no module emitted".into(),
        })?;
        if cfg!(debug_assertions) {
            verify::verify(&out)?;
        }
        Ok(CompiledModule {
            module: out,
            kernels,
            stats,
            notes,
        })
    }

    /// Whether the compiled program is straight-line code: one computation (calls
    /// inlined) without `while`, `conditional`, async operations or fusions of the input.
    /// Then its kernels in order are the whole program, and
    /// [`PreparedModule::compile_bodies`] lists everything the cost model reads.
    pub fn is_straight_line(&self) -> bool {
        *self.straight.get_or_init(|| {
            self.flat.comps.len() == 1
                && self.flat.comps[0].nodes.iter().all(|n| {
                    !(n.opcode.is_control_flow()
                        || n.opcode.is_async_wrapper()
                        || n.opcode == Opcode::Fusion)
                })
        })
    }

    /// The compilation every cost is taken from: the kernels and the instructions of
    /// each ([`KernelBody`]: what the kernels of the output module would hold), and for
    /// a program that is not [straight-line](Self::is_straight_line) the skeleton of the
    /// output module, without building the module itself (it has ~3.5× the input's
    /// instructions, and building it dominates [`PreparedModule::compile`]).
    /// `kernels::compile_program` lowers it exactly as `kernels::LoweredProgram::new`
    /// lowers the module of [`PreparedModule::compile`] (`tests/compile_bodies.rs`).
    pub fn compile_bodies(
        &self,
        config: &CompilationConfig,
    ) -> Result<CompiledBodies<'m>, CompileError> {
        self.bodies_with(config, true)
    }

    /// [`PreparedModule::compile_bodies`] for a caller that keeps only the cost: the
    /// kernel list leaves out the physical shapes of the kernels' operands and outputs
    /// ([`Kernel::parameters`], `outputs`, `hero_operands`: empty), which lowering and
    /// the estimate do not read. The same bodies, kernels otherwise, and skeleton.
    pub(crate) fn compile_bodies_for_cost(
        &self,
        config: &CompilationConfig,
    ) -> Result<CompiledBodies<'m>, CompileError> {
        self.bodies_with(config, false)
    }

    fn bodies_with(
        &self,
        config: &CompilationConfig,
        shapes: bool,
    ) -> Result<CompiledBodies<'m>, CompileError> {
        let mode = EmitMode::Program {
            skeleton: !self.is_straight_line(),
            shapes,
        };
        let (skeleton, kernels, bodies, stats, notes) = self.run(config, mode)?;
        Ok(CompiledBodies {
            kernels,
            bodies,
            skeleton,
            stats,
            notes,
        })
    }

    fn run(
        &self,
        config: &CompilationConfig,
        mode: EmitMode,
    ) -> Result<RunOutput<'m>, CompileError> {
        let module = self.module;
        let resolved = config::resolve(module, &self.flat.table, config, &self.names)?;
        check_overrides(&self.flat, &resolved, module)?;
        let mut scratch = self.take_scratch();
        let result = self.run_in(&mut scratch, &resolved, config, mode);
        self.give_back(scratch);
        result
    }

    fn take_scratch(&self) -> Scratch<'m> {
        let pooled = self.pool.lock().ok().and_then(|mut p| p.pop());
        match pooled {
            Some(mut s) => {
                s.flat.reset_to(&self.flat);
                s
            }
            None => Scratch {
                flat: self.flat.clone(),
                emit: Default::default(),
                fusion: Default::default(),
                plans: Vec::new(),
                layout: Default::default(),
            },
        }
    }

    fn give_back(&self, s: Scratch<'m>) {
        if let Ok(mut p) = self.pool.lock() {
            p.push(s);
        }
    }

    fn run_in(
        &self,
        scratch: &mut Scratch<'m>,
        resolved: &config::ResolvedConfig,
        config: &CompilationConfig,
        mode: EmitMode,
    ) -> Result<RunOutput<'m>, CompileError> {
        let module = self.module;
        let Scratch {
            flat,
            emit: es,
            fusion: fs,
            plans,
            layout: ls,
        } = scratch;
        let lstats = layout::assign(flat, &self.layout, resolved, ls);
        plans.resize_with(flat.comps.len(), Default::default);
        for (i, (fc, plan)) in flat.comps.iter().zip(plans.iter_mut()).enumerate() {
            fusion::plan(fc, self.fusion.get(i), resolved, fs, plan);
        }
        let notes: Vec<String> = plans.iter().flat_map(|p| p.notes.iter().cloned()).collect();
        let emitted = emit::emit(flat, plans, mode, es)?;
        let mut kernels = emitted.kernels;
        apply_tiles(&mut kernels, config)?;
        let stats = CompileStats {
            input_instructions: module.instruction_count(),
            output_instructions: emitted.instructions,
            copies_inserted: lstats.copies,
            bitcasts: lstats.bitcasts,
            fusions: kernels
                .iter()
                .filter(|k| k.fused_computation.is_some())
                .count(),
        };
        Ok((emitted.module, kernels, emitted.bodies, stats, notes))
    }
}

type RunOutput<'m> = (
    Option<Module>,
    Vec<Kernel>,
    KernelBodies<'m>,
    CompileStats,
    Vec<String>,
);

/// Every fusion override must name a real producer → consumer edge (after inlining).
fn check_overrides(
    flat: &flat::Flat<'_>,
    cfg: &config::ResolvedConfig,
    m: &Module,
) -> Result<(), CompileError> {
    if cfg.no_fuse.is_empty() && cfg.force_fuse.is_empty() {
        return Ok(());
    }
    let mut edges = std::collections::HashSet::new();
    for fc in &flat.comps {
        for n in &fc.nodes {
            for &o in &n.operands {
                if let (Some(po), Some(co)) = (fc.nodes[o as usize].origin.get(), n.origin.get()) {
                    edges.insert((po, co));
                }
            }
        }
    }
    let name = |i: usize| {
        flat.table
            .nodes
            .get(i)
            .map(|&(c, id)| m.comp(c).instr(id).name.to_string())
            .unwrap_or_else(|| format!("#{i}"))
    };
    for &(p, c) in cfg.no_fuse.iter().chain(cfg.force_fuse.iter()) {
        if !edges.contains(&(p, c)) {
            return Err(CompileError::NotAnEdge {
                producer: name(p),
                consumer: name(c),
            });
        }
    }
    Ok(())
}

/// Attach configured tile bounds to kernels, checking them against the tensors.
fn apply_tiles(kernels: &mut [Kernel], cfg: &CompilationConfig) -> Result<(), CompileError> {
    if cfg.tile.is_empty() {
        return Ok(());
    }
    let by_name: std::collections::HashMap<&str, usize> = kernels
        .iter()
        .enumerate()
        .map(|(i, k)| (k.name.as_str(), i))
        .collect();
    let mut seen = std::collections::HashSet::new();
    let mut assign: Vec<(usize, TileBounds)> = Vec::new();
    for t in &cfg.tile {
        let i = match &t.kernel {
            KernelRef::Index(i) if *i < kernels.len() => *i,
            KernelRef::Name(n) if by_name.contains_key(n.strip_prefix('%').unwrap_or(n)) => {
                by_name[n.strip_prefix('%').unwrap_or(n)]
            }
            other => {
                return Err(CompileError::UnknownKernel {
                    kernel: other.to_string(),
                    count: kernels.len(),
                })
            }
        };
        let k = &kernels[i];
        let label = format!("'{}' (#{i})", k.name);
        if !seen.insert(i) {
            return Err(CompileError::DuplicateTile { kernel: label });
        }
        // The bounds themselves (their count, each against its extent in tiles) are
        // checked by the cost model, which knows the kernel's iteration-space tensor
        // (`tpu::TileConfig`, `tpu::bounds_tensor`).
        assign.push((i, t.bounds.clone()));
    }
    for (i, b) in assign {
        kernels[i].tile = Some(b);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module of `hlo_samples/`.
    fn sample(file: &str) -> crate::ir::Module {
        let path = format!("{}/hlo_samples/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        crate::hlo::parse_module(&path, &text).unwrap()
    }

    /// A scratch of `p` laid out under the random configuration `seed` (layout
    /// assignment only), and the copies it inserted.
    fn laid_out<'m>(p: &PreparedModule<'m>, seed: u64) -> (Scratch<'m>, usize) {
        let m = p.module;
        let config = CompilationConfig::random_layouts(m, seed);
        let resolved = config::resolve(m, &p.flat.table, &config, &p.names).unwrap();
        let mut s = p.take_scratch();
        let copies = layout::assign(&mut s.flat, &p.layout, &resolved, &mut s.layout).copies;
        (s, copies)
    }

    /// Layout assignment keeps the user lists up to date edge by edge as it inserts
    /// copies: they are the lists built whole from the operands, in program order.
    #[test]
    fn inserted_copies_leave_the_user_lists_that_a_rebuild_makes() {
        for (file, least) in [("resnet18_infer_b8.hlo", 100), ("mlp_train.hlo", 1)] {
            let m = sample(file);
            let p = PreparedModule::new(&m).unwrap();
            let mut copies = 0;
            for seed in 0..4 {
                let (s, n) = laid_out(&p, seed);
                copies += n;
                for fc in &s.flat.comps {
                    let mut whole = fc.clone();
                    whole.rebuild_users();
                    for (k, (a, b)) in fc.nodes.iter().zip(&whole.nodes).enumerate() {
                        assert_eq!(a.users, b.users, "{file} seed {seed}: node {k}");
                    }
                }
                p.give_back(s);
            }
            assert!(copies >= least, "{file}: {copies} copies");
        }
    }

    /// A pooled copy of the prepared module that a compilation changed (copies added,
    /// operands and user lists rewired, bitcasts, layouts) is the prepared module again,
    /// node for node but for the layouts (which the next layout assignment writes),
    /// once taken for the next compilation.
    #[test]
    fn a_scratch_taken_again_is_the_prepared_module() {
        for file in ["resnet18_infer_b8.hlo", "resnet50_train_b8.optimized.hlo"] {
            let m = sample(file);
            let p = PreparedModule::new(&m).unwrap();
            for seed in 0..3 {
                let config = CompilationConfig::random_layouts(&m, seed);
                p.compile_bodies(&config).unwrap();
                let touched: usize = {
                    let pool = p.pool.lock().unwrap();
                    let s = pool.last().unwrap();
                    assert!(s.flat.comps.iter().any(|fc| !fc.nodes.is_empty()));
                    s.flat.comps.iter().map(|fc| fc.touched.len()).sum()
                };
                assert!(touched > 0, "{file} seed {seed}: nothing touched");
                let s = p.take_scratch();
                assert_eq!(s.flat.comps.len(), p.flat.comps.len());
                for (fc, pc) in s.flat.comps.iter().zip(&p.flat.comps) {
                    assert_eq!(fc.nodes.len(), pc.nodes.len(), "{file} seed {seed}");
                    for (k, (a, b)) in fc.nodes.iter().zip(&pc.nodes).enumerate() {
                        assert!(a.same_but_layouts(b), "{file} seed {seed}: node {k}");
                    }
                    assert_eq!(fc.order, pc.order);
                    assert_eq!((fc.root, &fc.params), (pc.root, &pc.params));
                    assert!(fc.touched.is_empty() && !fc.rebuilt);
                }
                p.give_back(s);
            }
        }
    }

    /// The fusion pass starts a laid-out computation from its prepared base
    /// ([`fusion::FusionBase`]) with every node's flags as read from the node itself:
    /// the nodes a configuration changes (copies added, operands rewired, bitcasts,
    /// copies laid out) are read anew.
    #[test]
    fn the_fusion_base_gives_every_node_its_own_state() {
        let files = [
            "resnet18_infer_b8.hlo",
            "resnet50_train_b8.optimized.hlo",
            "bert_base_infer_b8s128.hlo",
        ];
        for file in files {
            let m = sample(file);
            let p = PreparedModule::new(&m).unwrap();
            let mut changed = 0;
            for seed in 0..4 {
                let (s, _) = laid_out(&p, seed);
                for (i, fc) in s.flat.comps.iter().enumerate() {
                    let (from_base, n) = fusion::starts(fc, p.fusion.get(i));
                    let (read, _) = fusion::starts(fc, None);
                    assert_eq!(from_base, read, "{file} seed {seed}: computation {i}");
                    changed += n;
                }
                p.give_back(s);
            }
            assert!(changed > 0, "{file}: no node's start changed");
        }
    }

    /// The compilation the labels take ([`PreparedModule::compile_bodies_for_cost`]) is
    /// [`PreparedModule::compile_bodies`] with the kernels' physical shapes left out.
    #[test]
    fn the_cost_compilation_leaves_out_only_the_kernel_shapes() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/hlo_samples/mlp_train.hlo");
        let text = std::fs::read_to_string(path).unwrap();
        let m = crate::hlo::parse_module(path, &text).unwrap();
        let p = PreparedModule::new(&m).unwrap();
        let config = CompilationConfig::default();
        let full = p.compile_bodies(&config).unwrap();
        let cost = p.compile_bodies_for_cost(&config).unwrap();
        assert_eq!(cost.kernels.len(), full.kernels.len());
        assert!(full.kernels.iter().all(|k| !k.outputs.is_empty()));
        let with_shapes = full
            .kernels
            .iter()
            .filter(|k| !k.parameters.is_empty())
            .count();
        assert!(with_shapes > 0);
        for (c, f) in cost.kernels.iter().zip(&full.kernels) {
            assert!(c.parameters.is_empty() && c.outputs.is_empty());
            assert!(c.hero_operands.is_empty());
            let mut f = f.clone();
            f.parameters.clear();
            f.outputs.clear();
            f.hero_operands.clear();
            assert_eq!(*c, f);
        }
        assert_eq!(format!("{:?}", cost.bodies), format!("{:?}", full.bodies));
        assert_eq!(cost.skeleton, full.skeleton);
        assert_eq!(cost.stats, full.stats);
        assert_eq!(cost.notes, full.notes);
    }
}
