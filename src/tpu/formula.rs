//! The names of the model's formulas. Every figure `tpusim explain` prints ends with the
//! names of the formulas it comes from (`[grid-steps]`), and `docs/cost-model.md` has a
//! section under each name (§10, "Formulas by name"; `tests/formulas.rs` checks both).
//! [`Figure`] is one printed line with its formulas: what the explanation's text and its
//! JSON are made of.

use serde::Serialize;
use std::fmt;

/// One formula of the model, by the name its section in `docs/cost-model.md` has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Formula {
    /// FLOPs of a kernel, counted when it is lowered.
    KernelFlops,
    /// A tile as TpuGraphs records it: tile counts of the physical tiled shapes.
    TileCounts,
    /// Tiles along one iteration dim, `⌈extent / tile⌉`, and the last tile.
    TilesPerDim,
    /// Grid steps, `Π tiles`.
    GridSteps,
    /// Double-buffered tiles (+ accumulator) against the scoped VMEM limit.
    VmemFootprint,
    /// The HBM bandwidth one core sees.
    CoreHbmBandwidth,
    /// Bytes of a tile after padding to the (sublane, lane) hardware tile.
    PaddedTileBytes,
    /// Times a block is fetched over the grid (the re-fetch rule).
    Fetches,
    /// Achievable fraction of the bandwidth for one DMA of a given size.
    DmaEfficiency,
    /// Output tiles written, once each.
    OutputWrites,
    /// Bytes read and written, against the logical minimum.
    HbmTraffic,
    /// Σ bytes / (bandwidth · efficiency).
    DmaTime,
    /// Edge tiles: every distinct tile shape evaluated with its step count.
    EdgeTiles,
    /// Effective MXU clock: core peak ÷ (2 · MXUs · size²).
    MxuRate,
    /// Folds (weight loads) and cycles of the systolic arrays.
    MxuFolds,
    /// Padded MXU FLOPs and the utilisation `flops / padded_flops`.
    MxuUtilisation,
    /// Σ MXU busy time.
    MxuTime,
    /// Σ VPU busy time.
    VpuTime,
    /// Σ XLU (cross-lane unit) busy time.
    XluTime,
    /// Σ over steps of max(MXU, VPU, XLU).
    ComputeTime,
    /// Steady state: Σ max(compute, DMA scaled to exclude prologue and epilogue).
    PipelinedTime,
    /// The share of the output tiles on the critical core of a megacore.
    MegacoreFactor,
    /// The first input DMA and the last output write, not overlapped.
    PrologueEpilogue,
    /// Grid steps × the per-step overhead.
    StepOverhead,
    /// The fixed cost of one kernel launch.
    LaunchOverhead,
    /// MXU pipeline fill and drain, once per kernel.
    MxuFill,
    /// The host's dispatch cost (off unless asked for).
    HostDispatch,
    /// Kernel time: pipelined + prologue + epilogue + overheads.
    KernelTotal,
    /// What bounds the kernel: the largest of the unit, memory and overhead times.
    Bottleneck,
    /// FLOPs / kernel time, against the device's peak.
    AchievedFlops,
    /// Writes of outputs besides the main output, and what compute slack hides.
    SideOutputs,
    /// The time of a kernel whose tile does not fit VMEM.
    UntiledRoofline,
    /// A program's time: Σ executions × kernel time, loops and branches included.
    ProgramTotal,
    /// FLOPs per byte of HBM traffic.
    ArithmeticIntensity,
    /// The MXU and HBM ceilings of a target's roofline.
    RooflineCeilings,
}

impl Formula {
    /// Every formula, in the order of their sections.
    pub const ALL: [Formula; 35] = [
        Formula::KernelFlops,
        Formula::TileCounts,
        Formula::TilesPerDim,
        Formula::GridSteps,
        Formula::VmemFootprint,
        Formula::CoreHbmBandwidth,
        Formula::PaddedTileBytes,
        Formula::Fetches,
        Formula::DmaEfficiency,
        Formula::OutputWrites,
        Formula::HbmTraffic,
        Formula::DmaTime,
        Formula::EdgeTiles,
        Formula::MxuRate,
        Formula::MxuFolds,
        Formula::MxuUtilisation,
        Formula::MxuTime,
        Formula::VpuTime,
        Formula::XluTime,
        Formula::ComputeTime,
        Formula::PipelinedTime,
        Formula::MegacoreFactor,
        Formula::PrologueEpilogue,
        Formula::StepOverhead,
        Formula::LaunchOverhead,
        Formula::MxuFill,
        Formula::HostDispatch,
        Formula::KernelTotal,
        Formula::Bottleneck,
        Formula::AchievedFlops,
        Formula::SideOutputs,
        Formula::UntiledRoofline,
        Formula::ProgramTotal,
        Formula::ArithmeticIntensity,
        Formula::RooflineCeilings,
    ];

    /// The name: the heading of the formula's section in `docs/cost-model.md`.
    pub fn name(self) -> &'static str {
        match self {
            Formula::KernelFlops => "kernel-flops",
            Formula::TileCounts => "tile-counts",
            Formula::TilesPerDim => "tiles-per-dim",
            Formula::GridSteps => "grid-steps",
            Formula::VmemFootprint => "vmem-footprint",
            Formula::CoreHbmBandwidth => "core-hbm-bandwidth",
            Formula::PaddedTileBytes => "padded-tile-bytes",
            Formula::Fetches => "fetches",
            Formula::DmaEfficiency => "dma-efficiency",
            Formula::OutputWrites => "output-writes",
            Formula::HbmTraffic => "hbm-traffic",
            Formula::DmaTime => "dma-time",
            Formula::EdgeTiles => "edge-tiles",
            Formula::MxuRate => "mxu-rate",
            Formula::MxuFolds => "mxu-folds",
            Formula::MxuUtilisation => "mxu-utilisation",
            Formula::MxuTime => "mxu-time",
            Formula::VpuTime => "vpu-time",
            Formula::XluTime => "xlu-time",
            Formula::ComputeTime => "compute-time",
            Formula::PipelinedTime => "pipelined-time",
            Formula::MegacoreFactor => "megacore-factor",
            Formula::PrologueEpilogue => "prologue-epilogue",
            Formula::StepOverhead => "step-overhead",
            Formula::LaunchOverhead => "launch-overhead",
            Formula::MxuFill => "mxu-fill",
            Formula::HostDispatch => "host-dispatch",
            Formula::KernelTotal => "kernel-total",
            Formula::Bottleneck => "bottleneck",
            Formula::AchievedFlops => "achieved-flops",
            Formula::SideOutputs => "side-outputs",
            Formula::UntiledRoofline => "untiled-roofline",
            Formula::ProgramTotal => "program-total",
            Formula::ArithmeticIntensity => "arithmetic-intensity",
            Formula::RooflineCeilings => "roofline-ceilings",
        }
    }

    /// The formula of that name.
    pub fn from_name(name: &str) -> Option<Formula> {
        Formula::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl fmt::Display for Formula {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One line of an explanation: its text and the formulas its figures come from (none
/// for headings and blank lines). Printed as the text, then `  [name, name]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    pub text: String,
    pub formulas: &'static [Formula],
}

impl Figure {
    /// A line with the formulas of its figures.
    pub fn new(text: String, formulas: &'static [Formula]) -> Self {
        Figure { text, formulas }
    }

    /// A line without figures (a heading, a blank line).
    pub fn plain(text: impl Into<String>) -> Self {
        Figure {
            text: text.into(),
            formulas: &[],
        }
    }
}

impl fmt::Display for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)?;
        if let Some((first, rest)) = self.formulas.split_first() {
            write!(f, "  [{first}")?;
            for x in rest {
                write!(f, ", {x}")?;
            }
            f.write_str("]")?;
        }
        Ok(())
    }
}

/// Writes `figures` one per line.
pub fn write_figures(f: &mut fmt::Formatter<'_>, figures: &[Figure]) -> fmt::Result {
    for x in figures {
        writeln!(f, "{x}")?;
    }
    Ok(())
}

/// The formula names at the end of a printed line (`text  [a, b]`), if it has any:
/// what a reader (or a test) finds the formulas of an explanation by.
pub fn names_in_line(line: &str) -> Option<Vec<&str>> {
    let body = line.trim_end().strip_suffix(']')?;
    let (_, inside) = body.rsplit_once("  [")?;
    let names: Vec<&str> = inside.split(", ").collect();
    names
        .iter()
        .all(|n| {
            n.starts_with(|c: char| c.is_ascii_lowercase())
                && n.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
        .then_some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        let mut names: Vec<&str> = Formula::ALL.iter().map(|f| f.name()).collect();
        for f in Formula::ALL {
            assert_eq!(Formula::from_name(f.name()), Some(f));
            // the JSON name is the same
            assert_eq!(
                serde_json::to_value(f).unwrap(),
                serde_json::Value::from(f.name())
            );
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Formula::ALL.len());
    }

    #[test]
    fn a_figure_prints_its_names_and_they_parse_back() {
        let f = Figure::new(
            "   grid steps = Π tiles = 64".into(),
            &[Formula::GridSteps, Formula::TilesPerDim],
        );
        let s = f.to_string();
        assert_eq!(
            s,
            "   grid steps = Π tiles = 64  [grid-steps, tiles-per-dim]"
        );
        assert_eq!(names_in_line(&s), Some(vec!["grid-steps", "tiles-per-dim"]));
        assert_eq!(Figure::plain("x").to_string(), "x");
        assert_eq!(names_in_line("   input 0 [224, 224, 8, 3]"), None);
        assert_eq!(names_in_line("dims → [Iter(4), Iter(5)]"), None);
    }
}
