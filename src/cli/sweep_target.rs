//! `tpusim sweep target`: the same program on several TPU generations (table, CSV,
//! JSON, SVG chart).

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

use super::compile::{load_and_lower, target};
use crate::proto::tuning::write_file_atomic;
use crate::sweep::plot::BOTTLENECKS;
use crate::sweep::target::target_sweep;
use crate::tpu::target::PRESET_NAMES;

#[derive(Args, Debug)]
pub struct TargetArgs {
    /// HLO module file.
    pub file: PathBuf,
    /// Targets, comma-separated: presets (v2, v3, v4, v5e, v5p, v6e) or JSON/TOML target
    /// files (default: every preset, in generation order).
    #[arg(long, value_delimiter = ',')]
    pub targets: Vec<String>,
    /// Compilation configuration (JSON or TOML); its tiles apply on every target.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Kernels whose bottleneck changes shown in the table and the chart (largest
    /// share first; the CSV and JSON have every kernel).
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Write one line per kernel and target as CSV to this file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Draw the sweep as an SVG chart in this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Print the sweep as one JSON object (every kernel on every target) instead of the
    /// table.
    #[arg(long)]
    pub json: bool,
}

pub fn sweep_target(a: TargetArgs) -> Result<i32> {
    let names: Vec<String> = if a.targets.is_empty() {
        PRESET_NAMES.iter().map(|s| s.to_string()).collect()
    } else {
        a.targets.clone()
    };
    let targets = names
        .iter()
        .map(|n| target(n, false))
        .collect::<Result<Vec<_>>>()?;
    let Some((_, _, c)) = load_and_lower(&a.file, &a.config)? else {
        return Ok(1);
    };
    let s = match target_sweep(&c.program, &c.tiles(), &targets) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{}: error: {e}", a.file.display());
            return Ok(1);
        }
    };
    if let Some(path) = &a.csv {
        write_file_atomic(path, s.to_csv().as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.plot {
        let title = format!("{}: program time per target", a.file.display());
        let svg = s.to_svg(&title, a.top)?;
        write_file_atomic(path, svg.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&s)?)?;
        return Ok(0);
    }
    outln!(
        "{}: {} kernels on {} targets  [program-total, bottleneck]",
        a.file.display(),
        s.kernels.len(),
        s.targets.len()
    )?;
    out!("{:<8} {:>12} {:>9}", "target", "program_ms", "speed-up")?;
    for b in BOTTLENECKS {
        out!(" {:>9}", format!("{b:?}"))?;
    }
    outln!(" {:>8}", "untiled")?;
    let base = s.targets.first().map_or(0.0, |t| t.total_ns);
    for t in &s.targets {
        out!(
            "{:<8} {:>12.3} {:>8.2}x",
            t.target,
            t.total_ns / 1e6,
            if t.total_ns > 0.0 {
                base / t.total_ns
            } else {
                0.0
            }
        )?;
        for b in &t.by_bottleneck {
            let share = if t.total_ns > 0.0 {
                b.ns / t.total_ns
            } else {
                0.0
            };
            out!(" {:>8.1}%", 100.0 * share)?;
        }
        outln!(" {:>8}", t.untiled)?;
    }
    outln!(
        "(speed-up over {}; the bottleneck columns split the program time by what bounds each kernel)",
        s.targets.first().map_or("-", |t| t.target.as_str())
    )?;
    let changes = s.changes();
    outln!()?;
    if changes.is_empty() {
        outln!("No kernel changes bottleneck between these targets.")?;
        return Ok(0);
    }
    outln!(
        "{} of {} kernels change bottleneck between targets{}:",
        changes.len(),
        s.kernels.len(),
        if changes.len() > a.top {
            format!(" (the {} with the largest share of a program time)", a.top)
        } else {
            String::new()
        }
    )?;
    let mut line = format!("{:<28} {:<13} {:>9}", "kernel", "kind", "max_share");
    for t in &s.targets {
        line.push_str(&format!(" {:<8}", t.target));
    }
    outln!("{}", line.trim_end())?;
    for k in changes.iter().take(a.top) {
        let mut line = format!(
            "{:<28} {:<13} {:>8.2}%",
            k.kernel,
            k.kind,
            100.0 * k.max_share()
        );
        for o in &k.on {
            line.push_str(&format!(" {:<8}", o.bound()));
        }
        outln!("{}", line.trim_end())?;
    }
    outln!("(untiled: the default tile does not fit VMEM, the untiled roofline times the kernel)")?;
    Ok(0)
}
