//! Writing TpuGraphs `.npz` files with the shipped dtypes (spec §1.3–1.4): float32
//! features, uint8 opcodes, int64 edges / ids / splits / runtimes. Files are written to
//! a temporary name, checked against the schema that `tpusim inspect` reports (spec §7)
//! and only then renamed, so a reader never sees half a file or a file that breaks it.

use std::path::{Path, PathBuf};

use super::features::NODE_FEATURE_COUNT;
use super::graph::GraphEncoding;
use super::npz::{Compression, DType, NpzWriter, Result};

/// Number of tile config features.
pub const TILE_CONFIG_FEATURES: usize = 24;
/// Number of layout config features per configurable node.
pub const LAYOUT_CONFIG_FEATURES: usize = 18;

/// Fills one row of a streamed array (`row` index, values appended to the buffer).
pub type RowFn<'a> = Box<dyn FnMut(usize, &mut Vec<f32>) + 'a>;

/// The values of one array of a sample.
pub enum Values<'a> {
    F32(&'a [f32]),
    U8(&'a [u8]),
    I64(&'a [i64]),
    /// float32 produced row by row (`rows` calls, one row of `prod(shape[1..])` values
    /// each), so that a large array is never held whole on its way to a file.
    F32Rows(RowFn<'a>),
}

/// One array of a TpuGraphs sample: its npz member name (without `.npy`), shape and
/// values. [`tile_members`] and [`layout_members`] list a sample's arrays in file
/// order; the npz writer ([`write_members`]) and the in-memory samples of the Python
/// package read the same list, so both hold the same keys, dtypes, shapes and values.
pub struct Member<'a> {
    pub name: &'static str,
    pub shape: Vec<usize>,
    pub values: Values<'a>,
}

impl Member<'_> {
    fn new<'a>(name: &'static str, shape: Vec<usize>, values: Values<'a>) -> Member<'a> {
        Member {
            name,
            shape,
            values,
        }
    }

    /// The dtype of the member as written.
    pub fn dtype(&self) -> DType {
        match self.values {
            Values::F32(_) | Values::F32Rows(_) => DType::F32,
            Values::U8(_) => DType::U8,
            Values::I64(_) => DType::I64,
        }
    }
}

fn graph_members(g: &GraphEncoding) -> Vec<Member<'_>> {
    let n = g.node_opcode.len();
    vec![
        Member::new(
            "node_feat",
            vec![n, NODE_FEATURE_COUNT],
            Values::F32(&g.node_feat),
        ),
        Member::new("node_opcode", vec![n], Values::U8(&g.node_opcode)),
        Member::new(
            "edge_index",
            vec![g.edge_index.len(), 2],
            Values::I64(g.edge_index.as_flattened()),
        ),
    ]
}

/// The arrays of a tile-collection file: one kernel graph, `c` tile configs (c × 24
/// features), their runtimes and the default config's runtime as normaliser.
pub fn tile_members<'a>(
    g: &'a GraphEncoding,
    config_feat: &'a [f32],
    config_runtime: &'a [i64],
    config_runtime_normalizers: &'a [i64],
) -> Vec<Member<'a>> {
    let c = config_runtime.len();
    let mut m = graph_members(g);
    m.push(Member::new(
        "config_feat",
        vec![c, TILE_CONFIG_FEATURES],
        Values::F32(config_feat),
    ));
    m.push(Member::new(
        "config_runtime",
        vec![c],
        Values::I64(config_runtime),
    ));
    m.push(Member::new(
        "config_runtime_normalizers",
        vec![c],
        Values::I64(config_runtime_normalizers),
    ));
    m
}

/// The arrays of a layout-collection file. `node_config_feat` is produced row by row
/// (one config of nc × 18 values per call).
pub fn layout_members<'a>(
    g: &'a GraphEncoding,
    node_config_ids: &'a [i64],
    config_runtime: &'a [i64],
    config_row: impl FnMut(usize, &mut Vec<f32>) + 'a,
) -> Vec<Member<'a>> {
    let c = config_runtime.len();
    let mut m = layout_head(g, node_config_ids);
    m.push(Member::new(
        LAYOUT_ROWS,
        layout_rows_shape(c, node_config_ids.len()),
        Values::F32Rows(Box::new(config_row)),
    ));
    m.extend(layout_tail(&g.node_splits, config_runtime));
    m
}

/// The member of a layout-collection file that holds a row a configuration.
const LAYOUT_ROWS: &str = "node_config_feat";

/// The shape of `node_config_feat` for `configs` rows of `nc` configurable nodes.
fn layout_rows_shape(configs: usize, nc: usize) -> Vec<usize> {
    vec![configs, nc, LAYOUT_CONFIG_FEATURES]
}

/// The members of a layout-collection file before `node_config_feat`.
fn layout_head<'a>(g: &'a GraphEncoding, node_config_ids: &'a [i64]) -> Vec<Member<'a>> {
    let mut m = graph_members(g);
    m.push(Member::new(
        "node_config_ids",
        vec![node_config_ids.len()],
        Values::I64(node_config_ids),
    ));
    m
}

/// The members of a layout-collection file after `node_config_feat`.
fn layout_tail<'a>(node_splits: &'a [i64], config_runtime: &'a [i64]) -> Vec<Member<'a>> {
    vec![
        Member::new(
            "node_splits",
            vec![1, node_splits.len()],
            Values::I64(node_splits),
        ),
        Member::new(
            "config_runtime",
            vec![config_runtime.len()],
            Values::I64(config_runtime),
        ),
    ]
}

/// A layout-collection file written while its configurations are labelled: the
/// members of [`layout_members`], in its order, the rows of `node_config_feat` as the
/// configurations are drawn ([`LayoutFileStream::rows`]) and the runtimes once known
/// ([`LayoutFileStream::finish`]). The rows count is fixed when the file is begun; a
/// stream that gets fewer is not finished, and dropping it removes its temporary file.
pub struct LayoutFileStream {
    w: NpzWriter,
    /// The graph's `node_splits`, written after the rows.
    node_splits: Vec<i64>,
    configs: usize,
}

impl LayoutFileStream {
    /// Begins the file `path` of `configs` rows for graph `g`.
    pub fn begin(
        path: &Path,
        compression: Compression,
        g: &GraphEncoding,
        node_config_ids: &[i64],
        configs: usize,
    ) -> Result<Self> {
        let mut w = NpzWriter::create_with(path, compression)?;
        for m in layout_head(g, node_config_ids) {
            write_member(&mut w, m)?;
        }
        let shape = layout_rows_shape(configs, node_config_ids.len());
        w.begin_streamed(LAYOUT_ROWS, DType::F32, &shape)?;
        Ok(LayoutFileStream {
            w,
            node_splits: g.node_splits.clone(),
            configs,
        })
    }

    /// Appends rows of `node_config_feat` (whole rows, in order).
    pub fn rows(&mut self, values: &[f32]) -> Result<()> {
        self.w.write_streamed(values)
    }

    /// The rows count the file was begun with.
    pub fn configs(&self) -> usize {
        self.configs
    }

    /// Ends `node_config_feat`, writes the members after it with the runtimes and keeps
    /// the file (checked against the schema first, as [`write_members`] does).
    pub fn finish(mut self, config_runtime: &[i64]) -> Result<PathBuf> {
        self.w.end_streamed()?;
        for m in layout_tail(&self.node_splits, config_runtime) {
            write_member(&mut self.w, m)?;
        }
        self.w.finish_valid()
    }
}

/// Write `members` as the npz file `path` (checked against the schema before it is
/// renamed into place).
pub fn write_members(
    path: &Path,
    members: Vec<Member<'_>>,
    compression: Compression,
) -> Result<PathBuf> {
    let mut w = NpzWriter::create_with(path, compression)?;
    for m in members {
        write_member(&mut w, m)?;
    }
    w.finish_valid()
}

/// Write one member into `w`.
fn write_member(w: &mut NpzWriter, m: Member<'_>) -> Result<()> {
    match m.values {
        Values::F32(v) => w.add_slice(m.name, &m.shape, v),
        Values::U8(v) => w.add_slice(m.name, &m.shape, v),
        Values::I64(v) => w.add_slice(m.name, &m.shape, v),
        Values::F32Rows(mut rows) => {
            let count = m.shape.first().copied().unwrap_or(0);
            let per: usize = m.shape.iter().skip(1).product();
            let mut a = w.begin_array(m.name, DType::F32, &m.shape)?;
            let mut row = Vec::with_capacity(per);
            for j in 0..count {
                row.clear();
                rows(j, &mut row);
                a.write(&row)?;
            }
            a.finish()
        }
    }
}

/// A tile-collection file ([`tile_members`]).
pub fn write_tile_npz(
    path: &Path,
    g: &GraphEncoding,
    config_feat: &[f32],
    config_runtime: &[i64],
    config_runtime_normalizers: &[i64],
) -> Result<PathBuf> {
    write_members(
        path,
        tile_members(g, config_feat, config_runtime, config_runtime_normalizers),
        Compression::Stored,
    )
}

/// A layout-collection file ([`layout_members`]); memory stays bounded for large
/// collections.
pub fn write_layout_npz(
    path: &Path,
    g: &GraphEncoding,
    node_config_ids: &[i64],
    config_runtime: &[i64],
    config_row: impl FnMut(usize, &mut Vec<f32>),
) -> Result<PathBuf> {
    write_members(
        path,
        layout_members(g, node_config_ids, config_runtime, config_row),
        Compression::Stored,
    )
}
