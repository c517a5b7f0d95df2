//! The compilation configuration: per-node layouts, fusion policy and overrides, per-kernel
//! tile sizes — the configuration space TpuGraphs explores — with JSON/TOML loading and
//! validation against a module.

use petgraph::visit::NodeIndexable;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::error::CompileError;
use super::layout::{complete_layout, written_minor_to_major};
use crate::ir::{CompId, Dims, InstrId, Module, Opcode};
use crate::rng::SplitMix64;

/// Opcodes whose layouts a configuration may set.
///
/// TpuGraphs' layout collections only expose `convolution`, `dot` and `reshape` nodes
/// (`node_config_ids` of the released files and of the sample proto hold nothing else),
/// which is what XLA's TPU layout autotuner tunes: the operands of the MXU ops and the
/// reshapes whose layout decides whether they are free bitcasts or physical relayouts.
/// Every other op's layout follows from these by propagation (elementwise ops, slices,
/// concatenates, pads... must equal their operands'; transposes are made bitcasts;
/// reduces drop the reduced dims), so exposing them would only add redundant knobs.
pub const CONFIGURABLE_OPCODES: &[Opcode] = &[Opcode::Convolution, Opcode::Dot, Opcode::Reshape];

/// True if a layout configuration may target this opcode.
pub fn is_configurable(op: Opcode) -> bool {
    CONFIGURABLE_OPCODES.contains(&op)
}

/// A node, by instruction name or by TpuGraphs node index (the position in the
/// concatenation of all computations' instructions, computations in module order,
/// instructions in program order).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NodeRef {
    Index(usize),
    Name(String),
}

impl std::fmt::Display for NodeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeRef::Index(i) => write!(f, "#{i}"),
            NodeRef::Name(n) => write!(f, "'{n}'"),
        }
    }
}

/// Layout of one configurable node: up to three `minor_to_major` prefixes (the most-minor
/// dims, most-minor first; any length up to the rank, a full permutation included), as
/// TpuGraphs records them; the compiler completes them ([`complete_layout`]). Empty (or
/// all `-1`, TpuGraphs' padding) = compiler's choice. Trailing `-1` entries are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutEntry {
    pub node: NodeRef,
    /// Output tensor layout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output: Vec<i64>,
    /// Operand 0 layout (the activation input).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input: Vec<i64>,
    /// Operand 1 layout (convolution kernel / dot right-hand side).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel: Vec<i64>,
}

impl LayoutEntry {
    /// From one TpuGraphs `node_config_feat[j, k]` row (18 floats: output, input, kernel,
    /// six dims each, `-1` padded).
    pub fn from_tpugraphs_row(node: usize, row: &[f32]) -> Self {
        let part = |k: usize| -> Vec<i64> {
            row.iter()
                .skip(6 * k)
                .take(6)
                .map(|&x| x as i64)
                .take_while(|&x| x >= 0)
                .collect()
        };
        LayoutEntry {
            node: NodeRef::Index(node),
            output: part(0),
            input: part(1),
            kernel: part(2),
        }
    }

    /// The 18-float TpuGraphs feature row of this entry.
    pub fn to_tpugraphs_row(&self) -> [f32; 18] {
        let mut row = [-1f32; 18];
        for (k, l) in [&self.output, &self.input, &self.kernel]
            .into_iter()
            .enumerate()
        {
            for (i, &d) in l.iter().take(6).enumerate() {
                row[6 * k + i] = d as f32;
            }
        }
        row
    }
}

/// Fusion policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FusionPolicy {
    /// XLA-like TPU fusion (docs/passes.md).
    #[default]
    Xla,
    /// No fusion: every non-trivial instruction is its own kernel.
    None,
    /// Also duplicates expensive elementwise producers, fuses reductions into
    /// consumers that re-read them, and allows up to 8 reductions per loop fusion.
    Aggressive,
}

/// Force or forbid fusing `producer` into `consumer` (instruction names of the input
/// module; the producer must be an operand of the consumer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FusionOverride {
    pub producer: NodeRef,
    pub consumer: NodeRef,
    /// `true` = fuse whenever structurally possible, `false` = never fuse this edge.
    pub fuse: bool,
}

/// Fusion part of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FusionConfig {
    pub policy: FusionPolicy,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<FusionOverride>,
}

/// A kernel, by name (fusion instruction name, or the instruction name of an unfused
/// kernel) or by its index in [`super::CompiledModule::kernels`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KernelRef {
    Index(usize),
    Name(String),
}

impl std::fmt::Display for KernelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelRef::Index(i) => write!(f, "#{i}"),
            KernelRef::Name(n) => write!(f, "'{n}'"),
        }
    }
}

/// TpuGraphs `TileSizeConfig` bounds: tile counts of a tensor's physical tiled shape,
/// in its physical order (major → minor), as the real tuning data records them
/// (`tpu::TileConfig`); empty = the compiler's default tile (chosen by the cost model).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TileBounds {
    /// Tiles of the kernel's iteration-space tensor (a reduction's operand, else the
    /// output).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output_bounds: Vec<i64>,
    /// Tiles of the convolution filter / dot RHS (operand 1 of the hero).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kernel_bounds: Vec<i64>,
    /// Tiles of the hero's operand 0, for reduction dims the others leave unset.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub input_bounds: Vec<i64>,
}

impl TileBounds {
    /// True when all three lists are empty (compiler default).
    pub fn is_default(&self) -> bool {
        self.output_bounds.is_empty()
            && self.kernel_bounds.is_empty()
            && self.input_bounds.is_empty()
    }
}

/// Tile entry for one kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TileEntry {
    pub kernel: KernelRef,
    #[serde(flatten)]
    pub bounds: TileBounds,
}

/// A compilation configuration. The default (all empty, policy `xla`) is what the
/// compiler picks by itself.
///
/// TOML example:
/// ```toml
/// [fusion]
/// policy = "xla"
/// overrides = [{ producer = "add.3", consumer = "multiply.4", fuse = false }]
///
/// [[layout]]
/// node = "convolution.7"        # or a TpuGraphs node index: node = 812
/// output = [3, 0, 2, 1]        # a full minor_to_major
/// input = [0, 3]                # or a prefix: the most-minor dims, completed
/// kernel = []                   # compiler's choice
///
/// [[tile]]
/// kernel = "fusion.12"          # or a kernel index: kernel = 5
/// output_bounds = [1, 8, 4, 2]  # tile counts of the iteration-space tensor
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompilationConfig {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub layout: Vec<LayoutEntry>,
    pub fusion: FusionConfig,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tile: Vec<TileEntry>,
}

impl CompilationConfig {
    /// Parse JSON text.
    pub fn from_json_str(text: &str) -> Result<Self, CompileError> {
        serde_json::from_str(text).map_err(|e| CompileError::ConfigSyntax {
            source_name: "(json)".into(),
            message: e.to_string(),
        })
    }

    /// Parse TOML text.
    pub fn from_toml_str(text: &str) -> Result<Self, CompileError> {
        toml::from_str(text).map_err(|e| CompileError::ConfigSyntax {
            source_name: "(toml)".into(),
            message: e.to_string(),
        })
    }

    /// Read a `.json` or `.toml` file (any other extension is an error, as is a file
    /// past [`crate::limits::CONFIG_FILE_BYTES`]).
    pub fn from_path(path: &Path) -> Result<Self, CompileError> {
        let name = path.display().to_string();
        let fail = |message: String| CompileError::ConfigSyntax {
            source_name: name.clone(),
            message,
        };
        let is_toml = match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => true,
            Some("json") => false,
            _ => {
                return Err(fail(
                    "a configuration file must end in .json or .toml".into(),
                ))
            }
        };
        let text = crate::limits::read_text(path, crate::limits::CONFIG_FILE_BYTES)
            .map_err(|e| fail(e.to_string()))?;
        let r = if is_toml {
            Self::from_toml_str(&text)
        } else {
            Self::from_json_str(&text)
        };
        r.map_err(|e| match e {
            CompileError::ConfigSyntax { message, .. } => CompileError::ConfigSyntax {
                source_name: name,
                message,
            },
            other => other,
        })
    }

    /// Pretty JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// TOML text.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// A random layout configuration for tests and benches: every configurable node
    /// gets, for each of its tensors, with probability 1/2 a uniformly random full
    /// permutation, else "compiler's choice". Deterministic in `seed`. (`tpusim generate
    /// layout` samples in the real data's prefix style instead: `LayoutSampler`.)
    pub fn random_layouts(module: &Module, seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        let mut layout = Vec::new();
        for (c, id, idx) in configurable_nodes(module) {
            let comp = module.comp(c);
            let ins = comp.instr(id);
            let perm = |rank: usize, rng: &mut SplitMix64| -> Vec<i64> {
                if rng.next_u64() & 1 == 0 {
                    return Vec::new();
                }
                let mut v: Vec<i64> = (0..rank as i64).collect();
                for i in (1..v.len()).rev() {
                    let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                    v.swap(i, j);
                }
                v
            };
            let rank_of = |slot: usize| {
                comp.operand(id, slot)
                    .map(|o| comp.instr(o).shape.rank())
                    .unwrap_or(0)
            };
            let output = perm(ins.shape.rank(), &mut rng);
            let input = perm(rank_of(0), &mut rng);
            let kernel = if ins.opcode == Opcode::Reshape {
                Vec::new()
            } else {
                perm(rank_of(1), &mut rng)
            };
            if output.is_empty() && input.is_empty() && kernel.is_empty() {
                continue;
            }
            layout.push(LayoutEntry {
                node: NodeRef::Index(idx),
                output,
                input,
                kernel,
            });
        }
        CompilationConfig {
            layout,
            ..Default::default()
        }
    }
}

/// TpuGraphs node numbering of a module: computations in module order, instructions
/// in program order, concatenated.
#[derive(Debug, Clone)]
pub struct NodeTable {
    /// `(computation, instruction)` of node `i`.
    pub nodes: Vec<(CompId, InstrId)>,
    /// First node index of each computation.
    pub offsets: Vec<usize>,
    /// Per computation: graph node index → position in `order` (u32::MAX if absent).
    pos: Vec<Vec<u32>>,
    /// What resolving a layout entry checks, per node (filled for configurable nodes):
    /// read once here instead of from the scattered instructions at every resolve.
    facts: Vec<NodeFacts>,
    /// The default layouts ([`written_minor_to_major`]) of each configurable node's
    /// output and operands 0 and 1 (empty where [`NodeFacts::ranks`] is -1), which a
    /// configured prefix is completed against; indexed by [`NodeFacts::defaults`].
    defaults: Vec<[Dims; 3]>,
}

/// Ranks of a configurable node's output and operands 0 and 1 (-1 = not an array or
/// no such operand).
#[derive(Debug, Clone, Copy)]
struct NodeFacts {
    configurable: bool,
    ranks: [i32; 3],
    /// The node's entry in [`NodeTable::defaults`] (a configurable node's).
    defaults: u32,
}

impl NodeTable {
    /// Number the nodes of a module.
    pub fn new(m: &Module) -> Self {
        let mut nodes = Vec::with_capacity(m.instruction_count());
        let mut offsets = Vec::with_capacity(m.computations.len());
        let mut pos = Vec::with_capacity(m.computations.len());
        let mut facts = Vec::with_capacity(m.instruction_count());
        let mut defaults = Vec::new();
        for (ci, c) in m.computations.values().enumerate() {
            offsets.push(nodes.len());
            let mut p = vec![u32::MAX; c.graph.node_bound()];
            for (k, &id) in c.order.iter().enumerate() {
                if let Some(slot) = p.get_mut(id.index()) {
                    *slot = k as u32;
                }
                nodes.push((ci, id));
                let ins = c.instr(id);
                let rank = |s: &crate::ir::Shape| s.as_array().map(|a| a.rank() as i32);
                let operand_rank =
                    |slot: usize| c.operand(id, slot).and_then(|o| rank(&c.instr(o).shape));
                facts.push(if is_configurable(ins.opcode) {
                    // (a reshape's operand 1 is recorded as none: it has no kernel tensor)
                    let kernel = (ins.opcode != Opcode::Reshape)
                        .then(|| c.operand(id, 1))
                        .flatten();
                    let tensors = [
                        Some(&*ins.shape),
                        c.operand(id, 0).map(|o| &*c.instr(o).shape),
                        kernel.map(|o| &*c.instr(o).shape),
                    ];
                    defaults.push(tensors.map(|s| {
                        s.and_then(|s| s.as_array())
                            .map(written_minor_to_major)
                            .unwrap_or_default()
                    }));
                    NodeFacts {
                        configurable: true,
                        ranks: [
                            rank(&ins.shape).unwrap_or(-1),
                            operand_rank(0).unwrap_or(-1),
                            if ins.opcode == Opcode::Reshape {
                                -1
                            } else {
                                operand_rank(1).unwrap_or(-1)
                            },
                        ],
                        defaults: defaults.len() as u32 - 1,
                    }
                } else {
                    NodeFacts {
                        configurable: false,
                        ranks: [-1; 3],
                        defaults: u32::MAX,
                    }
                });
            }
            pos.push(p);
        }
        NodeTable {
            nodes,
            offsets,
            pos,
            facts,
            defaults,
        }
    }

    /// Node index of an instruction.
    pub fn index_of(&self, comp: CompId, id: InstrId) -> Option<usize> {
        let p = *self.pos.get(comp)?.get(id.index())?;
        if p == u32::MAX {
            return None;
        }
        Some(self.offsets.get(comp)? + p as usize)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True for a module without instructions.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// Configurable nodes of a module (see [`CONFIGURABLE_OPCODES`]) as
/// `(computation, instruction, TpuGraphs node index)`, in node-index order.
pub fn configurable_nodes(m: &Module) -> Vec<(CompId, InstrId, usize)> {
    let mut out = Vec::new();
    let mut idx = 0usize;
    for (ci, c) in m.computations.values().enumerate() {
        for &id in &c.order {
            let ins = c.instr(id);
            if is_configurable(ins.opcode) && ins.shape.as_array().is_some() {
                out.push((ci, id, idx));
            }
            idx += 1;
        }
    }
    out
}

/// A layout entry checked against the module and completed to full `minor_to_major`
/// lists ([`complete_layout`]): `None` = compiler's choice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeLayout {
    pub output: Option<Dims>,
    pub input: Option<Dims>,
    pub kernel: Option<Dims>,
}

/// A configuration resolved against a module (node references turned into node indices).
#[derive(Debug, Clone, Default)]
pub struct ResolvedConfig {
    /// Configured layouts, addressed through [`ResolvedConfig::layout`].
    pub layouts: Vec<NodeLayout>,
    /// Node index → index in `layouts` (u32::MAX = none); empty when nothing is set.
    pub layout_of: Vec<u32>,
    pub policy: FusionPolicy,
    /// `(producer, consumer)` node indices that must not be fused.
    pub no_fuse: HashSet<(usize, usize)>,
    /// `(producer, consumer)` node indices to fuse whenever possible.
    pub force_fuse: HashSet<(usize, usize)>,
}

impl ResolvedConfig {
    /// The configured layout of a node (by TpuGraphs node index).
    pub fn layout(&self, node: usize) -> Option<&NodeLayout> {
        let k = *self.layout_of.get(node)?;
        self.layouts.get(k as usize)
    }
}

/// Instruction name → node indices (built once per module, on demand).
#[derive(Debug)]
pub struct Names<'a> {
    map: HashMap<&'a str, Vec<usize>>,
}

impl<'a> Names<'a> {
    /// Index the names of a module.
    pub fn new(m: &'a Module, t: &NodeTable) -> Self {
        let mut map: HashMap<&str, Vec<usize>> = HashMap::with_capacity(t.len());
        for (i, &(c, id)) in t.nodes.iter().enumerate() {
            map.entry(m.comp(c).instr(id).name.as_str())
                .or_default()
                .push(i);
        }
        Names { map }
    }
}

fn node_name(m: &Module, t: &NodeTable, i: usize) -> String {
    match t.nodes.get(i) {
        Some(&(c, id)) => format!("'{}' (#{i})", m.comp(c).instr(id).name),
        None => format!("#{i}"),
    }
}

/// Resolve a node reference to a node index.
fn resolve_node(
    m: &Module,
    t: &NodeTable,
    names: Option<&Names<'_>>,
    r: &NodeRef,
    context: &dyn Fn() -> String,
) -> Result<usize, CompileError> {
    match r {
        NodeRef::Index(i) => {
            if *i < t.len() {
                Ok(*i)
            } else {
                Err(CompileError::NodeIndexOutOfRange {
                    context: context(),
                    index: *i,
                    count: t.len(),
                    module: m.name.clone(),
                })
            }
        }
        NodeRef::Name(n) => {
            // Accept `%name` as well.
            let key = n.strip_prefix('%').unwrap_or(n);
            let names = names.ok_or_else(|| CompileError::BadModule {
                module: m.name.clone(),
                message: "internal: name table missing".into(),
            })?;
            match names.map.get(key).map(|v| v.as_slice()) {
                Some([one]) => Ok(*one),
                Some(many) if !many.is_empty() => {
                    let comps: Vec<String> = many
                        .iter()
                        .filter_map(|&i| t.nodes.get(i))
                        .map(|&(c, _)| m.comp(c).name.clone())
                        .collect();
                    Err(CompileError::AmbiguousNode {
                        context: context(),
                        name: key.to_string(),
                        computations: comps.join(", "),
                    })
                }
                _ => Err(CompileError::UnknownNode {
                    context: context(),
                    name: key.to_string(),
                    module: m.name.clone(),
                }),
            }
        }
    }
}

/// Check one configured layout (trailing -1 removed): a prefix of `minor_to_major` of any
/// length 0..=rank — the most-minor dims, most-minor first, as TpuGraphs records them —
/// whose dims are distinct and within the rank. `Ok(None)` for an empty list (compiler's
/// choice); else the dims as given (completed later by [`complete_layout`]).
fn check_layout(
    node: &dyn Fn() -> String,
    tensor: &'static str,
    raw: &[i64],
    rank: Option<usize>,
    why_missing: &str,
) -> Result<Option<Dims>, CompileError> {
    let mut end = raw.len();
    while end > 0 && raw[end - 1] == -1 {
        end -= 1;
    }
    let v = &raw[..end];
    if v.is_empty() {
        return Ok(None);
    }
    let Some(rank) = rank else {
        return Err(CompileError::NoSuchTensor {
            node: node(),
            tensor,
            reason: why_missing.to_string(),
        });
    };
    let bad = |reason: String| CompileError::BadLayout {
        node: node(),
        tensor,
        layout: raw.to_vec(),
        rank,
        reason,
    };
    if v.len() > rank {
        return Err(bad(format!("{} entries for a rank-{rank} tensor", v.len())));
    }
    let mut seen: smallvec::SmallVec<[bool; 8]> = smallvec::SmallVec::from_elem(false, rank);
    for &d in v {
        let Some(s) = usize::try_from(d).ok().and_then(|d| seen.get_mut(d)) else {
            return Err(bad(format!("dimension {d} does not exist")));
        };
        if *s {
            return Err(bad(format!("dimension {d} repeated")));
        }
        *s = true;
    }
    Ok(Some(Dims::from_slice(v)))
}

/// A checked layout of one tensor of rank `rank` (-1: not an array) completed to a full
/// `minor_to_major` against the tensor's default (its layout in the input module,
/// [`written_minor_to_major`]; empty for no array).
fn completed(prefix: Option<Dims>, rank: i32, default: &[i64]) -> Option<Dims> {
    let prefix = prefix?;
    if usize::try_from(rank) == Ok(prefix.len()) {
        // a whole permutation (checked): completing it gives it back
        return Some(prefix);
    }
    Some(complete_layout(&prefix, default))
}

/// Resolve and validate the layout and fusion parts of a config against a module.
/// (Tile entries are checked after fusion, against the kernels.)
pub fn resolve<'m>(
    m: &'m Module,
    t: &NodeTable,
    cfg: &CompilationConfig,
    name_cache: &std::sync::OnceLock<Names<'m>>,
) -> Result<ResolvedConfig, CompileError> {
    let needs_names = cfg
        .layout
        .iter()
        .any(|e| matches!(e.node, NodeRef::Name(_)))
        || cfg.fusion.overrides.iter().any(|o| {
            matches!(o.producer, NodeRef::Name(_)) || matches!(o.consumer, NodeRef::Name(_))
        });
    let names = if needs_names {
        Some(name_cache.get_or_init(|| Names::new(m, t)))
    } else {
        None
    };
    let mut out = ResolvedConfig {
        policy: cfg.fusion.policy,
        ..Default::default()
    };
    out.layouts.reserve(cfg.layout.len());
    if !cfg.layout.is_empty() {
        out.layout_of = vec![u32::MAX; t.len()];
    }
    for e in &cfg.layout {
        let i = resolve_node(m, t, names, &e.node, &|| {
            format!("layout config for node {}", e.node)
        })?;
        let (c, id) = t.nodes[i];
        let comp = m.comp(c);
        let ins = || comp.instr(id);
        let label = || node_name(m, t, i);
        let facts = t.facts.get(i).copied().unwrap_or(NodeFacts {
            configurable: false,
            ranks: [-1; 3],
            defaults: u32::MAX,
        });
        let out_rank = usize::try_from(facts.ranks[0]).ok();
        if !facts.configurable || out_rank.is_none() {
            let ins = ins();
            return Err(CompileError::NotConfigurable {
                node: label(),
                opcode: ins.opcode_text(),
                allowed: CONFIGURABLE_OPCODES
                    .iter()
                    .map(|o| o.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        // (a reshape's operand 1 rank is recorded as -1: it has no kernel tensor)
        let kernel_rank = usize::try_from(facts.ranks[2]).ok();
        let [out_default, input_default, kernel_default] = &t.defaults[facts.defaults as usize];
        let nl = NodeLayout {
            output: completed(
                check_layout(&label, "output", &e.output, out_rank, "")?,
                facts.ranks[0],
                out_default,
            ),
            input: completed(
                check_layout(
                    &label,
                    "input",
                    &e.input,
                    usize::try_from(facts.ranks[1]).ok(),
                    "operand 0 is not an array",
                )?,
                facts.ranks[1],
                input_default,
            ),
            kernel: completed(
                check_layout(
                    &label,
                    "kernel",
                    &e.kernel,
                    kernel_rank,
                    "only convolution and dot have a kernel (operand 1) tensor",
                )?,
                facts.ranks[2],
                kernel_default,
            ),
        };
        if out.layout_of[i] != u32::MAX {
            return Err(CompileError::DuplicateLayout { node: label() });
        }
        out.layout_of[i] = out.layouts.len() as u32;
        out.layouts.push(nl);
    }
    for o in &cfg.fusion.overrides {
        let ctx = || format!("fusion override {} -> {}", o.producer, o.consumer);
        let p = resolve_node(m, t, names, &o.producer, &ctx)?;
        let c = resolve_node(m, t, names, &o.consumer, &ctx)?;
        // One override per edge: a second one (contradicting or not) is an error, as a
        // second layout or tile entry is.
        if out.no_fuse.contains(&(p, c)) || out.force_fuse.contains(&(p, c)) {
            return Err(CompileError::DuplicateFusionOverride {
                producer: node_name(m, t, p),
                consumer: node_name(m, t, c),
            });
        }
        if o.fuse {
            out.force_fuse.insert((p, c));
        } else {
            out.no_fuse.insert((p, c));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_toml_agree() {
        let toml = r#"
[fusion]
policy = "aggressive"
overrides = [{ producer = "a", consumer = 7, fuse = false }]

[[layout]]
node = "conv"
output = [3, 0, 2, 1]
kernel = [3, 2, -1, -1]

[[tile]]
kernel = 4
output_bounds = [1, 8]
"#;
        let a = CompilationConfig::from_toml_str(toml).unwrap();
        let b = CompilationConfig::from_json_str(&a.to_json()).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.fusion.policy, FusionPolicy::Aggressive);
        assert_eq!(a.layout[0].node, NodeRef::Name("conv".into()));
        assert_eq!(a.layout[0].output, vec![3, 0, 2, 1]);
        assert_eq!(a.fusion.overrides[0].consumer, NodeRef::Index(7));
        assert_eq!(a.tile[0].kernel, KernelRef::Index(4));
        assert_eq!(a.tile[0].bounds.output_bounds, vec![1, 8]);
        let c = CompilationConfig::from_toml_str(&a.to_toml()).unwrap();
        assert_eq!(a, c);
        assert!(CompilationConfig::from_json_str("{\"layouts\": []}").is_err());
    }

    #[test]
    fn tpugraphs_rows_round_trip() {
        let row = [
            2., 1., 0., -1., -1., -1., 3., 2., 1., 0., -1., -1., -1., -1., -1., -1., -1., -1.,
        ];
        let e = LayoutEntry::from_tpugraphs_row(9, &row);
        assert_eq!(e.output, vec![2, 1, 0]);
        assert_eq!(e.input, vec![3, 2, 1, 0]);
        assert!(e.kernel.is_empty());
        assert_eq!(e.to_tpugraphs_row(), row);
    }

    #[test]
    fn layout_check_accepts_prefixes() {
        let n = || "n".to_string();
        assert_eq!(
            check_layout(&n, "output", &[-1, -1], Some(3), "").unwrap(),
            None
        );
        assert_eq!(
            check_layout(&n, "output", &[0, 1], Some(3), "").unwrap(),
            Some(Dims::from_slice(&[0, 1]))
        );
        assert_eq!(
            check_layout(&n, "output", &[4, 0, -1, -1, -1, -1], Some(5), "").unwrap(),
            Some(Dims::from_slice(&[4, 0]))
        );
        assert_eq!(
            check_layout(&n, "output", &[2, 0, 1, -1], Some(3), "").unwrap(),
            Some(Dims::from_slice(&[2, 0, 1]))
        );
        assert!(check_layout(&n, "kernel", &[0, 1], None, "no").is_err());
    }

    #[test]
    fn layout_check_rejects_repeated_and_missing_dims() {
        let n = || "'conv' (#3)".to_string();
        let e = check_layout(&n, "input", &[0, 0], Some(3), "").unwrap_err();
        assert_eq!(
            e.to_string(),
            "layout config for node 'conv' (#3): input layout [0, 0] is not a minor_to_major \
             prefix of a rank-3 tensor (dimension 0 repeated)"
        );
        let e = check_layout(&n, "kernel", &[1, 3], Some(3), "").unwrap_err();
        assert_eq!(
            e.to_string(),
            "layout config for node 'conv' (#3): kernel layout [1, 3] is not a minor_to_major \
             prefix of a rank-3 tensor (dimension 3 does not exist)"
        );
        let e = check_layout(&n, "output", &[0, 1, 2, 3], Some(3), "").unwrap_err();
        assert!(
            e.to_string().contains("4 entries for a rank-3 tensor"),
            "{e}"
        );
    }

    #[test]
    fn prefixes_complete_in_default_order() {
        let c = |p: &[i64], d: &[i64]| complete_layout(p, d).to_vec();
        assert_eq!(c(&[4, 0], &[4, 3, 2, 1, 0]), vec![4, 0, 3, 2, 1]);
        assert_eq!(c(&[0, 4], &[4, 3, 2, 1, 0]), vec![0, 4, 3, 2, 1]);
        assert_eq!(c(&[4, 3], &[3, 0, 2, 1, 4]), vec![4, 3, 0, 2, 1]);
        assert_eq!(c(&[], &[1, 0]), vec![1, 0]);
        assert_eq!(c(&[0, 2, 1], &[2, 1, 0]), vec![0, 2, 1]);
        assert_eq!(c(&[0], &[0]), vec![0]);
        assert_eq!(c(&[], &[]), Vec::<i64>::new());
    }
}
