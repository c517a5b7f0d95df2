//! What a configuration can address in a module: its kernels (the tile collection's
//! unit, `[[tile]] kernel = …`) and its configurable nodes (the layout collection's,
//! `[[layout]] node = …`), with their indices. `tpusim list` prints it.
//!
//! The kernels are the compiler's ([`crate::kernels::compile_program`]); the nodes are the layout
//! evaluator's ([`LayoutEvaluator::nodes`]), in the order of `generate layout`'s
//! `node_config_ids` and `node_config_feat` rows.

use serde::Serialize;

use super::graph::{encode_graph, GraphError};
use super::layout_eval::{LayoutEvalError, LayoutEvaluator};
use crate::ir::Module;
use crate::kernels::{compile_program, ProgramError};
use crate::passes::{CompilationConfig, CompileError, KernelKind, PreparedModule};
use crate::tpu::{default_tile, TileConfig, TpuTarget};

/// One kernel of the compiled module.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelEntry {
    /// Position in execution order (`Kernel::index`; a configuration's tile index).
    pub index: usize,
    pub name: String,
    pub kind: KernelKind,
    /// Opcode name of the hero instruction.
    pub hero: &'static str,
    pub hero_name: String,
    /// Computation that holds the kernel.
    pub computation: String,
    /// Extents of the iteration space (output dims major→minor, then reductions);
    /// empty for a kernel that costs nothing.
    pub iteration_space: Vec<i64>,
    /// The tile the model uses: the configuration's, else the compiler's default
    /// (`None` for a kernel that costs nothing).
    pub tile: Option<TileConfig>,
}

/// One configurable node (convolution, dot or reshape) of the input module.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeEntry {
    /// Position among the configurable nodes: the row of `node_config_feat`.
    pub index: usize,
    /// TpuGraphs node index, as a layout entry's `node = N` takes it.
    pub node: usize,
    /// Its index in the encoded graph: the value of `node_config_ids`.
    pub graph_node: Option<usize>,
    pub name: String,
    /// Opcode name.
    pub opcode: &'static str,
    /// Ranks of the output, operand 0 (input) and operand 1 (kernel); 0 when absent
    /// or not an array.
    pub ranks: [usize; 3],
}

/// A module's kernels and configurable nodes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModuleListing {
    pub module: String,
    /// Kernels in execution order (`None` when not asked for).
    pub kernels: Option<Vec<KernelEntry>>,
    /// Configurable nodes in layout-configuration order (`None` when not asked for).
    pub nodes: Option<Vec<NodeEntry>>,
}

/// Why a module cannot be listed.
#[derive(Debug, thiserror::Error)]
pub enum ListingError {
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error(transparent)]
    Program(#[from] ProgramError),
    #[error(transparent)]
    Layout(#[from] LayoutEvalError),
    #[error(transparent)]
    Graph(#[from] GraphError),
}

/// The kernels of `module` compiled under `config`, in execution order, with the tile
/// the model gives each on `target`.
pub fn list_kernels(
    module: &Module,
    config: &CompilationConfig,
    target: &TpuTarget,
) -> Result<Vec<KernelEntry>, ListingError> {
    let c = compile_program(&PreparedModule::new(module)?, config)?;
    let program = &c.program;
    Ok(c.kernels
        .iter()
        .map(|k| {
            let desc = program
                .kernel_index(&k.name)
                .and_then(|i| program.kernels.get(i))
                .map(|p| p.lowered.desc());
            let tile = desc.map(|d| match &k.tile {
                Some(t) => TileConfig {
                    output_bounds: t.output_bounds.clone(),
                    kernel_bounds: t.kernel_bounds.clone(),
                    input_bounds: t.input_bounds.clone(),
                },
                None => default_tile(d, target),
            });
            KernelEntry {
                index: k.index,
                name: k.name.to_string(),
                kind: k.kind,
                hero: k.hero.name(),
                hero_name: k.hero_name.to_string(),
                computation: k.computation_name.to_string(),
                iteration_space: desc
                    .map(|d| (0..d.n_iter()).map(|i| d.iter_extent(i)).collect())
                    .unwrap_or_default(),
                tile,
            }
        })
        .collect())
}

/// The configurable nodes of `module` as the layout evaluator (and so `generate
/// layout`) sees them, in its order.
pub fn list_nodes(module: &Module, target: &TpuTarget) -> Result<Vec<NodeEntry>, ListingError> {
    let mut ev = LayoutEvaluator::new(module, target);
    let g = encode_graph(module)?;
    ev.order_as_graph(&g)?;
    Ok(ev
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| NodeEntry {
            index: i,
            node: n.index,
            graph_node: g.node_of(n.comp, n.instr),
            name: n.name.clone(),
            opcode: n.opcode.name(),
            ranks: n.ranks,
        })
        .collect())
}

/// [`list_kernels`] and/or [`list_nodes`].
pub fn list_module(
    module: &Module,
    config: &CompilationConfig,
    target: &TpuTarget,
    kernels: bool,
    nodes: bool,
) -> Result<ModuleListing, ListingError> {
    Ok(ModuleListing {
        module: module.name.clone(),
        kernels: if kernels {
            Some(list_kernels(module, config, target)?)
        } else {
            None
        },
        nodes: if nodes {
            Some(list_nodes(module, target)?)
        } else {
            None
        },
    })
}
