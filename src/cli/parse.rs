//! `tpusim parse` and `tpusim print`.

use anyhow::Result;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

use super::input::load_modules;
use crate::hlo::print_module;

#[derive(Args, Debug)]
pub struct ParseArgs {
    /// HLO module files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Treat lines that are exactly `// -----` as module separators.
    #[arg(long)]
    pub split_modules: bool,
    /// One JSON object per file instead of text lines.
    #[arg(long)]
    pub json: bool,
    /// Skip the shape verifier (by default its findings are printed as warnings;
    /// `tpusim verify` makes them errors).
    #[arg(long)]
    pub no_verify: bool,
}

#[derive(Args, Debug)]
pub struct PrintArgs {
    /// HLO module file.
    pub file: PathBuf,
    /// Treat lines that are exactly `// -----` as module separators.
    #[arg(long)]
    pub split_modules: bool,
}

pub fn parse(a: ParseArgs) -> Result<i32> {
    let mut failed = 0usize;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for f in &a.files {
        let file = f.display().to_string();
        match load_modules(f, a.split_modules) {
            Ok(mods) => {
                let mut warnings = 0usize;
                if !a.no_verify {
                    for m in &mods {
                        if let Err(errors) = crate::analysis::verify_module(&m.module) {
                            for e in errors {
                                warnings += 1;
                                eprintln!("{}: warning: {e}", m.label);
                            }
                        }
                    }
                }
                let comps: usize = mods.iter().map(|m| m.module.computations.len()).sum();
                let instrs: usize = mods.iter().map(|m| m.module.instruction_count()).sum();
                if a.json {
                    let v = serde_json::json!({"file": file, "ok": true, "modules": mods.len(),
                        "computations": comps, "instructions": instrs, "verifier_warnings": warnings});
                    writeln!(out, "{v}")?;
                } else if mods.len() > 1 {
                    writeln!(
                        out,
                        "ok {file} modules={} computations={comps} instructions={instrs}",
                        mods.len()
                    )?;
                } else {
                    writeln!(out, "ok {file} computations={comps} instructions={instrs}")?;
                }
            }
            Err(e) => {
                failed += 1;
                if a.json {
                    let v = serde_json::json!({"file": file, "ok": false, "error": e.to_string()});
                    writeln!(out, "{v}")?;
                } else {
                    writeln!(out, "error {file}")?;
                    eprintln!("{e}");
                }
            }
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}

pub fn print(a: PrintArgs) -> Result<i32> {
    let mods = match load_modules(&a.file, a.split_modules) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return Ok(1);
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for (i, m) in mods.iter().enumerate() {
        if i > 0 {
            writeln!(out, "// -----")?;
        }
        out.write_all(print_module(&m.module).as_bytes())?;
    }
    Ok(0)
}
