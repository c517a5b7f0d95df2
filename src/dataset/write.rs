//! Writing TpuGraphs `.npz` files with the shipped dtypes (spec §1.3–1.4): float32
//! features, uint8 opcodes, int64 edges / ids / splits / runtimes. Files are written to
//! a temporary name, checked against the schema that `tpusim inspect` reports (spec §7)
//! and only then renamed, so a reader never sees half a file or a file that breaks it.

use std::path::{Path, PathBuf};

use super::features::NODE_FEATURE_COUNT;
use super::graph::GraphEncoding;
use super::npz::{DType, NpzWriter, Result};

/// Number of tile config features.
pub const TILE_CONFIG_FEATURES: usize = 24;
/// Number of layout config features per configurable node.
pub const LAYOUT_CONFIG_FEATURES: usize = 18;

fn add_graph(w: &mut NpzWriter, g: &GraphEncoding) -> Result<()> {
    let n = g.node_opcode.len();
    w.add_slice("node_feat", &[n, NODE_FEATURE_COUNT], &g.node_feat)?;
    w.add_slice("node_opcode", &[n], &g.node_opcode)?;
    let edges: Vec<i64> = g.edge_index.iter().flat_map(|e| [e[0], e[1]]).collect();
    w.add_slice("edge_index", &[g.edge_index.len(), 2], &edges)?;
    Ok(())
}

/// A tile-collection file: one kernel graph, `c` tile configs (c × 24 features), their
/// runtimes and the default config's runtime as normaliser.
pub fn write_tile_npz(
    path: &Path,
    g: &GraphEncoding,
    config_feat: &[f32],
    config_runtime: &[i64],
    config_runtime_normalizers: &[i64],
) -> Result<PathBuf> {
    let c = config_runtime.len();
    let mut w = NpzWriter::create(path)?;
    add_graph(&mut w, g)?;
    w.add_slice("config_feat", &[c, TILE_CONFIG_FEATURES], config_feat)?;
    w.add_slice("config_runtime", &[c], config_runtime)?;
    w.add_slice(
        "config_runtime_normalizers",
        &[c],
        config_runtime_normalizers,
    )?;
    w.finish_valid()
}

/// A layout-collection file. `node_config_feat` is produced row by row (one config of
/// nc × 18 values per call) so that memory stays bounded for large collections.
pub fn write_layout_npz(
    path: &Path,
    g: &GraphEncoding,
    node_config_ids: &[i64],
    config_runtime: &[i64],
    mut config_row: impl FnMut(usize, &mut Vec<f32>),
) -> Result<PathBuf> {
    let c = config_runtime.len();
    let nc = node_config_ids.len();
    let mut w = NpzWriter::create(path)?;
    add_graph(&mut w, g)?;
    w.add_slice("node_config_ids", &[nc], node_config_ids)?;
    {
        let mut a = w.begin_array(
            "node_config_feat",
            DType::F32,
            &[c, nc, LAYOUT_CONFIG_FEATURES],
        )?;
        let mut row = Vec::with_capacity(nc * LAYOUT_CONFIG_FEATURES);
        for j in 0..c {
            row.clear();
            config_row(j, &mut row);
            a.write(&row)?;
        }
        a.finish()?;
    }
    w.add_slice("node_splits", &[1, g.node_splits.len()], &g.node_splits)?;
    w.add_slice("config_runtime", &[c], config_runtime)?;
    w.finish_valid()
}
