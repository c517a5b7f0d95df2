//! `tpusim inspect`: summarise TpuGraphs files: `.npz` (ours or the real release's) and
//! raw `ModuleTuningData` / `TuningData` protobufs; a folder stands for every `.npz`
//! below it.

use anyhow::Result;
use clap::Args;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::dataset::manifest::tile_file_kernel;
use crate::dataset::npz::summarize_npz;

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// TpuGraphs `.npz` or `.pb` files, or folders (every `.npz` below them, e.g. a
    /// `generate --out` tree).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// One JSON object per file.
    #[arg(long)]
    pub json: bool,
}

/// Every `.npz` file below `dir`, sorted.
fn npz_below(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            npz_below(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "npz") {
            out.push(p);
        }
    }
    Ok(())
}

/// Whether `f` starts like a zip archive (an npz) rather than a protobuf.
fn is_zip(f: &Path) -> bool {
    let mut head = [0u8; 4];
    std::fs::File::open(f)
        .and_then(|mut h| h.read_exact(&mut head))
        .is_ok()
        && matches!(&head, b"PK\x03\x04" | b"PK\x05\x06")
}

pub fn inspect(a: InspectArgs) -> Result<i32> {
    let mut files = Vec::new();
    let mut from_dirs = false;
    for f in &a.files {
        if f.is_dir() {
            from_dirs = true;
            let before = files.len();
            npz_below(f, &mut files)?;
            if files.len() == before {
                anyhow::bail!("{}: no .npz file below this folder", f.display());
            }
        } else {
            files.push(f.clone());
        }
    }
    let mut failed = 0;
    let mut first = true;
    for f in &files {
        if !a.json && !first {
            outln!()?;
        }
        first = false;
        if !is_zip(f) {
            match crate::limits::read_module_bytes(f)
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
                let origin = tile_file_kernel(f);
                if a.json {
                    let mut v = serde_json::to_value(&s)?;
                    if let (Some(o), Some(obj)) = (&origin, v.as_object_mut()) {
                        obj.insert("origin".into(), serde_json::to_value(o)?);
                    }
                    outln!("{}", serde_json::to_string(&v)?)?;
                } else {
                    outln!("{}", s)?;
                    if let Some(o) = &origin {
                        outln!(
                            "origin:  kernel {} of module {} ({})",
                            o.kernel,
                            o.module,
                            o.manifest.display()
                        )?;
                    }
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
    if from_dirs && !a.json {
        outln!()?;
        outln!("{} files, {} with problems", files.len(), failed)?;
    }
    Ok(if failed > 0 { 1 } else { 0 })
}
