//! Summary of a tuning file for `tpusim inspect FILE.pb`: modules, runs,
//! errors, the default run, the runtime range, and the configurable nodes
//! with their opcodes. Serializable (JSON) and printable ([`Display`]).
//!
//! [`Display`]: std::fmt::Display

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use super::detect::InputKind;
use super::error::Result;
use super::tuning::{flattened_nodes, read_tuning, ModuleTuning, RunConfig, Tuning};

/// Summary of a whole tuning file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TuningSummary {
    /// `module_tuning_data` (layout file) or `tuning_data` (tile file).
    pub kind: InputKind,
    /// Number of modules (kernels).
    pub num_modules: usize,
    /// Runs over all modules.
    pub total_runs: usize,
    /// Runs marked `error` over all modules.
    pub total_errors: usize,
    /// One summary per module, in file order.
    pub modules: Vec<ModuleSummary>,
}

/// What kind of configurations a module's runs hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigKind {
    /// No run has a configuration (or there are no runs).
    None,
    /// Tile configurations (`op_config`).
    Tile,
    /// Layout configurations (`module_config`).
    Layout,
    /// Both kinds occur (not produced by TpuGraphs).
    Mixed,
}

/// Runtime range over the measured runs (no error, with a profile).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RuntimeRange {
    /// Fastest runtime, ns.
    pub min_ns: i64,
    /// Index of the fastest run.
    pub min_run: usize,
    /// Slowest runtime, ns.
    pub max_ns: i64,
    /// Index of the slowest run.
    pub max_run: usize,
}

/// A node that layout runs configure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigurableNode {
    /// Index into `LayoutConfig.nodes`.
    pub config_index: usize,
    /// Node position (flattened instruction order).
    pub node: u64,
    /// Instruction name (`None` if the position is outside the module).
    pub name: Option<String>,
    /// Instruction opcode (`None` if the position is outside the module).
    pub opcode: Option<String>,
}

/// Summary of one `ModuleTuningData`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModuleSummary {
    /// Position in the file.
    pub index: usize,
    /// Module name (`None` if the entry has no module).
    pub name: Option<String>,
    /// Module fingerprint.
    pub fingerprint: u64,
    /// Computations of the module.
    pub computations: usize,
    /// Instructions of the module (= nodes).
    pub instructions: usize,
    /// Kind of configurations.
    pub config_kind: ConfigKind,
    /// Number of runs.
    pub runs: usize,
    /// Runs marked `error`.
    pub errors: usize,
    /// Runs without error but without a profile.
    pub unprofiled: usize,
    /// Runs a TpuGraphs reader keeps as samples (layout: config, no error,
    /// profile; tile: tile config, no error, runtime > 1 ns).
    pub usable: usize,
    /// Distinct configurations among the runs.
    pub distinct_configs: usize,
    /// Index of the first default run.
    pub default_run: Option<usize>,
    /// Number of runs marked default.
    pub default_runs: usize,
    /// Runtime of the default run (if measured).
    pub default_time_ns: Option<i64>,
    /// Runtime range of measured runs.
    pub runtime: Option<RuntimeRange>,
    /// Configurable nodes (layout data), in config order.
    pub configurable_nodes: Vec<ConfigurableNode>,
    /// Opcode histogram of the configurable nodes.
    pub configurable_opcodes: BTreeMap<String, usize>,
    /// The runs' configurations in the real data's terms.
    pub configs: ConfigSummary,
    /// Inconsistencies found (not fatal).
    pub warnings: Vec<String>,
}

/// The configurations of a module's runs, in the terms of real TPU tuning data
/// (docs/dataset-format.md): tile bounds count tiles of the kernel's iteration-space
/// tensor, major → minor; a layout tensor is a `minor_to_major` prefix (empty = the
/// compiler's choice).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ConfigSummary {
    /// No run is configured.
    None,
    /// Tile runs.
    Tile {
        /// The default run's bounds.
        default: Option<TileBounds>,
        /// Per-dim range of `output_bounds` over the runs.
        output_bounds: Vec<(i64, i64)>,
        /// Per-dim range of `kernel_bounds` over the runs.
        kernel_bounds: Vec<(i64, i64)>,
        /// Per-dim range of `input_bounds` over the runs.
        input_bounds: Vec<(i64, i64)>,
    },
    /// Layout runs.
    Layout {
        /// Tensors the default run sets (non-empty prefixes).
        default_set: usize,
        /// Tensors per run (configurable nodes × their tensors).
        tensors_per_run: usize,
        /// Over all runs: tensors left to the compiler.
        empty: usize,
        /// Over all runs: tensors given as a prefix shorter than their rank, by length.
        prefix: BTreeMap<usize, usize>,
        /// Over all runs: tensors given as a whole permutation.
        full: usize,
    },
}

/// One tile run's bounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TileBounds {
    /// Tiles of the iteration-space tensor per dim.
    pub output_bounds: Vec<i64>,
    /// Tiles of the kernel operand per dim.
    pub kernel_bounds: Vec<i64>,
    /// Tiles of the input per dim.
    pub input_bounds: Vec<i64>,
}

/// Reads a tuning file's bytes and summarises it.
pub fn inspect_bytes(bytes: &[u8]) -> Result<TuningSummary> {
    Ok(summarize(&read_tuning(bytes)?))
}

/// Summarises decoded tuning data.
pub fn summarize(t: &Tuning) -> TuningSummary {
    let modules: Vec<ModuleSummary> = t
        .modules()
        .iter()
        .enumerate()
        .map(|(i, m)| summarize_module(i, m))
        .collect();
    TuningSummary {
        kind: t.kind(),
        num_modules: modules.len(),
        total_runs: modules.iter().map(|m| m.runs).sum(),
        total_errors: modules.iter().map(|m| m.errors).sum(),
        modules,
    }
}

fn summarize_module(index: usize, m: &ModuleTuning) -> ModuleSummary {
    let mut warnings = Vec::new();
    let nodes = m.module.as_ref().map(flattened_nodes).unwrap_or_default();
    if m.module.is_none() {
        warnings.push("no module".to_string());
    }

    let (mut tile, mut layout) = (0usize, 0usize);
    let mut distinct = BTreeSet::new();
    for (i, r) in m.runs.iter().enumerate() {
        match &r.config {
            RunConfig::None => {}
            RunConfig::Tile(t) => {
                tile += 1;
                if t.is_none() {
                    warnings.push(format!("run {i}: op_config without tile_size_config"));
                }
            }
            RunConfig::Layout(l) => {
                layout += 1;
                if l.nodes.len() != m.config_index_to_node.len() {
                    warnings.push(format!(
                        "run {i}: {} layout nodes but {} config_index_to_node entries",
                        l.nodes.len(),
                        m.config_index_to_node.len()
                    ));
                }
            }
        }
        distinct.insert(format!("{:?}", r.config));
    }
    let config_kind = match (tile > 0, layout > 0) {
        (false, false) => ConfigKind::None,
        (true, false) => ConfigKind::Tile,
        (false, true) => ConfigKind::Layout,
        (true, true) => ConfigKind::Mixed,
    };
    let usable = m
        .runs
        .iter()
        .filter(|r| match config_kind {
            ConfigKind::Tile => r.usable_tile(),
            _ => r.usable_layout(),
        })
        .count();

    let mut runtime: Option<RuntimeRange> = None;
    for (i, t) in m
        .runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, r.measured()?)))
    {
        let r = runtime.get_or_insert(RuntimeRange {
            min_ns: t,
            min_run: i,
            max_ns: t,
            max_run: i,
        });
        if t < r.min_ns {
            r.min_ns = t;
            r.min_run = i;
        }
        if t > r.max_ns {
            r.max_ns = t;
            r.max_run = i;
        }
    }

    let default_runs = m.runs.iter().filter(|r| r.is_default).count();
    let default_run = m.default_run();
    match default_runs {
        0 if !m.runs.is_empty() => warnings.push("no default run".to_string()),
        0 | 1 => {}
        n => warnings.push(format!("{n} runs marked default")),
    }
    let default_time_ns = default_run
        .and_then(|i| m.runs.get(i))
        .and_then(|r| r.measured());
    if default_run.is_some() && default_time_ns.is_none() {
        warnings.push("default run has an error or no profile".to_string());
    }

    let mut configurable_opcodes = BTreeMap::new();
    let configurable_nodes = m
        .config_index_to_node
        .iter()
        .enumerate()
        .map(|(k, &node)| {
            let inst = usize::try_from(node).ok().and_then(|n| nodes.get(n));
            if inst.is_none() {
                warnings.push(format!(
                    "config index {k}: node {node} is outside the module ({} nodes)",
                    nodes.len()
                ));
            }
            if let Some(i) = inst {
                *configurable_opcodes.entry(i.opcode.clone()).or_insert(0) += 1;
            }
            ConfigurableNode {
                config_index: k,
                node,
                name: inst.map(|i| i.name.clone()),
                opcode: inst.map(|i| i.opcode.clone()),
            }
        })
        .collect();

    ModuleSummary {
        index,
        name: m.module.as_ref().map(|p| p.name.clone()),
        fingerprint: m.fingerprint,
        computations: m.module.as_ref().map_or(0, |p| p.computations.len()),
        instructions: nodes.len(),
        config_kind,
        runs: m.runs.len(),
        errors: m.runs.iter().filter(|r| r.error).count(),
        unprofiled: m
            .runs
            .iter()
            .filter(|r| !r.error && r.profile.is_none())
            .count(),
        usable,
        distinct_configs: distinct.len(),
        default_run,
        default_runs,
        default_time_ns,
        runtime,
        configurable_nodes,
        configurable_opcodes,
        configs: config_summary(m, &nodes),
        warnings,
    }
}

impl fmt::Display for TuningSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} module{}, {} runs, {} errors",
            self.kind,
            self.num_modules,
            if self.num_modules == 1 { "" } else { "s" },
            self.total_runs,
            self.total_errors
        )?;
        for m in &self.modules {
            write!(f, "{m}")?;
        }
        Ok(())
    }
}

/// Widens per-dim ranges by one bounds list (a list of another length adds dims).
fn widen(ranges: &mut Vec<(i64, i64)>, bounds: &[i64]) {
    for (i, &b) in bounds.iter().enumerate() {
        match ranges.get_mut(i) {
            Some(r) => *r = (r.0.min(b), r.1.max(b)),
            None => ranges.push((b, b)),
        }
    }
}

fn config_summary(
    m: &ModuleTuning,
    nodes: &[&crate::proto::xla::HloInstructionProto],
) -> ConfigSummary {
    let tile_runs: Vec<&super::tuning::TileConfig> = m
        .runs
        .iter()
        .filter_map(|r| match &r.config {
            RunConfig::Tile(Some(t)) => Some(t),
            _ => None,
        })
        .collect();
    if !tile_runs.is_empty() {
        let (mut output_bounds, mut kernel_bounds, mut input_bounds) = (vec![], vec![], vec![]);
        for t in &tile_runs {
            widen(&mut output_bounds, &t.output_bounds);
            widen(&mut kernel_bounds, &t.kernel_bounds);
            widen(&mut input_bounds, &t.input_bounds);
        }
        let default = m
            .default_run()
            .and_then(|i| m.runs.get(i))
            .and_then(|r| match &r.config {
                RunConfig::Tile(Some(t)) => Some(TileBounds {
                    output_bounds: t.output_bounds.clone(),
                    kernel_bounds: t.kernel_bounds.clone(),
                    input_bounds: t.input_bounds.clone(),
                }),
                _ => None,
            });
        return ConfigSummary::Tile {
            default,
            output_bounds,
            kernel_bounds,
            input_bounds,
        };
    }
    let layouts: Vec<(bool, &super::tuning::LayoutConfig)> = m
        .runs
        .iter()
        .filter_map(|r| match &r.config {
            RunConfig::Layout(l) => Some((r.is_default, l)),
            _ => None,
        })
        .collect();
    if layouts.is_empty() {
        return ConfigSummary::None;
    }
    // Rank of tensor k of configurable node i: its output, then its operands.
    let by_id: BTreeMap<i64, &crate::proto::xla::HloInstructionProto> =
        nodes.iter().map(|n| (n.id, *n)).collect();
    let rank_of = |inst: &crate::proto::xla::HloInstructionProto| {
        inst.shape.as_ref().map(|s| s.dimensions.len())
    };
    let tensor_rank = |i: usize, k: usize| -> Option<usize> {
        let node = usize::try_from(*m.config_index_to_node.get(i)?).ok()?;
        let inst = nodes.get(node)?;
        if k == 0 {
            return rank_of(inst);
        }
        let id = inst.operand_ids.get(k - 1)?;
        rank_of(by_id.get(id)?)
    };
    let (mut empty, mut full) = (0usize, 0usize);
    let mut prefix = BTreeMap::new();
    let (mut default_set, mut tensors_per_run) = (0usize, 0usize);
    for (is_default, l) in &layouts {
        let mut count = 0;
        for (i, n) in l.nodes.iter().enumerate() {
            for (k, t) in n.tensors.iter().enumerate() {
                count += 1;
                if t.is_empty() {
                    empty += 1;
                } else {
                    if *is_default {
                        default_set += 1;
                    }
                    if tensor_rank(i, k) == Some(t.len()) {
                        full += 1;
                    } else {
                        *prefix.entry(t.len()).or_insert(0) += 1;
                    }
                }
            }
        }
        tensors_per_run = tensors_per_run.max(count);
    }
    ConfigSummary::Layout {
        default_set,
        tensors_per_run,
        empty,
        prefix,
        full,
    }
}

fn bounds_text(b: &[i64]) -> String {
    let v: Vec<String> = b.iter().map(|x| x.to_string()).collect();
    format!("[{}]", v.join(","))
}

fn ranges_text(r: &[(i64, i64)]) -> String {
    if r.is_empty() {
        return "not set".to_string();
    }
    let v: Vec<String> = r
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}..{b}")
            }
        })
        .collect();
    format!("{} dims: {}", r.len(), v.join(" × "))
}

impl fmt::Display for ConfigSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSummary::None => Ok(()),
            ConfigSummary::Tile {
                default,
                output_bounds,
                kernel_bounds,
                input_bounds,
            } => {
                writeln!(
                    f,
                    "  tile configs (tiles of the iteration-space tensor, major → minor):"
                )?;
                if let Some(d) = default {
                    writeln!(
                        f,
                        "    default: output {} kernel {} input {}",
                        bounds_text(&d.output_bounds),
                        bounds_text(&d.kernel_bounds),
                        bounds_text(&d.input_bounds)
                    )?;
                }
                writeln!(f, "    output_bounds: {}", ranges_text(output_bounds))?;
                writeln!(f, "    kernel_bounds: {}", ranges_text(kernel_bounds))?;
                writeln!(f, "    input_bounds:  {}", ranges_text(input_bounds))
            }
            ConfigSummary::Layout {
                default_set,
                tensors_per_run,
                empty,
                prefix,
                full,
            } => {
                writeln!(
                    f,
                    "  layout configs (minor_to_major prefixes; empty = the compiler's choice):"
                )?;
                writeln!(
                    f,
                    "    default: {default_set} of {tensors_per_run} tensors set"
                )?;
                let total = (empty + full + prefix.values().sum::<usize>()).max(1);
                let pct = |n: usize| n as f64 * 100.0 / total as f64;
                let prefixes: Vec<String> = prefix
                    .iter()
                    .map(|(len, n)| format!("{len}-dim {:.1} %", pct(*n)))
                    .collect();
                writeln!(
                    f,
                    "    tensors over all runs: {:.1} % empty, prefixes {}, {:.1} % whole permutations",
                    pct(*empty),
                    if prefixes.is_empty() { "none".to_string() } else { prefixes.join(", ") },
                    pct(*full)
                )
            }
        }
    }
}

impl fmt::Display for ModuleSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "module {} `{}` fingerprint {:#018x}: {} computations, {} instructions",
            self.index,
            self.name.as_deref().unwrap_or("<none>"),
            self.fingerprint,
            self.computations,
            self.instructions
        )?;
        let kind = match self.config_kind {
            ConfigKind::None => "no config",
            ConfigKind::Tile => "tile",
            ConfigKind::Layout => "layout",
            ConfigKind::Mixed => "tile+layout",
        };
        writeln!(
            f,
            "  runs: {} ({kind}), {} errors, {} unprofiled, {} usable, {} distinct configs",
            self.runs, self.errors, self.unprofiled, self.usable, self.distinct_configs
        )?;
        match (self.default_run, self.default_time_ns) {
            (Some(i), Some(t)) => writeln!(f, "  default: run {i}, {t} ns")?,
            (Some(i), None) => writeln!(f, "  default: run {i}, not measured")?,
            (None, _) => writeln!(f, "  default: none")?,
        }
        if let Some(r) = &self.runtime {
            write!(
                f,
                "  runtime: {} .. {} ns (run {} .. run {})",
                r.min_ns, r.max_ns, r.min_run, r.max_run
            )?;
            if let Some(d) = self.default_time_ns.filter(|&d| d > 0) {
                write!(
                    f,
                    ", {:.3}x .. {:.3}x of default",
                    r.min_ns as f64 / d as f64,
                    r.max_ns as f64 / d as f64
                )?;
            }
            writeln!(f)?;
        }
        if !self.configurable_nodes.is_empty() {
            let hist: Vec<String> = self
                .configurable_opcodes
                .iter()
                .map(|(op, n)| format!("{op} {n}"))
                .collect();
            writeln!(
                f,
                "  configurable nodes: {} ({})",
                self.configurable_nodes.len(),
                hist.join(", ")
            )?;
            for n in &self.configurable_nodes {
                writeln!(
                    f,
                    "    [{}] node {} {} ({})",
                    n.config_index,
                    n.node,
                    n.name.as_deref().unwrap_or("?"),
                    n.opcode.as_deref().unwrap_or("outside module")
                )?;
            }
        }
        write!(f, "{}", self.configs)?;
        for w in &self.warnings {
            writeln!(f, "  warning: {w}")?;
        }
        Ok(())
    }
}
