//! Analytical TPU model at kernel level.
//!
//! * [`target`]: per-generation hardware constants ([`TpuTarget`], presets
//!   v2…v6e, JSON/TOML loading).
//! * [`kernel`]: kernel descriptions in plain numbers ([`KernelDesc`]), independent
//!   of the HLO IR.
//! * [`tile`]: tile configurations ([`TileConfig`]), the compiler default,
//!   enumeration and seeded sampling.
//! * [`model`]: the cost model ([`estimate`]) and its teaching view ([`explain`]).
//! * [`derivation`]: that view as data ([`Derivation`], from [`derive`]).
//! * [`formula`]: the names of the formulas each printed figure comes from
//!   ([`Formula`], one section each in `docs/cost-model.md`).
//!
//! Formulas and sources: `docs/cost-model.md`.

pub mod derivation;
pub mod error;
pub mod formula;
pub mod kernel;
pub mod model;
pub mod target;
pub mod tile;

pub use derivation::{
    derive, Derivation, DimRole, GridDim, GridFit, InputTraffic, MxuFacts, OutputTraffic, Pipeline,
    Traffic,
};
pub use error::ModelError;
pub use formula::{names_in_line, Figure, Formula};
pub use kernel::{
    Conv2dShape, DimMap, InputDesc, KernelDesc, KernelKind, MxuPrecision, MxuRole, MxuSpec,
    OpCounts, ReduceAxis, ReductionDim, ReductionKind, TensorDesc, VpuWork, MAX_DIMS,
};
pub use model::{estimate, explain, Bottleneck, Estimate};
pub use target::{HbmPoint, TargetError, TpuTarget};
pub use tile::{
    bound_of_dim, bounds_tensor, count_candidates, default_tile, dim_alignment, enumerate_tiles,
    sample_tiles, tile_candidates, tile_extents, tile_sizes, tile_units, TileConfig,
};
