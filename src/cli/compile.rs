//! `tpusim compile`, `tpusim estimate` and `tpusim explain`.

use anyhow::Result;
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};

use super::input::load_modules;
use crate::hlo::print_module;
use crate::ir::Module;
use crate::kernels::{
    compile_program, explain_kernel, tile_overrides, CompiledProgram, ProgramError,
};
use crate::passes::{compile, CompilationConfig, CompiledModule, PreparedModule};
use crate::tpu::TpuTarget;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Emit {
    Hlo,
    Json,
}

#[derive(Args, Debug)]
pub struct CompileArgs {
    /// HLO module file.
    pub file: PathBuf,
    /// Compilation configuration (JSON or TOML): layouts, fusion, tiles.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// What to print: the compiled module as HLO text, or its kernels as JSON.
    #[arg(long, value_enum, default_value = "hlo")]
    pub emit: Emit,
}

#[derive(Args, Debug)]
pub struct EstimateArgs {
    /// HLO module file; with --runs, one or more TpuGraphs tuning files (.pb).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// TPU target: v2, v3, v4, v5e, v5p, v6e, or a JSON/TOML target file.
    #[arg(long, default_value = "v3")]
    pub tpu: String,
    /// Compilation configuration (JSON or TOML).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Include the ~0.1 ms host dispatch of wall-clock timings.
    #[arg(long)]
    pub host_dispatch: bool,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
    /// FILE is TpuGraphs tuning data (.pb): predict every run's runtime.
    #[arg(long)]
    pub runs: bool,
    /// With --runs: the CSV to write (ID,config_index,predicted_runtime_ns).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// With --runs: no progress on stderr (a bar on a terminal, else a line every 10 s).
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// HLO module file.
    pub file: PathBuf,
    /// Kernel (fusion or unfused instruction) name in the compiled module, as
    /// `tpusim estimate` or `tpusim list --kernels` lists them.
    #[arg(long)]
    pub kernel: String,
    /// TPU target: v2, v3, v4, v5e, v5p, v6e, or a JSON/TOML target file.
    #[arg(long, default_value = "v3")]
    pub tpu: String,
    /// Compilation configuration (JSON or TOML); its tile entry for the kernel, if any,
    /// is the tile explained.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The explanation as one JSON object (the same numbers as the text).
    #[arg(long)]
    pub json: bool,
}

/// A target preset name or a target file.
pub fn target(spec: &str, host_dispatch: bool) -> Result<TpuTarget> {
    // A path (anything that exists, or a name with a target file's extension) is a file.
    let is_file = Path::new(spec).exists() || spec.ends_with(".json") || spec.ends_with(".toml");
    let t = if is_file {
        TpuTarget::from_file(Path::new(spec))?
    } else {
        TpuTarget::preset(spec)?
    };
    Ok(t.with_host_dispatch(host_dispatch))
}

pub(super) fn config(path: &Option<PathBuf>) -> Result<CompilationConfig> {
    match path {
        Some(p) => {
            // The error names the file already.
            Ok(CompilationConfig::from_path(p)?)
        }
        None => Ok(CompilationConfig::default()),
    }
}

/// Load one module and compile it; errors are printed, `None` returned.
fn compiled(file: &Path, cfg: &Option<PathBuf>) -> Result<Option<CompiledModule>> {
    Ok(load_and_compile(file, cfg)?.map(|(_, _, c)| c))
}

/// Load one module and the configuration file `cfg`; errors are printed, `None`
/// returned.
fn load(file: &Path, cfg: &Option<PathBuf>) -> Result<Option<(Module, CompilationConfig)>> {
    let cfg = config(cfg)?;
    let mods = match load_modules(file, false) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return Ok(None);
        }
    };
    Ok(mods.into_iter().next().map(|m| (m.module, cfg)))
}

/// Load one module and compile it under the configuration file `cfg` into the output
/// module, to be printed: the input module, the configuration and the compiled module;
/// errors are printed, `None` returned.
pub(super) fn load_and_compile(
    file: &Path,
    cfg: &Option<PathBuf>,
) -> Result<Option<(Module, CompilationConfig, CompiledModule)>> {
    let Some((m, cfg)) = load(file, cfg)? else {
        return Ok(None);
    };
    let c = match compile(&m, &cfg) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{}: error: {e}", file.display());
            return Ok(None);
        }
    };
    // The structural self-check of the compiled module (debug builds run it inside
    // `compile`; release builds here).
    if let Err(e) = crate::passes::verify::verify(&c.module) {
        eprintln!(
            "{}: error: compiled module fails its self-check: {e}",
            file.display()
        );
        return Ok(None);
    }
    for n in &c.notes {
        eprintln!("note: {n}");
    }
    Ok(Some((m, cfg, c)))
}

/// Load one module and compile it under the configuration file `cfg` into the program
/// every cost is taken from ([`compile_program`]; no output module is built): the input
/// module, the configuration and the program; errors are printed, `None` returned.
pub(super) fn load_and_lower(
    file: &Path,
    cfg: &Option<PathBuf>,
) -> Result<Option<(Module, CompilationConfig, CompiledProgram)>> {
    let Some((m, cfg)) = load(file, cfg)? else {
        return Ok(None);
    };
    let c = match PreparedModule::new(&m)
        .map_err(ProgramError::from)
        .and_then(|p| compile_program(&p, &cfg))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{}: error: {e}", file.display());
            return Ok(None);
        }
    };
    for n in &c.notes {
        eprintln!("note: {n}");
    }
    Ok(Some((m, cfg, c)))
}

pub fn compile_cmd(a: CompileArgs) -> Result<i32> {
    let Some(c) = compiled(&a.file, &a.config)? else {
        return Ok(1);
    };
    match a.emit {
        Emit::Hlo => out!("{}", print_module(&c.module))?,
        Emit::Json => outln!("{}", c.kernels_json())?,
    }
    Ok(0)
}

pub fn estimate_cmd(a: EstimateArgs) -> Result<i32> {
    let t = target(&a.tpu, a.host_dispatch)?;
    if a.runs {
        let Some(out) = &a.out else {
            anyhow::bail!("--runs needs --out FILE.csv");
        };
        let progress = crate::progress::ProgressMode::for_stderr(a.quiet);
        let (rows, failed) = super::replay::replay(&a.files, &t, out, progress)?;
        outln!(
            "{rows} runs written to {} ({failed} could not be applied)",
            out.display()
        )?;
        return Ok(if rows > 0 && failed == rows { 1 } else { 0 });
    }
    let [file] = a.files.as_slice() else {
        anyhow::bail!("estimate takes one FILE (several only with --runs)");
    };
    let Some((_, _, c)) = load_and_lower(file, &a.config)? else {
        return Ok(1);
    };
    let e = match c.estimate(&t) {
        Ok(e) => e,
        Err(err) => {
            eprintln!("{}: error: {err}", file.display());
            return Ok(1);
        }
    };
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&e)?)?;
        return Ok(0);
    }
    outln!(
        "{}: {:.3} ms on {} ({} kernels)",
        file.display(),
        e.total_ns / 1e6,
        t.name,
        e.kernels.len()
    )?;
    outln!(
        "{:<28} {:<13} {:<18} {:>12} {:>12} {:>10} {:>10} {:>10} {:>10} {:>6}  bottleneck",
        "kernel",
        "kind",
        "hero",
        "flops",
        "bytes",
        "mxu_us",
        "vpu_us",
        "hbm_us",
        "total_us",
        "x"
    )?;
    for r in &e.kernels {
        outln!(
            "{:<28} {:<13} {:<18} {:>12.3e} {:>12.3e} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>6}  {:?}",
            r.name,
            r.kind,
            r.hero,
            r.flops,
            r.bytes,
            r.mxu_ns / 1e3,
            r.vpu_ns / 1e3,
            r.hbm_ns / 1e3,
            r.total_ns / 1e3,
            r.multiplier,
            r.bottleneck
        )?;
    }
    for w in &e.warnings {
        outln!("note: {w}")?;
    }
    Ok(0)
}

pub fn explain_cmd(a: ExplainArgs) -> Result<i32> {
    let t = target(&a.tpu, false)?;
    let Some(c) = compiled(&a.file, &a.config)? else {
        return Ok(1);
    };
    let tile = tile_overrides(&c.kernels).remove(&a.kernel);
    match explain_kernel(&c.module, &t, &a.kernel, tile.as_ref()) {
        Ok(x) if a.json => {
            outln!("{}", serde_json::to_string_pretty(&x)?)?;
            Ok(0)
        }
        Ok(x) => {
            out!("{x}")?;
            Ok(0)
        }
        Err(e) => {
            eprintln!("{}: error: {e}", a.file.display());
            Ok(1)
        }
    }
}
