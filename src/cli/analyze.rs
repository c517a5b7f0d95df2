//! `tpusim verify` and `tpusim analyze`.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use super::input::load_modules;
use crate::analysis::{analyze_module, render_report, verify_module};

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// HLO module files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Treat lines that are exactly `// -----` as module separators.
    #[arg(long)]
    pub split_modules: bool,
}

#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    /// HLO module file.
    pub file: PathBuf,
    /// JSON output (keys flops, transcendentals, bytes_accessed, instructions).
    #[arg(long)]
    pub json: bool,
    /// How many instructions to list by flops and by bytes.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
}

/// Verify the modules of one file; prints problems as `FILE:LINE: error: ...`.
pub fn verify_file(file: &std::path::Path, split: bool) -> Result<bool> {
    let label = file.display().to_string();
    let mods = match load_modules(file, split) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return Ok(false);
        }
    };
    let mut ok = true;
    for m in &mods {
        if let Err(errors) = verify_module(&m.module) {
            ok = false;
            for e in errors {
                if e.line > 0 {
                    eprintln!("{}:{}: error: {e}", label, e.line);
                } else {
                    eprintln!("{}: error: {e}", m.label);
                }
            }
        }
    }
    Ok(ok)
}

pub fn verify(a: VerifyArgs) -> Result<i32> {
    let mut failed = 0;
    for f in &a.files {
        if verify_file(f, a.split_modules)? {
            outln!("ok {}", f.display())?;
        } else {
            outln!("error {}", f.display())?;
            failed += 1;
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}

pub fn analyze(a: AnalyzeArgs) -> Result<i32> {
    let mods = match load_modules(&a.file, false) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return Ok(1);
        }
    };
    for m in &mods {
        let r = analyze_module(&m.module);
        if a.json {
            outln!("{}", serde_json::to_string(&r)?)?;
        } else {
            out!("{}", render_report(&r, a.top))?;
        }
    }
    Ok(0)
}
