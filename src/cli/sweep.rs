//! `tpusim sweep tile|layout|target`: how one kernel's time moves with its tile, how the
//! whole program's time moves with one node's layout, and with the TPU generation
//! (`sweep_target.rs`) (table, CSV, SVG chart).

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};

use super::compile::{config, target};
use super::input::load_modules;
use crate::kernels::find_kernel;
use crate::passes::compile;
use crate::progress::{Progress, ProgressMode};
use crate::proto::tuning::write_file_atomic;
use crate::sweep::{self, layout_text, plot, Tensor};

#[derive(Subcommand, Debug)]
pub enum SweepKind {
    /// One kernel under every candidate tile size of each iteration dim (the others at
    /// the compiler's default tile).
    Tile(TileArgs),
    /// The whole program under every layout of one tensor of a configurable node.
    Layout(LayoutArgs),
    /// The whole program on every TPU generation: its time on each, and the kernels
    /// whose bottleneck changes between them.
    Target(super::sweep_target::TargetArgs),
}

#[derive(Args, Debug)]
pub struct Common {
    /// HLO module file.
    pub file: PathBuf,
    /// TPU target: v2, v3, v4, v5e, v5p, v6e, or a JSON/TOML target file.
    #[arg(long, default_value = "v3")]
    pub tpu: String,
    /// Compilation configuration the sweep starts from (JSON or TOML).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Write the rows as CSV to this file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Draw the sweep as an SVG chart in this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Print the sweep as one JSON object (its rows with the same numbers) instead of
    /// the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct TileArgs {
    #[command(flatten)]
    pub common: Common,
    /// Kernel (fusion or unfused instruction) name in the compiled module, as
    /// `tpusim estimate` lists them.
    #[arg(long)]
    pub kernel: String,
    /// Iteration dims to sweep (repeat the flag; default: every dim with a choice).
    #[arg(long)]
    pub dim: Vec<usize>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TensorArg {
    Output,
    Input,
    Kernel,
}

#[derive(Args, Debug)]
pub struct LayoutArgs {
    #[command(flatten)]
    pub common: Common,
    /// Configurable node (convolution, dot or reshape) by instruction name.
    #[arg(long)]
    pub node: String,
    /// Which of its tensors to lay out: the output, operand 0, or operand 1.
    #[arg(long, value_enum, default_value = "output")]
    pub tensor: TensorArg,
    /// No progress on stderr (a bar on a terminal, else a line every 10 s).
    #[arg(long)]
    pub quiet: bool,
}

fn write_outputs(common: &Common, csv: &str, svg: impl FnOnce() -> Result<String>) -> Result<()> {
    if let Some(path) = &common.csv {
        write_file_atomic(path, csv.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &common.plot {
        let s = svg()?;
        write_file_atomic(path, s.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The first module of `file`, or None after printing why not.
fn module(file: &Path) -> Option<crate::ir::Module> {
    match load_modules(file, false) {
        Ok(m) => m.into_iter().next().map(|m| m.module),
        Err(e) => {
            eprintln!("{e}");
            None
        }
    }
}

pub fn sweep(kind: SweepKind) -> Result<i32> {
    match kind {
        SweepKind::Tile(a) => tile(a),
        SweepKind::Layout(a) => layout(a),
        SweepKind::Target(a) => super::sweep_target::sweep_target(a),
    }
}

fn tile(a: TileArgs) -> Result<i32> {
    let c = &a.common;
    let t = target(&c.tpu, false)?;
    let cfg = config(&c.config)?;
    let Some(m) = module(&c.file) else {
        return Ok(1);
    };
    let compiled = match compile(&m, &cfg) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{}: error: {e}", c.file.display());
            return Ok(1);
        }
    };
    let desc = match find_kernel(&compiled.module, &a.kernel) {
        Ok((_, _, k)) => k.into_desc(),
        Err(e) => {
            eprintln!("{}: error: {e}", c.file.display());
            return Ok(1);
        }
    };
    let s = match sweep::tile_sweep(&desc, &t, &a.dim) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{}: error: {e}", c.file.display());
            return Ok(1);
        }
    };
    write_outputs(c, &s.to_csv(), || {
        plot::tile_svg(&s).map_err(anyhow::Error::from)
    })?;
    if c.json {
        outln!("{}", serde_json::to_string_pretty(&s)?)?;
        return Ok(0);
    }
    let list = |v: &[i64]| format!("{v:?}");
    outln!(
        "{}: kernel {} on {}: default tile {:?} ({:.3} us)",
        c.file.display(),
        s.kernel,
        s.target,
        s.default_tile,
        s.default_ns / 1e3
    )?;
    outln!(
        "  in tiles, as TpuGraphs records it: output_bounds {}, kernel_bounds {}, input_bounds {}",
        list(&s.default_config.output_bounds),
        list(&s.default_config.kernel_bounds),
        list(&s.default_config.input_bounds)
    )?;
    outln!(
        "{:<4} {:<12} {:>8} {:>8} {:>20} {:>12} {:>12} {:>10} {:>12}  bottleneck",
        "dim",
        "label",
        "extent",
        "tile",
        "bound (tiles)",
        "time_us",
        "hbm_bytes",
        "steps",
        "vmem_bytes"
    )?;
    for r in &s.rows {
        let mark = if r.is_default { "*" } else { " " };
        let bound = match &r.bound {
            Some((f, b)) => format!("{}={b}", f.replace("_bounds", "")),
            None => "-".into(),
        };
        match &r.estimate {
            Some(e) => outln!(
                "{:<4} {:<12} {:>8} {:>7}{mark} {:>20} {:>12.3} {:>12.4e} {:>10} {:>12}  {:?}",
                r.dim,
                s.labels[r.dim],
                s.extents[r.dim],
                r.tile,
                bound,
                e.total_ns / 1e3,
                e.hbm_bytes,
                e.steps,
                r.vmem_bytes,
                e.bottleneck
            )?,
            None => outln!(
                "{:<4} {:<12} {:>8} {:>7}{mark} {:>20} {:>12} {:>12} {:>10} {:>12}  does not fit VMEM",
                r.dim,
                s.labels[r.dim],
                s.extents[r.dim],
                r.tile,
                bound,
                "-",
                "-",
                "-",
                r.vmem_bytes
            )?,
        }
    }
    outln!("(* = the compiler's default tile)")?;
    Ok(0)
}

fn layout(a: LayoutArgs) -> Result<i32> {
    let c = &a.common;
    let t = target(&c.tpu, false)?;
    let cfg = config(&c.config)?;
    let Some(m) = module(&c.file) else {
        return Ok(1);
    };
    let tensor = match a.tensor {
        TensorArg::Output => Tensor::Output,
        TensorArg::Input => Tensor::Input,
        TensorArg::Kernel => Tensor::Kernel,
    };
    let pb = Progress::new(ProgressMode::for_stderr(a.quiet), 0, "layouts");
    // The number of layouts is known once the sweep has found the node's rank.
    let tick = |total: usize| {
        pb.set_length(total as u64);
        pb.inc(1);
    };
    let s = match sweep::layout_sweep(&m, &cfg, &a.node, tensor, &t, &tick) {
        Ok(s) => s,
        Err(e) => {
            pb.finish_and_clear();
            eprintln!("{}: error: {e}", c.file.display());
            return Ok(1);
        }
    };
    pb.finish_and_clear();
    write_outputs(c, &s.to_csv(), || {
        plot::layout_svg(&s).map_err(anyhow::Error::from)
    })?;
    if c.json {
        outln!("{}", serde_json::to_string_pretty(&s)?)?;
        return Ok(0);
    }
    outln!(
        "{}: {} {} {:?}, {} layout (input module: {}) on {}: {} layouts",
        c.file.display(),
        s.opcode,
        s.node,
        s.dims,
        s.tensor.name(),
        layout_text(&s.input_layout),
        s.target,
        s.rows.len()
    )?;
    outln!(
        "{:<18} {:>14} {:>12} {:>7} {:>8}",
        "layout",
        "program_ms",
        "vs_compiler",
        "copies",
        "kernels"
    )?;
    let b = s.baseline_ns();
    for r in &s.rows {
        outln!(
            "{:<18} {:>14.4} {:>11.3}x {:>7} {:>8}",
            layout_text(&r.layout),
            r.total_ns / 1e6,
            if b > 0.0 { r.total_ns / b } else { 0.0 },
            r.copies,
            r.kernels
        )?;
    }
    Ok(0)
}
