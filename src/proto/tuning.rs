//! Reader and writer of TpuGraphs raw tuning data:
//! `tpu_graphs.ModuleTuningData` (layout files, one module) and
//! `tpu_graphs.TuningData` (tile files, one `ModuleTuningData` per kernel).
//!
//! The friendly structs keep everything the format carries; writing and
//! reading back gives an equal value (`read(write(x)) == x`). Presence rules
//! that matter to the TpuGraphs readers are kept: a tile run whose
//! `HloOpConfig` lacks its `tile_size_config` is `RunConfig::Tile(None)`,
//! different from an empty tile config, and a run without a profile has
//! `profile == None`.

use prost::Message;

use super::detect::{detect, InputKind};
use super::error::{ProtoError, Result};
use super::tpu_graphs as pb;
use super::xla;

/// Most tensors a layout node may configure (output + 2 operands); the
/// reference reader checks the same limit.
pub const MAX_NODE_TENSORS: usize = 3;

/// One `tpu_graphs.ModuleTuningData`: a module and its measured runs.
///
/// Equality compares the modules by their protobuf encoding (bitwise), so a
/// module with NaN constants equals itself.
#[derive(Debug, Clone, Default)]
pub struct ModuleTuning {
    /// The program (whole graph for layout data, one kernel for tile data);
    /// `None` if the file has no module.
    pub module: Option<xla::HloModuleProto>,
    /// Hash identifying the module (TpuGraphs splits by it).
    pub fingerprint: u64,
    /// Measured configurations, in file order.
    pub runs: Vec<Run>,
    /// Layout data: entry k is the node (position in the flattened
    /// instruction order: computations in file order, instructions in file
    /// order) configured by `nodes[k]` of every layout run.
    pub config_index_to_node: Vec<u64>,
}

impl PartialEq for ModuleTuning {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint
            && self.runs == other.runs
            && self.config_index_to_node == other.config_index_to_node
            && match (&self.module, &other.module) {
                (None, None) => true,
                (Some(a), Some(b)) => a.encode_to_vec() == b.encode_to_vec(),
                _ => false,
            }
    }
}

/// One `tpu_graphs.TuningData`: many kernels (tile data).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TuningSet {
    /// One entry per kernel.
    pub modules: Vec<ModuleTuning>,
}

/// Either kind of tuning file, as returned by [`read_tuning`].
// One value per file: the size difference between variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Tuning {
    /// A `ModuleTuningData` file (layout data).
    Module(ModuleTuning),
    /// A `TuningData` file (tile data).
    Set(TuningSet),
}

impl Tuning {
    /// All modules of the file (one for a `ModuleTuningData`).
    pub fn modules(&self) -> &[ModuleTuning] {
        match self {
            Tuning::Module(m) => std::slice::from_ref(m),
            Tuning::Set(s) => &s.modules,
        }
    }

    /// Kind of file this came from.
    pub fn kind(&self) -> InputKind {
        match self {
            Tuning::Module(_) => InputKind::ModuleTuningData,
            Tuning::Set(_) => InputKind::TuningData,
        }
    }
}

/// One measured configuration (`tpu_graphs.ConfigProfile`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Run {
    /// Which configuration was measured.
    pub config: RunConfig,
    /// The run failed; its profile must be ignored.
    pub error: bool,
    /// This is the compiler's default choice.
    pub is_default: bool,
    /// Measurement; `None` when the file has no profile for the run.
    pub profile: Option<Profile>,
}

impl Run {
    /// Measured runtime in ns (`profile.compute_time_ns`), if profiled.
    pub fn compute_time_ns(&self) -> Option<i64> {
        self.profile.as_ref().map(|p| p.compute_time_ns)
    }

    /// The run a TpuGraphs reader would keep as a sample: no error, and a
    /// profile (the layout reader also needs a module config, the tile reader
    /// a tile config and a runtime > 1 ns; see [`Run::usable_layout`] /
    /// [`Run::usable_tile`]).
    pub fn measured(&self) -> Option<i64> {
        if self.error {
            None
        } else {
            self.compute_time_ns()
        }
    }

    /// Kept by the TpuGraphs layout iterator: layout config, no error, a
    /// profile.
    pub fn usable_layout(&self) -> bool {
        matches!(self.config, RunConfig::Layout(_)) && self.measured().is_some()
    }

    /// Kept by the TpuGraphs tile iterator: tile config present, no error,
    /// `compute_time_ns > 1`.
    pub fn usable_tile(&self) -> bool {
        matches!(self.config, RunConfig::Tile(Some(_))) && self.measured().is_some_and(|t| t > 1)
    }
}

/// The configuration of a run (the `config` oneof of `ConfigProfile`).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum RunConfig {
    /// Neither `op_config` nor `module_config` is set.
    #[default]
    None,
    /// Tile data (`op_config`); `None` if its `tile_size_config` is absent
    /// (the TpuGraphs tile reader then drops the whole kernel).
    Tile(Option<TileConfig>),
    /// Layout data (`module_config.layout_config`; an absent layout config
    /// reads as one without nodes, as in the reference reader).
    Layout(LayoutConfig),
}

/// Tile extents of a kernel (`tpu_graphs.TileSizeConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TileConfig {
    /// Tile extents on the kernel (weight) operand; may be empty.
    pub kernel_bounds: Vec<i64>,
    /// Tile extents on the output.
    pub output_bounds: Vec<i64>,
    /// Tile extents on the input; may be empty.
    pub input_bounds: Vec<i64>,
    /// Loop trip counts (not featurised by TpuGraphs).
    pub iteration_bounds: Vec<i64>,
}

/// Layout choice for every configurable node (`tpu_graphs.LayoutConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LayoutConfig {
    /// One per configurable node, same order as `config_index_to_node`.
    pub nodes: Vec<NodeLayout>,
}

/// Layout choice of one configurable node: up to [`MAX_NODE_TENSORS`]
/// minor-to-major lists, output first, then the operands (input, kernel).
/// An empty list means "left to the compiler".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeLayout {
    /// The tensors as stored (0 to 3 entries).
    pub tensors: Vec<Vec<i64>>,
}

impl NodeLayout {
    /// Builds a node layout from output / input / kernel lists (three
    /// tensors, as TpuGraphs writes them).
    pub fn new(output: Vec<i64>, input: Vec<i64>, kernel: Vec<i64>) -> Self {
        NodeLayout {
            tensors: vec![output, input, kernel],
        }
    }

    fn tensor(&self, i: usize) -> &[i64] {
        self.tensors.get(i).map_or(&[], Vec::as_slice)
    }

    /// Minor-to-major prefix of the output, most-minor first (empty = compiler's choice).
    pub fn output(&self) -> &[i64] {
        self.tensor(0)
    }

    /// Minor-to-major prefix of operand 0, the input (empty = compiler's choice).
    pub fn input(&self) -> &[i64] {
        self.tensor(1)
    }

    /// Minor-to-major prefix of operand 1, the kernel (empty = compiler's choice).
    pub fn kernel(&self) -> &[i64] {
        self.tensor(2)
    }

    /// True if every tensor is left to the compiler (as in a default run).
    pub fn is_unconstrained(&self) -> bool {
        self.tensors.iter().all(Vec::is_empty)
    }
}

/// Measurement of a run (`xla.ExecutionProfile`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Profile {
    /// Measured execution time in ns: the TpuGraphs target.
    pub compute_time_ns: i64,
    /// Device cycles of the run.
    pub compute_cycle_count: i64,
    /// Execution plus host transfers, ns.
    pub compute_and_transfer_time_ns: i64,
    /// Compile time, ms.
    pub compile_time_ms: i64,
    /// Size of the binary, bytes.
    pub executable_size_in_bytes: i64,
    /// Compile came from a cache.
    pub compilation_cache_hit: bool,
    /// Profile came from a cache.
    pub profile_cache_hit: bool,
    /// A warm-up run preceded the measurement.
    pub warmup_run_executed: bool,
}

impl Profile {
    /// A profile holding only a runtime.
    pub fn from_time_ns(compute_time_ns: i64) -> Self {
        Profile {
            compute_time_ns,
            ..Profile::default()
        }
    }
}

// ---------------------------------------------------------------- decoding

/// Decodes a serialized `xla.HloModuleProto`.
pub fn read_hlo_module_proto(bytes: &[u8]) -> Result<xla::HloModuleProto> {
    xla::HloModuleProto::decode(bytes).map_err(|err| ProtoError::Decode {
        what: "xla.HloModuleProto",
        err,
    })
}

/// Decodes a serialized `tpu_graphs.ModuleTuningData` (layout file).
pub fn read_module_tuning(bytes: &[u8]) -> Result<ModuleTuning> {
    let p = pb::ModuleTuningData::decode(bytes).map_err(|err| ProtoError::Decode {
        what: "tpu_graphs.ModuleTuningData",
        err,
    })?;
    ModuleTuning::from_proto(p, "ModuleTuningData")
}

/// Decodes a serialized `tpu_graphs.TuningData` (tile file).
pub fn read_tuning_set(bytes: &[u8]) -> Result<TuningSet> {
    let p = pb::TuningData::decode(bytes).map_err(|err| ProtoError::Decode {
        what: "tpu_graphs.TuningData",
        err,
    })?;
    TuningSet::from_proto(p)
}

/// Decodes either kind of tuning file, chosen by [`detect`]. A file detected
/// as something else gives [`ProtoError::WrongKind`].
pub fn read_tuning(bytes: &[u8]) -> Result<Tuning> {
    match detect(bytes) {
        InputKind::ModuleTuningData => read_module_tuning(bytes).map(Tuning::Module),
        InputKind::TuningData => read_tuning_set(bytes).map(Tuning::Set),
        found => Err(ProtoError::WrongKind {
            expected: InputKind::ModuleTuningData,
            found,
        }),
    }
}

/// Reads a tuning file from disk (see [`read_tuning`]).
pub fn read_tuning_file(path: &std::path::Path) -> Result<Tuning> {
    let bytes =
        crate::limits::read_bytes(path, crate::limits::MODULE_FILE_BYTES).map_err(|err| {
            ProtoError::Io {
                path: path.to_owned(),
                err,
            }
        })?;
    read_tuning(&bytes).map_err(|e| ProtoError::InFile {
        path: path.to_owned(),
        err: Box::new(e),
    })
}

impl TuningSet {
    /// Converts the generated message into the friendly struct.
    pub fn from_proto(p: pb::TuningData) -> Result<Self> {
        let modules = p
            .modules
            .into_iter()
            .enumerate()
            .map(|(i, m)| ModuleTuning::from_proto(m, &format!("TuningData.modules[{i}]")))
            .collect::<Result<_>>()?;
        Ok(TuningSet { modules })
    }

    /// Converts into the generated message.
    pub fn to_proto(&self) -> Result<pb::TuningData> {
        Ok(pb::TuningData {
            modules: self
                .modules
                .iter()
                .map(ModuleTuning::to_proto)
                .collect::<Result<_>>()?,
        })
    }
}

impl ModuleTuning {
    /// Converts the generated message into the friendly struct; `context`
    /// names the message in error messages.
    pub fn from_proto(p: pb::ModuleTuningData, context: &str) -> Result<Self> {
        let runs = p
            .runs
            .into_iter()
            .enumerate()
            .map(|(i, r)| run_from_proto(r, &format!("{context}.runs[{i}]")))
            .collect::<Result<_>>()?;
        Ok(ModuleTuning {
            module: p.module,
            fingerprint: p.fingerprint,
            runs,
            config_index_to_node: p.config_index_to_node,
        })
    }

    /// Converts into the generated message. Fails if a layout dimension does
    /// not fit the format's `int32`.
    pub fn to_proto(&self) -> Result<pb::ModuleTuningData> {
        Ok(pb::ModuleTuningData {
            module: self.module.clone(),
            fingerprint: self.fingerprint,
            runs: self.runs.iter().map(run_to_proto).collect::<Result<_>>()?,
            config_index_to_node: self.config_index_to_node.clone(),
        })
    }

    /// The module as IR (`None` if the entry has no module).
    pub fn module_ir(&self) -> Result<Option<crate::ir::Module>> {
        self.module
            .as_ref()
            .map(super::hlo_module::module_from_proto)
            .transpose()
    }

    /// Index of the first run marked `is_default`.
    pub fn default_run(&self) -> Option<usize> {
        self.runs.iter().position(|r| r.is_default)
    }
}

fn run_from_proto(r: pb::ConfigProfile, context: &str) -> Result<Run> {
    use pb::config_profile::Config;
    let config = match r.config {
        None => RunConfig::None,
        Some(Config::OpConfig(op)) => RunConfig::Tile(op.tile_size_config.map(|t| TileConfig {
            kernel_bounds: t.kernel_bounds,
            output_bounds: t.output_bounds,
            input_bounds: t.input_bounds,
            iteration_bounds: t.iteration_bounds,
        })),
        Some(Config::ModuleConfig(mc)) => {
            let nodes = mc.layout_config.map(|l| l.nodes).unwrap_or_default();
            let mut out = Vec::with_capacity(nodes.len());
            for (k, n) in nodes.into_iter().enumerate() {
                if n.tensors.len() > MAX_NODE_TENSORS {
                    return Err(ProtoError::invalid(
                        format!("{context}.module_config.layout_config.nodes[{k}]"),
                        format!(
                            "{} tensors, at most {MAX_NODE_TENSORS} allowed (output, input, kernel)",
                            n.tensors.len()
                        ),
                    ));
                }
                out.push(NodeLayout {
                    tensors: n
                        .tensors
                        .into_iter()
                        .map(|t| t.dims.into_iter().map(i64::from).collect())
                        .collect(),
                });
            }
            RunConfig::Layout(LayoutConfig { nodes: out })
        }
    };
    Ok(Run {
        config,
        error: r.error,
        is_default: r.is_default,
        profile: r.profile.map(|p| Profile {
            compute_time_ns: p.compute_time_ns,
            compute_cycle_count: p.compute_cycle_count,
            compute_and_transfer_time_ns: p.compute_and_transfer_time_ns,
            compile_time_ms: p.compile_time_ms,
            executable_size_in_bytes: p.executable_size_in_bytes,
            compilation_cache_hit: p.compilation_cache_hit,
            profile_cache_hit: p.profile_cache_hit,
            warmup_run_executed: p.warmup_run_executed,
        }),
    })
}

fn run_to_proto(r: &Run) -> Result<pb::ConfigProfile> {
    use pb::config_profile::Config;
    use pb::layout_config::node_layout_config::TensorLayoutConfig;
    use pb::layout_config::NodeLayoutConfig;
    let config = match &r.config {
        RunConfig::None => None,
        RunConfig::Tile(t) => Some(Config::OpConfig(pb::HloOpConfig {
            tile_size_config: t.as_ref().map(|t| pb::TileSizeConfig {
                kernel_bounds: t.kernel_bounds.clone(),
                output_bounds: t.output_bounds.clone(),
                input_bounds: t.input_bounds.clone(),
                iteration_bounds: t.iteration_bounds.clone(),
            }),
        })),
        RunConfig::Layout(l) => {
            let mut nodes = Vec::with_capacity(l.nodes.len());
            for (k, n) in l.nodes.iter().enumerate() {
                if n.tensors.len() > MAX_NODE_TENSORS {
                    return Err(ProtoError::invalid(
                        format!("layout node {k}"),
                        format!(
                            "{} tensors, at most {MAX_NODE_TENSORS} allowed",
                            n.tensors.len()
                        ),
                    ));
                }
                let mut tensors = Vec::with_capacity(n.tensors.len());
                for t in &n.tensors {
                    let dims = t
                        .iter()
                        .map(|&d| {
                            i32::try_from(d).map_err(|_| {
                                ProtoError::invalid(
                                    format!("layout node {k}"),
                                    format!("dimension {d} does not fit int32"),
                                )
                            })
                        })
                        .collect::<Result<_>>()?;
                    tensors.push(TensorLayoutConfig { dims });
                }
                nodes.push(NodeLayoutConfig { tensors });
            }
            Some(Config::ModuleConfig(pb::HloModuleConfig {
                layout_config: Some(pb::LayoutConfig { nodes }),
            }))
        }
    };
    Ok(pb::ConfigProfile {
        config,
        error: r.error,
        is_default: r.is_default,
        profile: r.profile.as_ref().map(|p| xla::ExecutionProfile {
            compilation_cache_hit: p.compilation_cache_hit,
            compile_time_ms: p.compile_time_ms,
            compute_cycle_count: p.compute_cycle_count,
            compute_time_ns: p.compute_time_ns,
            compute_and_transfer_time_ns: p.compute_and_transfer_time_ns,
            executable_size_in_bytes: p.executable_size_in_bytes,
            profile_cache_hit: p.profile_cache_hit,
            warmup_run_executed: p.warmup_run_executed,
        }),
    })
}

// ---------------------------------------------------------------- encoding

/// Serializes a `tpu_graphs.ModuleTuningData`.
pub fn write_module_tuning(m: &ModuleTuning) -> Result<Vec<u8>> {
    Ok(m.to_proto()?.encode_to_vec())
}

/// Serializes a `tpu_graphs.TuningData`.
pub fn write_tuning_set(s: &TuningSet) -> Result<Vec<u8>> {
    Ok(s.to_proto()?.encode_to_vec())
}

/// Serializes either kind of tuning file.
pub fn write_tuning(t: &Tuning) -> Result<Vec<u8>> {
    match t {
        Tuning::Module(m) => write_module_tuning(m),
        Tuning::Set(s) => write_tuning_set(s),
    }
}

/// Writes `bytes` to `path` atomically ([`crate::atomic::write_atomic`]); the error
/// names `path`.
pub fn write_file_atomic(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    crate::atomic::write_atomic(path, bytes).map_err(|err| ProtoError::Io {
        path: path.to_owned(),
        err,
    })
}

/// Writes a tuning file to disk atomically.
pub fn write_tuning_file(path: &std::path::Path, t: &Tuning) -> Result<()> {
    write_file_atomic(path, &write_tuning(t)?)
}

/// The TpuGraphs node numbering of a module: computations in file order and,
/// inside each, instructions in file order; the k-th instruction met is node
/// k (`config_index_to_node` and the `.npz` files use these positions).
pub fn flattened_nodes(module: &xla::HloModuleProto) -> Vec<&xla::HloInstructionProto> {
    module
        .computations
        .iter()
        .flat_map(|c| c.instructions.iter())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_module() -> xla::HloModuleProto {
        xla::HloModuleProto {
            name: "m".into(),
            entry_computation_name: "e".into(),
            ..Default::default()
        }
    }

    #[test]
    fn presence_is_kept() {
        let m = ModuleTuning {
            module: Some(tiny_module()),
            fingerprint: 0,
            runs: vec![
                Run {
                    config: RunConfig::Tile(None),
                    ..Run::default()
                },
                Run {
                    config: RunConfig::Tile(Some(TileConfig::default())),
                    profile: Some(Profile::default()),
                    ..Run::default()
                },
                Run::default(),
            ],
            config_index_to_node: vec![],
        };
        let back = read_module_tuning(&write_module_tuning(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.runs[0].config, RunConfig::Tile(None));
        assert_eq!(back.runs[1].compute_time_ns(), Some(0));
        assert_eq!(back.runs[2].compute_time_ns(), None);
    }

    #[test]
    fn too_many_tensors_is_an_error() {
        let m = ModuleTuning {
            runs: vec![Run {
                config: RunConfig::Layout(LayoutConfig {
                    nodes: vec![NodeLayout {
                        tensors: vec![vec![]; 4],
                    }],
                }),
                ..Run::default()
            }],
            ..ModuleTuning::default()
        };
        let err = write_module_tuning(&m).unwrap_err().to_string();
        assert!(err.contains("4 tensors"), "{err}");
    }
}
