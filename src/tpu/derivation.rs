//! The model's derivation of one kernel estimate as data ([`Derivation`]): what
//! `tpusim explain` prints (its [`std::fmt::Display`]) and what `explain --json`
//! serialises. [`super::model::evaluate`] fills it while it computes the estimate,
//! so the numbers are the estimate's own. Every printed figure names its formulas
//! ([`super::formula`]).

use serde::{Serialize, Serializer};
use std::fmt;

use super::error::ModelError;
use super::formula::{write_figures, Figure, Formula};
use super::kernel::MxuPrecision;
use super::model::{evaluate, Estimate};
use super::{KernelDesc, TileConfig, TpuTarget};

/// Whether an iteration dim indexes the output or a reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DimRole {
    Output,
    Reduction,
}

impl DimRole {
    fn name(self) -> &'static str {
        match self {
            DimRole::Output => "output",
            DimRole::Reduction => "reduction",
        }
    }
}

/// One iteration dim: extent, tile and tile count (section 1).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GridDim {
    pub role: DimRole,
    pub extent: i64,
    pub tile: i64,
    /// ⌈extent / tile⌉.
    pub tiles: i64,
    /// Extent of the last tile (= `tile` when the tile divides the extent).
    pub last_tile: i64,
}

/// Sections 1 and 2: the grid and the VMEM check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GridFit {
    /// Iteration dims, output dims first, reductions innermost.
    pub dims: Vec<GridDim>,
    /// Grid steps (Π tiles).
    pub steps: f64,
    /// Double-buffered input and output tiles (+ f32 accumulator tile), bytes.
    pub vmem_bytes: u64,
    /// Scoped VMEM limit of the target, bytes.
    pub vmem_limit_bytes: u64,
    /// An f32 accumulator tile is counted (the kernel reduces).
    pub accumulator: bool,
    /// `vmem_bytes <= vmem_limit_bytes`.
    pub fits: bool,
}

/// HBM traffic of one input (section 3).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputTraffic {
    /// Physical dims, major→minor.
    pub dims: Vec<i64>,
    pub elem_bits: u32,
    /// Padded bytes of a full tile.
    pub tile_bytes: f64,
    /// Times the block is fetched over the grid.
    pub fetches: f64,
    /// DMA efficiency at the tile's size (fraction of the bandwidth achieved).
    pub dma_efficiency: f64,
}

/// HBM traffic of the output (section 3).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputTraffic {
    pub dims: Vec<i64>,
    pub elem_bits: u32,
    /// Padded bytes of a full output tile.
    pub tile_bytes: f64,
    /// Output tiles written (once each).
    pub writes: f64,
}

/// Section 3: per-tensor HBM traffic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Traffic {
    /// Per-core HBM bandwidth, B/s.
    pub bandwidth_bytes_per_s: f64,
    pub inputs: Vec<InputTraffic>,
    pub output: OutputTraffic,
}

/// The MXU facts of section 4 (matrix-unit kernels only).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MxuFacts {
    /// MXUs per core.
    pub arrays: u32,
    /// Systolic array side (R of R×R).
    pub size: u32,
    /// Effective MXU clock, Hz.
    pub rate_hz: f64,
    pub precision: MxuPrecision,
    /// Passes per product at this precision.
    pub passes: f64,
    /// The window taps are part of the contraction (filter gradient).
    pub big_window: bool,
}

/// Sections 4–6: compute, pipeline, overheads and the total (the [`Estimate`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pipeline {
    /// The estimate itself (`estimate.total_ns` is the kernel time).
    pub estimate: Estimate,
    /// Distinct tile shapes evaluated (2^(dims with a smaller last tile)).
    pub tile_shapes: usize,
    pub mxu: Option<MxuFacts>,
    /// Factor on the steady DMA time that leaves out prologue and epilogue.
    pub steady_dma_scale: f64,
    /// Share of the output tiles on the critical core (1 without megacore split).
    pub megacore_factor: f64,
    /// Per grid step overhead of the target, ns.
    pub grid_step_overhead_ns: f64,
    /// Peak bf16 FLOP/s of the device (all cores).
    pub device_peak_flops: f64,
}

/// The model's derivation of one kernel estimate under one tile configuration.
/// Sections are `None` from the point where the evaluation stopped (`error`). Its JSON
/// also holds `figures`: the printed lines with their formulas ([`Derivation::figures`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Derivation {
    pub kernel: String,
    pub target: String,
    /// Sections 1–2 (absent when the tile configuration itself is invalid).
    pub grid: Option<GridFit>,
    /// Section 3 (absent when the tiles do not fit VMEM).
    pub traffic: Option<Traffic>,
    /// Sections 4–6.
    pub pipeline: Option<Pipeline>,
    /// Why the configuration could not be evaluated.
    pub error: Option<ModelError>,
}

impl Serialize for Derivation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Derivation", 7)?;
        st.serialize_field("kernel", &self.kernel)?;
        st.serialize_field("target", &self.target)?;
        st.serialize_field("grid", &self.grid)?;
        st.serialize_field("traffic", &self.traffic)?;
        st.serialize_field("pipeline", &self.pipeline)?;
        st.serialize_field("error", &self.error.as_ref().map(|e| e.to_string()))?;
        st.serialize_field("figures", &self.figures())?;
        st.end()
    }
}

impl Derivation {
    /// An empty derivation of `desc` on `target`, for [`evaluate`] to fill.
    pub(crate) fn new(desc: &KernelDesc, target: &TpuTarget) -> Self {
        Derivation {
            kernel: desc.name.to_string(),
            target: target.name.clone(),
            grid: None,
            traffic: None,
            pipeline: None,
            error: None,
        }
    }

    /// The estimate, when the configuration was evaluable.
    pub fn estimate(&self) -> Option<&Estimate> {
        self.pipeline.as_ref().map(|p| &p.estimate)
    }
}

/// The derivation of the estimate of `desc` under `cfg` on `target` (infeasible and
/// invalid configurations included: `error` says why they stop).
pub fn derive(desc: &KernelDesc, cfg: &TileConfig, target: &TpuTarget) -> Derivation {
    let mut d = Derivation::new(desc, target);
    if let Err(e) = evaluate(desc, cfg, target, Some(&mut d)) {
        d.error = Some(e);
    }
    d
}

impl Derivation {
    /// The lines of the derivation as `tpusim explain` prints them, each with the
    /// formulas of its figures ([`Formula`], sections of `docs/cost-model.md`).
    pub fn figures(&self) -> Vec<Figure> {
        use Formula as F;
        let mut v = Vec::new();
        if let Some(g) = &self.grid {
            v.push(Figure::plain(format!(
                "Kernel `{}` on TPU {}",
                self.kernel, self.target
            )));
            v.push(Figure::plain(""));
            v.push(Figure::plain(
                "1. Iteration space and grid (loop order = listed order, reduction innermost)",
            ));
            for (i, d) in g.dims.iter().enumerate() {
                let mut t = format!(
                    "   dim {i} ({}): extent {} / tile {} → {} tiles",
                    d.role.name(),
                    d.extent,
                    d.tile,
                    d.tiles
                );
                if d.last_tile != d.tile {
                    t.push_str(&format!(" (last tile {})", d.last_tile));
                }
                v.push(Figure::new(t, &[F::TilesPerDim]));
            }
            v.push(Figure::new(
                format!("   grid steps = Π tiles = {}", g.steps),
                &[F::GridSteps],
            ));
            v.push(Figure::plain(""));
            v.push(Figure::new(
                format!(
                    "2. VMEM footprint = 2×(input tiles) + 2×(output tile){} = {} B (scoped limit {} B)",
                    if g.accumulator { " + f32 accumulator tile" } else { "" },
                    g.vmem_bytes,
                    g.vmem_limit_bytes
                ),
                &[F::VmemFootprint],
            ));
            if !g.fits {
                v.push(Figure::new(
                    "   → INFEASIBLE: the tiles do not fit VMEM.".into(),
                    &[F::VmemFootprint],
                ));
            }
        }
        if let (Some(t), Some(g)) = (&self.traffic, &self.grid) {
            v.push(Figure::plain(""));
            v.push(Figure::new(
                format!(
                    "3. HBM traffic (per-core bandwidth {:.3e} B/s; a block is re-fetched only when its index changes between consecutive steps)",
                    t.bandwidth_bytes_per_s
                ),
                &[F::CoreHbmBandwidth, F::Fetches],
            ));
            for (k, i) in t.inputs.iter().enumerate() {
                v.push(Figure::new(
                    format!(
                        "   input {k} {:?} ({} bit): full tile {} B padded, fetched {} times (of {} steps), DMA efficiency {:.2}",
                        i.dims, i.elem_bits, i.tile_bytes, i.fetches, g.steps, i.dma_efficiency
                    ),
                    &[F::PaddedTileBytes, F::Fetches, F::DmaEfficiency],
                ));
            }
            let o = &t.output;
            v.push(Figure::new(
                format!(
                    "   output {:?} ({} bit): tile {} B padded, written once per output tile ({} times)",
                    o.dims, o.elem_bits, o.tile_bytes, o.writes
                ),
                &[F::PaddedTileBytes, F::OutputWrites],
            ));
        }
        if let Some(p) = &self.pipeline {
            p.figures(&mut v);
        }
        if let Some(e) = &self.error {
            v.push(Figure::plain(""));
            v.push(Figure::plain(format!("Not evaluable: {e}")));
        }
        v
    }
}

impl fmt::Display for Derivation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_figures(f, &self.figures())
    }
}

impl Pipeline {
    /// The lines of sections 3 (totals) to 6, each with its formulas.
    fn figures(&self, v: &mut Vec<Figure>) {
        use Formula as F;
        let est = &self.estimate;
        v.push(Figure::new(
            format!(
                "   total HBM traffic: read {:.0} B + write {:.0} B = {:.0} B (logical minimum {:.0} B, ×{:.2})",
                est.hbm_read_bytes,
                est.hbm_write_bytes,
                est.hbm_bytes,
                est.min_bytes,
                if est.min_bytes > 0.0 { est.hbm_bytes / est.min_bytes } else { 0.0 }
            ),
            &[F::HbmTraffic],
        ));
        v.push(Figure::new(
            format!(
                "   total DMA time Σ bytes/(BW·eff(bytes)) = {:.1} ns",
                est.hbm_ns
            ),
            &[F::DmaTime],
        ));
        v.push(Figure::plain(""));
        v.push(Figure::new(
            format!(
                "4. Compute per step (edge tiles evaluated separately: {} tile shapes)",
                self.tile_shapes
            ),
            &[F::EdgeTiles],
        ));
        if let Some(m) = &self.mxu {
            let rr = m.size;
            v.push(Figure::new(
                format!(
                    "   MXU: {} × {}×{} arrays at {:.3} GHz effective; precision {:?} ({} pass(es)); per fold max(M_pad, {rr}) cycles (weight load overlapped), {}",
                    m.arrays,
                    rr,
                    rr,
                    m.rate_hz / 1e9,
                    m.precision,
                    m.passes,
                    if m.big_window {
                        format!("folds = batch·⌈K·window/{rr}⌉·N_pad/{rr} (filter gradient: the window taps are part of the contraction)")
                    } else {
                        format!("folds = batch·window·K_pad/{rr}·N_pad/{rr}")
                    }
                ),
                &[F::MxuRate, F::MxuFolds],
            ));
            v.push(Figure::new(
                format!(
                    "   logical flops {:.4e}, padded flops {:.4e} → MXU utilisation {:.1}%",
                    est.flops,
                    est.padded_flops,
                    100.0 * est.mxu_utilization
                ),
                &[F::KernelFlops, F::MxuUtilisation],
            ));
        }
        v.push(Figure::new(
            format!(
                "   Σ MXU {:.1} ns, Σ VPU {:.1} ns, Σ XLU {:.1} ns, Σ max(units) {:.1} ns",
                est.mxu_ns, est.vpu_ns, est.xlu_ns, est.compute_ns
            ),
            &[F::MxuTime, F::VpuTime, F::XluTime, F::ComputeTime],
        ));
        v.push(Figure::plain(""));
        let megacore = self.megacore_factor < 1.0;
        v.push(Figure::new(
            format!(
                "5. Pipeline: Σ_steps max(compute, DMA×{:.3}) = {:.1} ns (DMA scaled to exclude prologue/epilogue){}",
                self.steady_dma_scale,
                est.pipelined_ns,
                if megacore {
                    format!(", megacore factor {:.3}", self.megacore_factor)
                } else {
                    String::new()
                }
            ),
            if megacore {
                &[F::PipelinedTime, F::MegacoreFactor]
            } else {
                &[F::PipelinedTime]
            },
        ));
        v.push(Figure::new(
            format!(
                "   prologue (first input DMA) {:.1} ns, epilogue (last output write) {:.1} ns",
                est.prologue_ns, est.epilogue_ns
            ),
            &[F::PrologueEpilogue],
        ));
        v.push(Figure::new(
            format!(
                "   overheads: {} steps × {:.1} ns = {:.1} ns, launch {:.1} ns, MXU fill/drain {:.1} ns, host dispatch {:.1} ns",
                est.steps_per_core,
                self.grid_step_overhead_ns,
                est.step_overhead_ns,
                est.launch_ns,
                est.mxu_fill_ns,
                est.dispatch_ns
            ),
            &[F::StepOverhead, F::LaunchOverhead, F::MxuFill, F::HostDispatch],
        ));
        v.push(Figure::plain(""));
        v.push(Figure::new(
            format!(
                "6. Total = pipelined + prologue + epilogue + overheads = {:.1} ns ({:.3} µs); bottleneck: {:?}",
                est.total_ns,
                est.total_ns / 1e3,
                est.bottleneck
            ),
            &[F::KernelTotal, F::Bottleneck],
        ));
        if est.flops > 0.0 && est.total_ns > 0.0 {
            v.push(Figure::new(
                format!(
                    "   achieved {:.2} TFLOP/s = {:.1}% of the per-device peak",
                    est.flops / est.total_ns / 1e3,
                    100.0 * est.flops / (est.total_ns * 1e-9) / self.device_peak_flops
                ),
                &[F::AchievedFlops],
            ));
        }
    }
}
