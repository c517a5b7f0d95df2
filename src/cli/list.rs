//! `tpusim list`: a module's kernels and configurable nodes with their indices.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use super::compile::{config, target};
use super::input::load_modules;
use crate::dataset::listing::{list_module, KernelEntry, NodeEntry};

#[derive(Args, Debug)]
pub struct ListArgs {
    /// HLO module file (text or .pb).
    pub file: PathBuf,
    /// List the kernels of the compiled module (execution order; what `[[tile]]`
    /// entries, `explain --kernel` and `sweep tile --kernel` name). With neither
    /// --kernels nor --nodes, both are listed.
    #[arg(long)]
    pub kernels: bool,
    /// List the configurable nodes: convolution, dot, reshape (what `[[layout]]` entries
    /// and `sweep layout --node` name), in `generate layout`'s `node_config_ids` order,
    /// each with its TpuGraphs node index (`node = N` in a layout entry) and its
    /// `node_config_ids` value.
    #[arg(long)]
    pub nodes: bool,
    /// TPU target for the kernels' default tiles: v2, v3, v4, v5e, v5p, v6e, or a
    /// JSON/TOML target file.
    #[arg(long, default_value = "v3")]
    pub tpu: String,
    /// Compilation configuration (JSON or TOML) the kernels are compiled under (fusion
    /// and layouts decide the kernels; its tiles are listed).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print one JSON object (`module`, `kernels`, `nodes`) instead of tables.
    #[arg(long)]
    pub json: bool,
}

pub fn list(a: ListArgs) -> Result<i32> {
    let t = target(&a.tpu, false)?;
    let cfg = config(&a.config)?;
    let mods = match load_modules(&a.file, false) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return Ok(1);
        }
    };
    let Some(m) = mods.into_iter().next() else {
        return Ok(1);
    };
    let both = !a.kernels && !a.nodes;
    let l = match list_module(&m.module, &cfg, &t, a.kernels || both, a.nodes || both) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{}: error: {e}", a.file.display());
            return Ok(1);
        }
    };
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&l)?)?;
        return Ok(0);
    }
    if let Some(k) = &l.kernels {
        kernels_table(&a, k)?;
    }
    if let Some(n) = &l.nodes {
        if l.kernels.is_some() {
            outln!()?;
        }
        nodes_table(&a, n)?;
    }
    Ok(0)
}

fn dims(v: &[i64]) -> String {
    let s: Vec<String> = v.iter().map(|d| d.to_string()).collect();
    format!("[{}]", s.join(","))
}

fn kernels_table(a: &ListArgs, k: &[KernelEntry]) -> Result<()> {
    outln!(
        "{}: {} kernels (execution order; tiles on {})",
        a.file.display(),
        k.len(),
        a.tpu
    )?;
    outln!(
        "{:>5}  {:<28} {:<8} {:<18} {:<22} {:<18} {:<18} input_bounds",
        "index",
        "kernel",
        "kind",
        "hero",
        "iteration_space",
        "output_bounds",
        "kernel_bounds"
    )?;
    for e in k {
        let (o, kb, i) = match &e.tile {
            Some(t) => (
                dims(&t.output_bounds),
                dims(&t.kernel_bounds),
                dims(&t.input_bounds),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        outln!(
            "{:>5}  {:<28} {:<8} {:<18} {:<22} {:<18} {:<18} {}",
            e.index,
            e.name,
            e.kind.name(),
            e.hero,
            if e.iteration_space.is_empty() {
                "-".to_string()
            } else {
                dims(&e.iteration_space)
            },
            o,
            kb,
            i
        )?;
    }
    Ok(())
}

fn nodes_table(a: &ListArgs, n: &[NodeEntry]) -> Result<()> {
    outln!(
        "{}: {} configurable nodes (layout configuration order)",
        a.file.display(),
        n.len()
    )?;
    outln!(
        "{:>5}  {:>6}  {:>10}  {:<28} {:<14} {:>6} {:>6} {:>6}",
        "index",
        "node",
        "graph_node",
        "name",
        "opcode",
        "output",
        "input",
        "kernel"
    )?;
    for e in n {
        outln!(
            "{:>5}  {:>6}  {:>10}  {:<28} {:<14} {:>6} {:>6} {:>6}",
            e.index,
            e.node,
            e.graph_node.map_or("-".to_string(), |g| g.to_string()),
            e.name,
            e.opcode,
            e.ranks[0],
            e.ranks[1],
            e.ranks[2]
        )?;
    }
    outln!("(output/input/kernel: ranks of the output, operand 0 and operand 1; 0 = none)")?;
    Ok(())
}
