//! `tpusim compare --data ROOT --pred NAME=P.csv ... [--out report.html]`: predictors side
//! by side — the official metrics per collection and per graph, and an HTML report with
//! the plots ([`crate::eval::compare`]).

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

use crate::eval::compare::{compare, read_predictions};
use crate::proto::write_file_atomic;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Root of a TpuGraphs npz tree (the folder holding tile/ and layout/).
    #[arg(long)]
    pub data: PathBuf,
    /// Split whose runtimes are the truth (default: each ID's npz file in train, valid
    /// or test, the first that holds it).
    #[arg(long)]
    pub split: Option<String>,
    /// A predictor: NAME=FILE.csv with `ID,config_index,predicted_runtime_ns` rows (as
    /// `tpusim predict` writes them). Repeat for each predictor; the graphs compared are
    /// those every predictor has.
    #[arg(long = "pred", required = true)]
    pub preds: Vec<String>,
    /// Write the HTML report here (one self-contained page).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// JSON instead of the table (per collection and per graph).
    #[arg(long)]
    pub json: bool,
}

pub fn compare_cmd(a: CompareArgs) -> Result<i32> {
    let mut preds = Vec::new();
    for p in &a.preds {
        let (name, file) = p
            .split_once('=')
            .with_context(|| format!("--pred '{p}': expected NAME=FILE.csv"))?;
        if name.is_empty() {
            anyhow::bail!("--pred '{p}': the name is empty");
        }
        if preds.iter().any(|(n, _)| n == name) {
            anyhow::bail!("--pred: the name '{name}' is given twice");
        }
        preds.push((
            name.to_string(),
            read_predictions(std::path::Path::new(file))?,
        ));
    }
    let c = compare(&a.data, a.split.as_deref(), &preds)?;
    if let Some(out) = &a.out {
        let title = format!("Predictors on {}", a.data.display());
        write_file_atomic(out, c.to_html(&title).as_bytes())?;
    }
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&c)?)?;
    } else {
        out!("{}", c.to_text())?;
        if let Some(o) = &a.out {
            outln!("report written to {}", o.display())?;
        }
    }
    Ok(0)
}
