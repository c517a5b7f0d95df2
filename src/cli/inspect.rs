//! `tpusim inspect`: summarise TpuGraphs files (`.npz`, ours or the real release's).

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use crate::dataset::npz::summarize_npz;

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// TpuGraphs `.npz` files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// One JSON object per file.
    #[arg(long)]
    pub json: bool,
}

pub fn inspect(a: InspectArgs) -> Result<i32> {
    let mut failed = 0;
    for f in &a.files {
        match summarize_npz(f) {
            Ok(s) => {
                if a.json {
                    println!("{}", serde_json::to_string(&s)?);
                } else {
                    println!("{}", s);
                }
                if !s.is_valid() {
                    failed += 1;
                }
            }
            Err(e) => {
                failed += 1;
                eprintln!("error: {e}");
            }
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}
