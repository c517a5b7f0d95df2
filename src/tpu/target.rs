//! TPU hardware targets: per-generation constants used by the kernel cost model.
//!
//! Every number in the presets is sourced in `docs/cost-model.md` (section
//! "Targets"). A target can be loaded from a JSON or TOML file; such a file may
//! name a `preset` and override only some fields.

use serde::{Deserialize, Serialize};
use std::path::Path;
use thiserror::Error;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// Names of the built-in presets, in generation order.
pub const PRESET_NAMES: [&str; 6] = ["v2", "v3", "v4", "v5e", "v5p", "v6e"];

/// One point of the achievable-HBM-bandwidth curve: a DMA of `bytes` bytes
/// reaches `efficiency` × peak bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HbmPoint {
    /// Transfer size in bytes.
    pub bytes: u64,
    /// Fraction of peak bandwidth achieved, in (0, 1].
    pub efficiency: f64,
}

/// Analytical description of one TPU generation.
///
/// "Device" below means what XLA compiles one kernel for: one TensorCore on
/// v2/v3/v5e/v6e, the two megacore-fused TensorCores on v4/v5p.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TpuTarget {
    /// Preset or user name ("v3", "v5e", ...).
    pub name: String,
    /// TensorCores per chip.
    pub cores_per_chip: u32,
    /// True when the chip's cores act as one device (v4, v5p megacore):
    /// parallel grid axes are split across the cores.
    pub megacore: bool,
    /// Matrix units per TensorCore.
    pub mxus_per_core: u32,
    /// Systolic array side (128, or 256 on v6e).
    pub mxu_size: u32,
    /// Core clock in Hz (VPU / scalar unit cycles).
    pub clock_hz: f64,
    /// Peak dense bf16 FLOP/s per chip (authoritative MXU rate).
    pub peak_bf16_flops: f64,
    /// Peak int8 OP/s per chip (equal to bf16 where int8 has no speed-up).
    pub peak_int8_ops: f64,
    /// Peak HBM bandwidth per chip in bytes/s.
    pub hbm_bandwidth: f64,
    /// Achievable fraction of peak HBM bandwidth by DMA size (sorted by bytes;
    /// interpolated linearly in log(bytes), clamped at both ends).
    pub hbm_efficiency: Vec<HbmPoint>,
    /// HBM capacity per chip in bytes.
    pub hbm_capacity_bytes: u64,
    /// Physical VMEM per core in bytes.
    pub vmem_bytes: u64,
    /// Scoped VMEM limit that tiling must respect (bytes).
    pub vmem_limit_bytes: u64,
    /// Vector unit sublanes (8).
    pub sublanes: u32,
    /// Vector unit lanes (128).
    pub lanes: u32,
    /// VALUs per (sublane, lane) position: cheap vector ops per cycle per vreg.
    pub alus_per_lane: u32,
    /// Cycles per vreg for a medium op (divide, exp, log, tanh, rsqrt, pow).
    pub vpu_medium_cycles: f64,
    /// VALU ops per vreg for an expensive op (sin, cos, erf, ...), divided by
    /// `alus_per_lane`.
    pub vpu_expensive_ops: f64,
    /// VALU ops per vreg to reduce the 8 sublanes of one vreg (3 permutes + 3 adds).
    pub sublane_reduce_ops: f64,
    /// Cross-lane unit (XLU) cycles to reduce the 128 lanes of one vreg.
    pub xlu_lane_reduce_cycles: f64,
    /// XLU cycles to transpose one vreg (minor-dim change).
    pub xlu_transpose_cycles: f64,
    /// Fixed cost per grid step in ns (DMA issue/wait, loop bookkeeping).
    pub grid_step_overhead_ns: f64,
    /// Fixed device-side cost per kernel launch in ns.
    pub kernel_launch_overhead_ns: f64,
    /// Host dispatch cost in ns (Python/JAX call path), added only when
    /// `include_host_dispatch` is true.
    pub host_dispatch_overhead_ns: f64,
    /// Add `host_dispatch_overhead_ns` to every kernel estimate (wall-clock
    /// comparisons such as the JAX notebook timings). Off by default.
    pub include_host_dispatch: bool,
}

/// Errors from loading or validating a target.
#[derive(Debug, Error)]
pub enum TargetError {
    /// Unknown preset name.
    #[error("unknown TPU preset `{0}` (known: v2, v3, v4, v5e, v5p, v6e)")]
    UnknownPreset(String),
    /// The file could not be read.
    #[error("cannot read target file {path}: {err}")]
    Io {
        /// Path of the file.
        path: String,
        /// Underlying error (shown in the message, so not a `source`).
        err: std::io::Error,
    },
    /// An error in the named target file.
    #[error("{path}: {err}")]
    InFile {
        /// Path of the file.
        path: String,
        /// What is wrong in it.
        err: Box<TargetError>,
    },
    /// The file name ends in neither `.json` nor `.toml`.
    #[error("{0}: a target file must end in .json or .toml")]
    Extension(String),
    /// The file is not valid JSON/TOML or does not match the schema.
    #[error("cannot parse target description: {0}")]
    Parse(String),
    /// A field has an impossible value.
    #[error("invalid target field `{field}`: {reason}")]
    Invalid {
        /// Field name.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// Builds the default efficiency table `e(S) = e_max * S / (S + s_half)`
/// sampled at powers of two from 512 B to 1 GiB.
pub fn saturating_hbm_curve(e_max: f64, s_half: f64) -> Vec<HbmPoint> {
    let mut v = Vec::new();
    let mut s: u64 = 512;
    while s <= GIB {
        let sf = s as f64;
        v.push(HbmPoint {
            bytes: s,
            efficiency: e_max * sf / (sf + s_half),
        });
        s *= 2;
    }
    v
}

/// Asymptotic achievable HBM efficiency (≈87 % of peak for large copies, spec §6.1 row 9).
pub const HBM_EFF_MAX: f64 = 0.87;
/// DMA size at which half of `HBM_EFF_MAX` is reached (calibrated, see docs).
pub const HBM_HALF_BYTES: f64 = 16.0 * 1024.0;

/// Per-grid-step overhead on v5e, in core cycles (0.21 µs at 1.5 GHz, fitted
/// to the Pallas 128³-block rows; see docs). Other generations use the same
/// cycle count at their own clock.
pub const GRID_STEP_OVERHEAD_CYCLES: f64 = 315.0;

/// A number for messages: an integer as such (up to 10^13), else in e-notation.
fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e13 {
        format!("{x:.0}")
    } else {
        format!("{x:e}")
    }
}

/// The range `[min, max]` of every numeric target field that [`TpuTarget::validate`]
/// accepts (documented in `docs/cost-model.md`, "Target files"). Every preset lies well
/// inside; the bounds keep a target physical (a scoped VMEM limit under 1 MiB leaves
/// most kernels no tile that fits) and every runtime derived from it finite.
pub const FIELD_RANGES: &[(&str, f64, f64)] = &[
    ("cores_per_chip", 1.0, 8.0),
    ("mxus_per_core", 1.0, 16.0),
    ("mxu_size", 8.0, 1024.0),
    ("clock_hz", 1e8, 1e10),
    ("peak_bf16_flops", 1e11, 1e17),
    ("peak_int8_ops", 1e11, 1e17),
    ("hbm_bandwidth", 1e9, 1e14),
    (
        "hbm_capacity_bytes",
        (256 * MIB) as f64,
        (16384 * GIB) as f64,
    ),
    ("vmem_bytes", MIB as f64, (4 * GIB) as f64),
    ("vmem_limit_bytes", MIB as f64, (4 * GIB) as f64),
    ("sublanes", 1.0, 128.0),
    ("lanes", 8.0, 1024.0),
    ("alus_per_lane", 1.0, 16.0),
    ("vpu_medium_cycles", 1e-3, 1e4),
    ("vpu_expensive_ops", 1e-3, 1e4),
    ("sublane_reduce_ops", 0.0, 1e4),
    ("xlu_lane_reduce_cycles", 0.0, 1e4),
    ("xlu_transpose_cycles", 0.0, 1e4),
    ("grid_step_overhead_ns", 0.0, 1e9),
    ("kernel_launch_overhead_ns", 0.0, 1e9),
    ("host_dispatch_overhead_ns", 0.0, 1e9),
];

#[allow(clippy::too_many_arguments)]
fn preset(
    name: &str,
    cores: u32,
    megacore: bool,
    mxus: u32,
    mxu: u32,
    clock: f64,
    bf16: f64,
    int8: f64,
    bw: f64,
    cap: u64,
    vmem: u64,
    limit: u64,
    alus: u32,
) -> TpuTarget {
    TpuTarget {
        name: name.to_string(),
        cores_per_chip: cores,
        megacore,
        mxus_per_core: mxus,
        mxu_size: mxu,
        clock_hz: clock,
        peak_bf16_flops: bf16,
        peak_int8_ops: int8,
        hbm_bandwidth: bw,
        hbm_efficiency: saturating_hbm_curve(HBM_EFF_MAX, HBM_HALF_BYTES),
        hbm_capacity_bytes: cap,
        vmem_bytes: vmem,
        vmem_limit_bytes: limit,
        sublanes: 8,
        lanes: 128,
        alus_per_lane: alus,
        vpu_medium_cycles: 4.0,
        vpu_expensive_ops: 20.0,
        sublane_reduce_ops: 6.0,
        xlu_lane_reduce_cycles: 8.0,
        xlu_transpose_cycles: 2.0,
        grid_step_overhead_ns: GRID_STEP_OVERHEAD_CYCLES / clock * 1e9,
        kernel_launch_overhead_ns: 1000.0,
        host_dispatch_overhead_ns: 100_000.0,
        include_host_dispatch: false,
    }
}

impl TpuTarget {
    /// TPU v2: 2 separate cores, 1 MXU each, 46 TF/s, 700 GB/s.
    pub fn v2() -> Self {
        preset(
            "v2",
            2,
            false,
            1,
            128,
            0.70e9,
            46e12,
            46e12,
            7.0e11,
            16 * GIB,
            16 * MIB,
            16 * MIB,
            2,
        )
    }
    /// TPU v3 (TpuGraphs hardware): 2 separate cores, 2 MXUs each, 123 TF/s, 900 GB/s.
    pub fn v3() -> Self {
        preset(
            "v3",
            2,
            false,
            2,
            128,
            0.94e9,
            123e12,
            123e12,
            9.0e11,
            32 * GIB,
            16 * MIB,
            16 * MIB,
            2,
        )
    }
    /// TPU v4: megacore of 2 cores, 4 MXUs each, 275 TF/s, 1.2 TB/s.
    pub fn v4() -> Self {
        preset(
            "v4",
            2,
            true,
            4,
            128,
            1.05e9,
            275e12,
            275e12,
            1.2e12,
            32 * GIB,
            16 * MIB,
            16 * MIB,
            2,
        )
    }
    /// TPU v5e: 1 core, 4 MXUs, 197 TF/s bf16, 394 TOP/s int8, 819 GB/s.
    pub fn v5e() -> Self {
        preset(
            "v5e",
            1,
            false,
            4,
            128,
            1.5e9,
            197e12,
            394e12,
            8.19e11,
            16_000_000_000,
            128 * MIB,
            16 * MIB,
            4,
        )
    }
    /// TPU v5p: megacore of 2 cores, 4 MXUs each, 459 TF/s, 2.765 TB/s.
    pub fn v5p() -> Self {
        preset(
            "v5p",
            2,
            true,
            4,
            128,
            1.75e9,
            459e12,
            918e12,
            2.765e12,
            95 * GIB,
            64 * MIB,
            16 * MIB,
            4,
        )
    }
    /// TPU v6e (Trillium): 1 core, 2 MXUs of 256×256, 918 TF/s, 1.64 TB/s.
    pub fn v6e() -> Self {
        preset(
            "v6e",
            1,
            false,
            2,
            256,
            1.75e9,
            918e12,
            1836e12,
            1.64e12,
            32_000_000_000,
            128 * MIB,
            16 * MIB,
            4,
        )
    }

    /// Looks a preset up by name (`v2`, `v3`, `v4`, `v5e`, `v5p`, `v6e`).
    pub fn preset(name: &str) -> Result<Self, TargetError> {
        match name.to_ascii_lowercase().as_str() {
            "v2" => Ok(Self::v2()),
            "v3" => Ok(Self::v3()),
            "v4" => Ok(Self::v4()),
            "v5e" | "v5litepod" | "v5lite" => Ok(Self::v5e()),
            "v5p" => Ok(Self::v5p()),
            "v6e" | "trillium" => Ok(Self::v6e()),
            _ => Err(TargetError::UnknownPreset(name.to_string())),
        }
    }

    /// Returns the same target with host dispatch enabled or disabled.
    pub fn with_host_dispatch(mut self, on: bool) -> Self {
        self.include_host_dispatch = on;
        self
    }

    /// Parses a JSON description. A `"preset": "v5e"` key starts from that
    /// preset and the remaining keys override its fields.
    pub fn from_json_str(text: &str) -> Result<Self, TargetError> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| TargetError::Parse(e.to_string()))?;
        Self::from_value(v)
    }

    /// Parses a TOML description (same schema and `preset` rule as JSON).
    pub fn from_toml_str(text: &str) -> Result<Self, TargetError> {
        let v: serde_json::Value =
            toml::from_str(text).map_err(|e| TargetError::Parse(e.to_string()))?;
        Self::from_value(v)
    }

    /// Loads a `.json` or `.toml` file (decided by extension; any other extension is
    /// an error, as is a file past [`crate::limits::CONFIG_FILE_BYTES`]).
    pub fn from_file(path: &Path) -> Result<Self, TargetError> {
        let io = |err| TargetError::Io {
            path: path.display().to_string(),
            err,
        };
        let parse: fn(&str) -> Result<Self, TargetError> =
            match path.extension().and_then(|e| e.to_str()) {
                Some("toml") => Self::from_toml_str,
                Some("json") => Self::from_json_str,
                _ => return Err(TargetError::Extension(path.display().to_string())),
            };
        let text = crate::limits::read_text(path, crate::limits::CONFIG_FILE_BYTES).map_err(io)?;
        parse(&text).map_err(|e| TargetError::InFile {
            path: path.display().to_string(),
            err: Box::new(e),
        })
    }

    /// Serialises to pretty JSON.
    pub fn to_json_string(&self) -> String {
        // Serialising a plain struct of numbers and strings cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    fn from_value(v: serde_json::Value) -> Result<Self, TargetError> {
        let serde_json::Value::Object(mut map) = v else {
            return Err(TargetError::Parse(
                "target description must be a table/object".into(),
            ));
        };
        let t: TpuTarget = match map.remove("preset") {
            Some(serde_json::Value::String(p)) => {
                let base = Self::preset(&p)?;
                let serde_json::Value::Object(mut bm) =
                    serde_json::to_value(&base).map_err(|e| TargetError::Parse(e.to_string()))?
                else {
                    return Err(TargetError::Parse(
                        "internal: preset is not an object".into(),
                    ));
                };
                for (k, val) in map {
                    if !bm.contains_key(&k) {
                        return Err(TargetError::Parse(format!("unknown field `{k}`")));
                    }
                    bm.insert(k, val);
                }
                serde_json::from_value(serde_json::Value::Object(bm))
                    .map_err(|e| TargetError::Parse(e.to_string()))?
            }
            Some(other) => {
                return Err(TargetError::Parse(format!(
                    "`preset` must be a string, got {other}"
                )))
            }
            None => serde_json::from_value(serde_json::Value::Object(map))
                .map_err(|e| TargetError::Parse(e.to_string()))?,
        };
        t.validate()?;
        Ok(t)
    }

    /// Checks that every field is physically meaningful: each lies in its range of
    /// [`FIELD_RANGES`] (every real TPU well inside, none so far out that a runtime
    /// derived from it stops being a plain finite number), and the scoped VMEM limit is
    /// at most the physical VMEM.
    pub fn validate(&self) -> Result<(), TargetError> {
        for &(field, lo, hi) in FIELD_RANGES {
            let x = self.field_value(field);
            if !(x.is_finite() && x >= lo && x <= hi) {
                return Err(TargetError::Invalid {
                    field,
                    reason: format!("must lie in [{}, {}], got {}", num(lo), num(hi), num(x)),
                });
            }
        }
        if self.vmem_limit_bytes > self.vmem_bytes {
            return Err(TargetError::Invalid {
                field: "vmem_limit_bytes",
                reason: format!(
                    "scoped limit {} exceeds physical VMEM {}",
                    self.vmem_limit_bytes, self.vmem_bytes
                ),
            });
        }
        if self.hbm_efficiency.is_empty() {
            return Err(TargetError::Invalid {
                field: "hbm_efficiency",
                reason: "needs at least one point".into(),
            });
        }
        let mut prev = 0u64;
        for p in &self.hbm_efficiency {
            if p.bytes == 0 || p.bytes <= prev {
                return Err(TargetError::Invalid {
                    field: "hbm_efficiency",
                    reason: "points must have strictly increasing bytes > 0".into(),
                });
            }
            if !(p.efficiency.is_finite() && p.efficiency >= 1e-3 && p.efficiency <= 1.0) {
                return Err(TargetError::Invalid {
                    field: "hbm_efficiency",
                    reason: format!("efficiency {} not in [0.001, 1]", p.efficiency),
                });
            }
            if p.bytes > 1 << 50 {
                return Err(TargetError::Invalid {
                    field: "hbm_efficiency",
                    reason: format!("a point at {} bytes is past 2^50", p.bytes),
                });
            }
            prev = p.bytes;
        }
        Ok(())
    }

    /// A numeric field by name (those of [`FIELD_RANGES`]), as a float.
    fn field_value(&self, field: &str) -> f64 {
        match field {
            "cores_per_chip" => self.cores_per_chip.into(),
            "mxus_per_core" => self.mxus_per_core.into(),
            "mxu_size" => self.mxu_size.into(),
            "clock_hz" => self.clock_hz,
            "peak_bf16_flops" => self.peak_bf16_flops,
            "peak_int8_ops" => self.peak_int8_ops,
            "hbm_bandwidth" => self.hbm_bandwidth,
            "hbm_capacity_bytes" => self.hbm_capacity_bytes as f64,
            "vmem_bytes" => self.vmem_bytes as f64,
            "vmem_limit_bytes" => self.vmem_limit_bytes as f64,
            "sublanes" => self.sublanes.into(),
            "lanes" => self.lanes.into(),
            "alus_per_lane" => self.alus_per_lane.into(),
            "vpu_medium_cycles" => self.vpu_medium_cycles,
            "vpu_expensive_ops" => self.vpu_expensive_ops,
            "sublane_reduce_ops" => self.sublane_reduce_ops,
            "xlu_lane_reduce_cycles" => self.xlu_lane_reduce_cycles,
            "xlu_transpose_cycles" => self.xlu_transpose_cycles,
            "grid_step_overhead_ns" => self.grid_step_overhead_ns,
            "kernel_launch_overhead_ns" => self.kernel_launch_overhead_ns,
            "host_dispatch_overhead_ns" => self.host_dispatch_overhead_ns,
            _ => f64::NAN,
        }
    }

    /// Cores that one kernel runs on (2 for megacore, else 1).
    pub fn device_cores(&self) -> u32 {
        if self.megacore {
            self.cores_per_chip
        } else {
            1
        }
    }

    /// Peak bf16 FLOP/s of one TensorCore.
    pub fn core_peak_bf16(&self) -> f64 {
        self.peak_bf16_flops / f64::from(self.cores_per_chip)
    }

    /// HBM bandwidth available to one TensorCore (chip bandwidth shared evenly).
    pub fn core_hbm_bandwidth(&self) -> f64 {
        self.hbm_bandwidth / f64::from(self.cores_per_chip)
    }

    /// Peak bf16 FLOP/s of the device one kernel runs on (the roofline's MXU ceiling).
    pub fn device_peak_bf16(&self) -> f64 {
        self.core_peak_bf16() * f64::from(self.device_cores())
    }

    /// HBM bandwidth of the device one kernel runs on (the roofline's HBM ceiling).
    pub fn device_hbm_bandwidth(&self) -> f64 {
        self.core_hbm_bandwidth() * f64::from(self.device_cores())
    }

    /// The largest DMA efficiency of the target's table: the most of the bandwidth any
    /// transfer reaches.
    pub fn max_hbm_efficiency(&self) -> f64 {
        self.hbm_efficiency
            .iter()
            .map(|p| p.efficiency)
            .fold(0.0, f64::max)
    }

    /// Effective MXU pass rate (Hz) = core peak ÷ (2 · MXUs · size²). Equal to
    /// `clock_hz` for v2–v5p; on v6e the published peak implies 3.5 GHz, and
    /// the peak is treated as authoritative (spec §1.1).
    pub fn mxu_rate_hz(&self) -> f64 {
        let s = f64::from(self.mxu_size);
        self.core_peak_bf16() / (2.0 * f64::from(self.mxus_per_core) * s * s)
    }

    /// int8 speed-up over bf16 on the MXU (2 on v5e/v5p/v6e, 1 before).
    pub fn int8_speedup(&self) -> f64 {
        (self.peak_int8_ops / self.peak_bf16_flops).max(1.0)
    }

    /// Rows of one (sublane-tile × 128) HBM/VMEM tile for an element width:
    /// 8 for ≥32-bit, 16 for 16-bit, 32 for 8-bit, 64 for 4-bit.
    pub fn sublane_tile(&self, bits: u32) -> i64 {
        let s = i64::from(self.sublanes);
        match bits {
            0..=4 => s * 8,
            5..=8 => s * 4,
            9..=16 => s * 2,
            _ => s,
        }
    }

    /// Achievable fraction of peak HBM bandwidth for one DMA of `bytes`.
    pub fn hbm_efficiency_at(&self, bytes: f64) -> f64 {
        let pts = &self.hbm_efficiency;
        let (Some(first), Some(last)) = (pts.first(), pts.last()) else {
            return 1.0;
        };
        if bytes <= first.bytes as f64 {
            return first.efficiency;
        }
        if bytes >= last.bytes as f64 {
            return last.efficiency;
        }
        // first point with bytes ≥ the transfer; 1 ≤ i < len here
        let i = pts.partition_point(|p| (p.bytes as f64) < bytes);
        let (Some(a), Some(b)) = (pts.get(i.wrapping_sub(1)), pts.get(i)) else {
            return last.efficiency;
        };
        let la = fast_log2(a.bytes as f64);
        let f = (fast_log2(bytes) - la) / (fast_log2(b.bytes as f64) - la);
        a.efficiency + f * (b.efficiency - a.efficiency)
    }
}

/// log2 of a positive normal number to ~1e-6 absolute error: exponent bits
/// plus the atanh series of the mantissa (pure arithmetic, so results are
/// identical on every platform and ~10× cheaper than `f64::ln`).
fn fast_log2(x: f64) -> f64 {
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let series =
        s * (1.0 + s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0)))));
    exp as f64 + series * (2.0 / std::f64::consts::LN_2)
}

impl Default for TpuTarget {
    /// TPU v3, the TpuGraphs hardware.
    fn default() -> Self {
        Self::v3()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mxu_rate_matches_clock_for_v2_to_v5p() {
        for t in [
            TpuTarget::v2(),
            TpuTarget::v3(),
            TpuTarget::v4(),
            TpuTarget::v5e(),
            TpuTarget::v5p(),
        ] {
            let r = t.mxu_rate_hz() / t.clock_hz;
            assert!((r - 1.0).abs() < 0.02, "{}: rate/clock = {r}", t.name);
        }
        assert!((TpuTarget::v6e().mxu_rate_hz() - 3.5e9).abs() < 0.01e9);
    }

    #[test]
    fn presets_validate_and_roundtrip() {
        for n in PRESET_NAMES {
            let t = TpuTarget::preset(n).unwrap();
            t.validate().unwrap();
            let back = TpuTarget::from_json_str(&t.to_json_string()).unwrap();
            assert_eq!(back, t);
        }
        assert_eq!(TpuTarget::default().name, "v3");
        assert!(TpuTarget::preset("v9").is_err());
    }

    #[test]
    fn preset_overrides_from_toml_and_json() {
        let t =
            TpuTarget::from_toml_str("preset = \"v5e\"\nvmem_limit_bytes = 33554432\n").unwrap();
        assert_eq!(t.name, "v5e");
        assert_eq!(t.vmem_limit_bytes, 32 * MIB);
        let e = TpuTarget::from_json_str(r#"{"preset":"v5e","bogus":1}"#).unwrap_err();
        assert!(e.to_string().contains("bogus"));
        let e = TpuTarget::from_json_str(r#"{"preset":"v5e","clock_hz":-1}"#).unwrap_err();
        assert!(e.to_string().contains("clock_hz"));
    }

    #[test]
    fn efficiency_curve_interpolates() {
        let t = TpuTarget::v5e();
        let e_small = t.hbm_efficiency_at(4096.0);
        let e_mid = t.hbm_efficiency_at(65536.0);
        let e_big = t.hbm_efficiency_at(1e9);
        assert!(e_small < e_mid && e_mid < e_big);
        assert!((e_mid - 0.87 * 0.8).abs() < 0.01, "{e_mid}");
        assert!((e_big - 0.87).abs() < 0.001);
    }

    #[test]
    fn fast_log2_is_accurate() {
        for x in [1.0, 1.5, 3.0, 512.0, 700.0, 65536.0, 1.234e9, 1e15] {
            assert!((fast_log2(x) - f64::log2(x)).abs() < 2e-6, "{x}");
        }
    }

    #[test]
    fn sublane_tiles() {
        let t = TpuTarget::v3();
        assert_eq!(t.sublane_tile(32), 8);
        assert_eq!(t.sublane_tile(16), 16);
        assert_eq!(t.sublane_tile(8), 32);
        assert_eq!(t.sublane_tile(64), 8);
    }
}
