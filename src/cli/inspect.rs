//! `tpusim inspect`: summarise TpuGraphs files: `.npz` (ours or the real release's) and
//! raw `ModuleTuningData` / `TuningData` protobufs.

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
        let head = std::fs::read(f).map(|b| b.get(..4).map(|x| x.to_vec()).unwrap_or_default());
        let is_zip = matches!(head.as_deref(), Ok(b"PK\x03\x04") | Ok(b"PK\x05\x06"));
        if !is_zip {
            match std::fs::read(f)
                .map_err(anyhow::Error::from)
                .and_then(|b| crate::proto::inspect_bytes(&b).map_err(anyhow::Error::from))
            {
                Ok(s) => {
                    if a.json {
                        outln!("{}", serde_json::to_string(&s)?)?;
                    } else {
                        outln!("{s}")?;
                    }
                }
                Err(e) => {
                    failed += 1;
                    eprintln!("{}: error: {e}", f.display());
                }
            }
            continue;
        }
        match summarize_npz(f) {
            Ok(s) => {
                if a.json {
                    outln!("{}", serde_json::to_string(&s)?)?;
                } else {
                    outln!("{}", s)?;
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
