//! `tpusim roofline` (a program's kernels on the target's roofline: table, CSV, JSON,
//! SVG) and `tpusim report` (the whole teaching report as one HTML page).

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

use super::compile::{load_and_compile, load_and_lower, target};
use crate::progress::{Progress, ProgressMode};
use crate::proto::tuning::write_file_atomic;
use crate::report::html::roofline_title;
use crate::report::{build, roofline, ReportInput};

#[derive(Args, Debug)]
pub struct RooflineArgs {
    /// HLO module file.
    pub file: PathBuf,
    /// TPU target: v2, v3, v4, v5e, v5p, v6e, or a JSON/TOML target file.
    #[arg(long, default_value = "v3")]
    pub tpu: String,
    /// Compilation configuration (JSON or TOML).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Draw the roofline as an SVG chart in this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write one line per kernel as CSV to this file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Kernels labelled on the chart and listed in the table (largest share first).
    #[arg(long, default_value_t = 8)]
    pub top: usize,
    /// Print the roofline as one JSON object (ceilings and every kernel) instead of the
    /// table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// HLO module file.
    pub file: PathBuf,
    /// TPU target: v2, v3, v4, v5e, v5p, v6e, or a JSON/TOML target file.
    #[arg(long, default_value = "v3")]
    pub tpu: String,
    /// Compilation configuration (JSON or TOML).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The HTML file to write.
    #[arg(long)]
    pub out: PathBuf,
    /// Kernels explained in full (the costliest first).
    #[arg(long, default_value_t = 3)]
    pub explain: usize,
    /// No progress on stderr for the layout sweep (a bar on a terminal, else a line
    /// every 10 s).
    #[arg(long)]
    pub quiet: bool,
}

pub fn roofline_cmd(a: RooflineArgs) -> Result<i32> {
    let t = target(&a.tpu, false)?;
    let Some((_, _, c)) = load_and_lower(&a.file, &a.config)? else {
        return Ok(1);
    };
    let e = match c.estimate(&t) {
        Ok(e) => e,
        Err(err) => {
            eprintln!("{}: error: {err}", a.file.display());
            return Ok(1);
        }
    };
    let r = roofline(&e, &t);
    if let Some(path) = &a.csv {
        write_file_atomic(path, r.to_csv().as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.out {
        let title = roofline_title(&a.file.display().to_string(), &r);
        let svg = r.to_svg(&title, a.top)?;
        write_file_atomic(path, svg.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&r)?)?;
        return Ok(0);
    }
    outln!(
        "{}: {:.3} ms on {}; ceilings: MXU {:.1} TFLOP/s, HBM {:.0} GB/s ({:.0} GB/s at the largest DMA efficiency), ridge {:.1} FLOP/B  [roofline-ceilings]",
        a.file.display(),
        r.program_ns / 1e6,
        r.target,
        r.peak_flops / 1e12,
        r.bandwidth / 1e9,
        r.achievable_bandwidth / 1e9,
        r.ridge
    )?;
    outln!(
        "{:<28} {:<13} {:>10} {:>10} {:>8} {:>7}  bottleneck",
        "kernel",
        "kind",
        "FLOP/B",
        "TFLOP/s",
        "of_roof",
        "share"
    )?;
    for p in r.by_share().into_iter().take(a.top) {
        let roof = r.peak_flops.min(r.bandwidth * p.intensity);
        outln!(
            "{:<28} {:<13} {:>10.2} {:>10.2} {:>7.1}% {:>6.1}%  {:?}{}",
            p.kernel,
            p.kind,
            p.intensity,
            p.flops_per_s / 1e12,
            100.0 * p.flops_per_s / roof,
            100.0 * p.share,
            p.bottleneck,
            if p.untiled { " (untiled)" } else { "" }
        )?;
    }
    let without = if r.without_flops > 0 {
        format!(
            "; {} without FLOPs (copies, data movement: {:.1}% of the time) {} not on it",
            r.without_flops,
            100.0 * r.without_flops_share,
            if r.without_flops == 1 { "is" } else { "are" }
        )
    } else {
        String::new()
    };
    outln!(
        "({} kernels with FLOPs on the roofline{without}; of_roof: achieved / the ceiling at the kernel's intensity)",
        r.points.len(),
    )?;
    Ok(0)
}

pub fn report_cmd(a: ReportArgs) -> Result<i32> {
    let t = target(&a.tpu, false)?;
    let Some((m, cfg, c)) = load_and_compile(&a.file, &a.config)? else {
        return Ok(1);
    };
    let file = a.file.display().to_string();
    let config_name = a.config.as_ref().map(|p| p.display().to_string());
    let input = ReportInput {
        file: &file,
        config_name: config_name.as_deref(),
        module: &m,
        config: &cfg,
        compiled: &c,
        target: &t,
    };
    let pb = Progress::new(ProgressMode::for_stderr(a.quiet), 0, "layouts");
    // Each layout sweep reports its own total: the bar grows by it when a sweep starts.
    let tick = |total: usize| {
        if pb.position() >= pb.length() {
            pb.inc_length(total as u64);
        }
        pb.inc(1);
    };
    let r = match build(&input, a.explain, &tick) {
        Ok(r) => r,
        Err(e) => {
            pb.finish_and_clear();
            eprintln!("{}: error: {e}", a.file.display());
            return Ok(1);
        }
    };
    pb.finish_and_clear();
    let html = r.to_html()?;
    write_file_atomic(&a.out, html.as_bytes())
        .with_context(|| format!("writing {}", a.out.display()))?;
    outln!(
        "{}: {} on {}: {:.3} ms, {} kernels  [program-total]",
        a.out.display(),
        file,
        t.name,
        r.estimate.total_ns / 1e6,
        r.estimate.kernels.len()
    )?;
    if let Some(s) = &r.tile {
        outln!("  tile sweep: {} ({} tiles)", s.kernel, s.rows.len())?;
    }
    if let (Some(s), Some(k)) = (&r.layout, &r.layout_kernel) {
        let best = r
            .layout_candidates
            .iter()
            .find(|c| c.node == s.node && c.tensor == s.tensor)
            .map_or(0.0, |c| c.spread);
        outln!(
            "  layout sweep: {} {} of {} ({} layouts, spread {:.1}%; {} tensors tried)",
            s.node,
            s.tensor.name(),
            k,
            s.rows.len(),
            100.0 * best,
            r.layout_candidates.len()
        )?;
    }
    Ok(0)
}
