//! A costable module rebuilt from a TpuGraphs npz file alone (`tpusim predict FILE.npz`).
//!
//! The public TpuGraphs release holds graphs as features (spec `tpugraphs_format.md`
//! §1–2): per node an opcode id and 140 features, and the edges `[user, operand]`. This
//! module turns them back into HLO text (one instruction per node, `n<K>` for node K,
//! `c<J>` for computation J), parses it with the text front end and pairs it with the
//! file's configurations as a [`ModuleTuning`], so that the analytical model costs every
//! configuration row exactly as it costs a raw `.pb` file ([`crate::dataset::replay::predict_runs`]).
//!
//! **Exact** (read from the features): opcode; element type (the 19 one-hot types);
//! dims up to rank 6 (a 7th from `_sum`/`_product`); the output layout
//! (`minor_to_major`, rank ≤ 6); `parameter_number`; the `dimensions` field (broadcast,
//! transpose, reduce, reverse, concatenate, sort, iota); windows (size, stride, padding,
//! dilations, reversal; ≤ 6 dims); convolution dimension numbers except the output's
//! spatial dims; feature and batch group counts; slice start/stride/limit and edge padding
//! of the first two dims; `dynamic_slice_sizes` (the output dims); `is_stable`; which
//! computation each node belongs to (a computation ends at its root, `is_root`); the
//! callee of every call edge (the edge to a computation's root); the configurations
//! (tile `config_feat`, layout `node_config_feat` and `node_config_ids`).
//!
//! **Inferred** (the features do not hold them; chosen so that shapes agree): operand
//! order (edges are sorted and de-duplicated: scalars last for reduce/pad/reduce-window,
//! the predicate first for select, convolution and dot operands in the order whose shapes
//! fit, call and fusion operands matched to the callee's parameters by shape, an operand
//! used twice repeated); dot dimension numbers (the batch/contracting/free split that
//! gives the output shape, preferring leading batch dims, the lhs's last and the rhs's
//! first free dim contracted); convolution output spatial dims (the remaining dims,
//! ascending); `get-tuple-element` indices (the first unused element of the same shape);
//! tuple element shapes (from the tuple's operands, the callee's root, or the
//! `get-tuple-element` users); slices and padding past the first two dims (from the
//! operand and output dims: start 0, stride 1; low 0, interior 0); gather and scatter
//! dimension numbers (the embedding-lookup form); fusion kind (`kLoop`: the cost model does
//! not read it); while body and condition (the condition's root is `pred[]`).
//!
//! **Approximated**: element types outside the one-hot list (f8, s4, ...) become f32;
//! constants hold no values (`{...}`: the model costs shapes, not values); layout tiles
//! (`T(8,128)`) are not features, so the compiler assigns them again, as it does for a
//! `.pb`; attributes no feature holds take XLA's defaults (comparison direction,
//! custom-call target, rng distribution, batch-norm epsilon and feature index = the last
//! dim). An instruction that still does not verify (its declared shape is not the one its
//! rebuilt operands and attributes give) is replaced by a stand-in `custom-call` of the
//! same shape and operands, listed in [`Rebuilt::stand_ins`].

#![allow(clippy::needless_range_loop)] // node-indexed tables, walked by node

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use super::config_feat::TILE_CONFIG_FEATURE_COUNT;
use super::features::{col, NODE_FEATURE_COUNT, PRIMITIVE_TYPE_FEATURES};
use super::npz::{NpyArray, NpzReader};
use super::opcodes::opcode_name;
use crate::ir::{Module, Opcode, PrimitiveType};
use crate::passes::LayoutEntry;
use crate::proto::{ModuleTuning, NodeLayout, Run, RunConfig};

/// Why a file cannot be rebuilt.
#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    #[error("{0}")]
    Npz(#[from] super::npz::NpzError),
    #[error("{file}: {msg}")]
    Data { file: String, msg: String },
    #[error("{file}: {source}")]
    Graph {
        file: String,
        #[source]
        source: Box<GraphError>,
    },
}

/// Why a graph's arrays do not make a module.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    #[error("the graph has no nodes")]
    NoNodes,
    #[error("node_feat holds {values} values for {nodes} nodes")]
    FeatureCount { values: usize, nodes: usize },
    #[error("the rebuilt module does not parse: {0}")]
    Parse(#[source] Box<crate::hlo::HloError>),
    #[error("the rebuilt module is not valid: {0}")]
    Check(#[source] crate::ir::check::CheckError),
    #[error("the rebuilt module does not verify: {0}")]
    Verify(#[source] Box<crate::analysis::error::VerifyError>),
    #[error("the rebuilt module does not verify after {0} stand-ins")]
    TooManyStandIns(usize),
}

/// Which collection a file is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collection {
    Tile,
    Layout,
}

/// A module rebuilt from an npz file, with its configurations.
#[derive(Debug)]
pub struct Rebuilt {
    pub collection: Collection,
    /// The rebuilt HLO text (after stand-ins).
    pub text: String,
    pub module: Module,
    /// The module and one run per configuration row, in row order (tile: the row's
    /// tile; layout: the row's layouts, nodes by `node_config_ids`).
    pub tuning: ModuleTuning,
    /// Nodes replaced by a stand-in custom-call: `(node index, why)`.
    pub stand_ins: Vec<(usize, String)>,
}

/// The arrays of a TpuGraphs graph.
#[derive(Debug, Clone, Default)]
pub struct GraphArrays {
    pub node_opcode: Vec<u8>,
    /// (n, 140), row-major.
    pub node_feat: Vec<f32>,
    /// `[user, operand]` rows.
    pub edge_index: Vec<[i64; 2]>,
}

fn data_err(file: &Path, msg: impl Into<String>) -> RebuildError {
    RebuildError::Data {
        file: file.display().to_string(),
        msg: msg.into(),
    }
}

fn ints(a: &NpyArray, file: &Path, name: &str) -> Result<Vec<i64>, RebuildError> {
    a.data().to_i64_vec().ok_or_else(|| {
        data_err(
            file,
            format!("{name} is {}, not integers", a.dtype().name()),
        )
    })
}

fn floats(a: &NpyArray, file: &Path, name: &str) -> Result<Vec<f32>, RebuildError> {
    if let Some(v) = a.as_slice::<f32>() {
        return Ok(v.to_vec());
    }
    if let Some(v) = a.as_slice::<f64>() {
        return Ok(v.iter().map(|&x| x as f32).collect());
    }
    Err(data_err(
        file,
        format!("{name} is {}, not floats", a.dtype().name()),
    ))
}

/// Rebuild the module of an npz file and pair it with its configuration rows.
pub fn rebuild_npz(path: &Path) -> Result<Rebuilt, RebuildError> {
    let mut r = NpzReader::open(path)?;
    let names = r.names();
    let has = |n: &str| names.iter().any(|x| x == n);
    for need in ["node_feat", "node_opcode", "edge_index"] {
        if !has(need) {
            return Err(data_err(path, format!("has no '{need}' array")));
        }
    }
    let feat = r.read("node_feat")?;
    if feat.shape().len() != 2 || feat.shape()[1] != NODE_FEATURE_COUNT {
        return Err(data_err(
            path,
            format!(
                "node_feat has shape {:?}; (n, {NODE_FEATURE_COUNT}) is expected",
                feat.shape()
            ),
        ));
    }
    let node_feat = floats(&feat, path, "node_feat")?;
    let n = feat.shape()[0];
    let ops = ints(&r.read("node_opcode")?, path, "node_opcode")?;
    if ops.len() != n {
        return Err(data_err(
            path,
            format!("node_opcode has {} entries for {n} nodes", ops.len()),
        ));
    }
    let node_opcode: Vec<u8> = ops.iter().map(|&o| u8::try_from(o).unwrap_or(0)).collect();
    let e = r.read("edge_index")?;
    let ev = ints(&e, path, "edge_index")?;
    if !(e.shape().len() == 2 && e.shape()[1] == 2 || ev.is_empty()) {
        return Err(data_err(
            path,
            format!("edge_index has shape {:?}; (m, 2) is expected", e.shape()),
        ));
    }
    let edge_index: Vec<[i64; 2]> = ev.chunks_exact(2).map(|c| [c[0], c[1]]).collect();
    for (i, &[u, v]) in edge_index.iter().enumerate() {
        if u < 0 || v < 0 || u as usize >= n || v as usize >= n {
            return Err(data_err(
                path,
                format!("edge_index[{i}] = [{u}, {v}] names a node outside 0..{n}"),
            ));
        }
    }
    let g = GraphArrays {
        node_opcode,
        node_feat,
        edge_index,
    };
    let label = path.display().to_string();
    let RebuiltModule {
        text,
        module,
        stand_ins,
        program_index,
    } = rebuild_module(&g, &label).map_err(|e| RebuildError::Graph {
        file: path.display().to_string(),
        source: Box::new(e),
    })?;

    let mut runs = Vec::new();
    let mut config_index_to_node = Vec::new();
    let collection;
    if has("config_feat") {
        collection = Collection::Tile;
        let cf = r.read("config_feat")?;
        let w = cf.shape().get(1).copied().unwrap_or(0);
        if cf.shape().len() != 2 || w != TILE_CONFIG_FEATURE_COUNT {
            return Err(data_err(
                path,
                format!(
                    "config_feat has shape {:?}; (c, 24) is expected",
                    cf.shape()
                ),
            ));
        }
        for row in floats(&cf, path, "config_feat")?.chunks_exact(w) {
            runs.push(Run {
                config: RunConfig::Tile(Some(tile_config_of_row(row))),
                error: false,
                is_default: runs.is_empty(),
                profile: None,
            });
        }
    } else if has("node_config_feat") && has("node_config_ids") {
        collection = Collection::Layout;
        let ids = ints(&r.read("node_config_ids")?, path, "node_config_ids")?;
        for (k, &id) in ids.iter().enumerate() {
            if id < 0 || id as usize >= n {
                return Err(data_err(
                    path,
                    format!("node_config_ids[{k}] = {id} is not a node (0..{n})"),
                ));
            }
        }
        let nf = r.read("node_config_feat")?;
        let s = nf.shape();
        if s.len() != 3 || s[1] != ids.len() || s[2] != 18 {
            return Err(data_err(
                path,
                format!(
                    "node_config_feat has shape {s:?}; (c, {}, 18) is expected",
                    ids.len()
                ),
            ));
        }
        let v = floats(&nf, path, "node_config_feat")?;
        for row in v.chunks_exact((ids.len() * 18).max(1)) {
            let nodes = row
                .chunks_exact(18)
                .map(|r| {
                    let e = LayoutEntry::from_tpugraphs_row(0, r);
                    NodeLayout::new(e.output, e.input, e.kernel)
                })
                .collect();
            runs.push(Run {
                config: RunConfig::Layout(crate::proto::LayoutConfig { nodes }),
                error: false,
                is_default: runs.is_empty(),
                profile: None,
            });
        }
        config_index_to_node = ids
            .iter()
            .map(|&i| program_index[i as usize] as u64)
            .collect();
    } else {
        return Err(data_err(
            path,
            "holds neither config_feat (tile) nor node_config_feat and node_config_ids (layout)",
        ));
    }
    let tuning = ModuleTuning {
        module: Some(crate::proto::module_to_proto(&module)),
        fingerprint: super::kernel_module::fnv1a(text.as_bytes()),
        runs,
        config_index_to_node,
    };
    Ok(Rebuilt {
        collection,
        text,
        module,
        tuning,
        stand_ins,
    })
}

/// A `FixedNumericSequenceFeatures<6>` block (6 values, sum, product) back to its list:
/// the leading non-zero values (tile extents are ≥ 1), and a 7th from the sum when the
/// list was longer.
fn bounds_of(block: &[f32]) -> Vec<i64> {
    let mut v: Vec<i64> = block[..6]
        .iter()
        .map(|&x| x as i64)
        .take_while(|&x| x > 0)
        .collect();
    if v.len() == 6 {
        let rest = (block[6] as i64).wrapping_sub(wsum(&v));
        if rest > 0 {
            v.push(rest);
        }
    }
    v
}

/// The tile configuration of one `config_feat` row (24 floats).
pub fn tile_config_of_row(row: &[f32]) -> crate::proto::TileConfig {
    crate::proto::TileConfig {
        kernel_bounds: bounds_of(&row[0..8]),
        output_bounds: bounds_of(&row[8..16]),
        input_bounds: bounds_of(&row[16..24]),
        iteration_bounds: Vec::new(),
    }
}

// ---------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Sh {
    Arr {
        ty: PrimitiveType,
        dims: Vec<i64>,
        m2m: Vec<i64>,
    },
    Tuple(Vec<Sh>),
    Token,
    /// A tuple of this many elements whose element shapes are not known yet.
    Open(usize),
}

impl Sh {
    fn scalar(ty: PrimitiveType) -> Sh {
        Sh::Arr {
            ty,
            dims: Vec::new(),
            m2m: Vec::new(),
        }
    }
    fn dims(&self) -> &[i64] {
        match self {
            Sh::Arr { dims, .. } => dims,
            _ => &[],
        }
    }
    fn ty(&self) -> Option<PrimitiveType> {
        match self {
            Sh::Arr { ty, .. } => Some(*ty),
            _ => None,
        }
    }
    fn rank(&self) -> usize {
        self.dims().len()
    }
    fn is_scalar(&self) -> bool {
        matches!(self, Sh::Arr { dims, .. } if dims.is_empty())
    }
    fn is_array(&self) -> bool {
        matches!(self, Sh::Arr { .. })
    }
    /// Same element type and dims (layouts aside); tuples element by element.
    fn same(&self, o: &Sh) -> bool {
        match (self, o) {
            (
                Sh::Arr { ty, dims, .. },
                Sh::Arr {
                    ty: t2, dims: d2, ..
                },
            ) => ty == t2 && dims == d2,
            (Sh::Tuple(a), Sh::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
            }
            (Sh::Token, Sh::Token) => true,
            _ => false,
        }
    }
    fn is_closed(&self) -> bool {
        match self {
            Sh::Open(_) => false,
            Sh::Tuple(v) => v.iter().all(Sh::is_closed),
            _ => true,
        }
    }
    /// Close open tuples with `f32[]` elements.
    fn closed(&self) -> Sh {
        match self {
            Sh::Open(k) => Sh::Tuple(vec![Sh::scalar(PrimitiveType::F32); *k]),
            Sh::Tuple(v) => Sh::Tuple(v.iter().map(Sh::closed).collect()),
            s => s.clone(),
        }
    }
    fn text(&self, out: &mut String) {
        match self {
            Sh::Arr { ty, dims, m2m } => {
                let d: Vec<String> = dims.iter().map(|x| x.to_string()).collect();
                let _ = write!(out, "{}[{}]", ty.name(), d.join(","));
                if !dims.is_empty() {
                    let l: Vec<String> = m2m.iter().map(|x| x.to_string()).collect();
                    let _ = write!(out, "{{{}}}", l.join(","));
                }
            }
            Sh::Tuple(v) => {
                out.push('(');
                for (i, s) in v.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    s.text(out);
                }
                out.push(')');
            }
            Sh::Token => out.push_str("token[]"),
            Sh::Open(k) => Sh::Open(*k).closed().text(out),
        }
    }
}

/// A sum that wraps like the featurizer's int64 arithmetic.
fn wsum(v: &[i64]) -> i64 {
    v.iter().fold(0i64, |a, &x| a.wrapping_add(x))
}

fn row_major(rank: usize) -> Vec<i64> {
    (0..rank as i64).rev().collect()
}

fn is_perm(v: &[i64], rank: usize) -> bool {
    let mut seen = vec![false; rank];
    v.len() == rank
        && v.iter().all(|&d| {
            d >= 0 && (d as usize) < rank && !std::mem::replace(&mut seen[d as usize], true)
        })
}

/// The leading values of a `_0.._5, _sum, _product` block: the non-zero prefix (and a
/// 7th value from the sum past six).
fn agg_list(f: &[f32], at: usize, keep_zero_upto: usize) -> Vec<i64> {
    let lead: Vec<i64> = f[at..at + 6].iter().map(|&x| x as i64).collect();
    let mut n = lead.iter().rposition(|&x| x != 0).map_or(0, |p| p + 1);
    n = n.max(keep_zero_upto.min(6));
    let mut v = lead[..n].to_vec();
    if n == 6 {
        let rest = (f[at + 6] as i64).wrapping_sub(wsum(&v));
        if rest > 0 {
            v.push(rest);
        }
    }
    v
}

/// The node's own shape from its features: an array, a token, or an open tuple.
fn own_shape(f: &[f32]) -> Sh {
    let onehot = &f[col::ELEMENT_TYPE..col::SHAPE_DIMS];
    let ty = onehot
        .iter()
        .position(|&x| x != 0.0)
        .map(|i| PRIMITIVE_TYPE_FEATURES[i])
        .unwrap_or(PrimitiveType::F32);
    match ty {
        // (at most 4096 elements: a larger count is not a real tuple)
        PrimitiveType::Tuple => {
            return Sh::Open((f[col::TUPLE_SHAPES_SIZE].max(0.0) as usize).min(4096))
        }
        PrimitiveType::Token => return Sh::Token,
        _ => {}
    }
    let ty = match ty {
        PrimitiveType::Invalid | PrimitiveType::OpaqueType => PrimitiveType::F32,
        t => t,
    };
    let lead: Vec<i64> = f[col::SHAPE_DIMS..col::SHAPE_DIMS + 6]
        .iter()
        .map(|&x| x as i64)
        .collect();
    let product = f[col::SHAPE_DIMS_PRODUCT] as i64;
    let sum = f[col::SHAPE_DIMS_SUM] as i64;
    let mut rank = lead.iter().rposition(|&x| x != 0).map_or(0, |p| p + 1);
    // A layout longer than the non-zero dims (a trailing zero-size dim).
    let m2m_all: Vec<i64> = f[col::LAYOUT_MINOR_TO_MAJOR..col::LAYOUT_MINOR_TO_MAJOR + 6]
        .iter()
        .map(|&x| x as i64)
        .collect();
    if product == 0 && rank < 6 {
        let lr = m2m_all.iter().copied().max().unwrap_or(0).saturating_add(1);
        rank = rank.max((lr as usize).min(6)).max(rank + 1).min(6);
    }
    let mut dims = lead[..rank].to_vec();
    if rank == 6 {
        let rest = sum.wrapping_sub(wsum(&dims));
        if rest > 0 {
            dims.push(rest);
        }
    }
    let rank = dims.len();
    let m2m = if rank <= 6 && is_perm(&m2m_all[..rank], rank) {
        m2m_all[..rank].to_vec()
    } else {
        row_major(rank)
    };
    Sh::Arr { ty, dims, m2m }
}

// ---------------------------------------------------------------------------
// The graph
// ---------------------------------------------------------------------------

struct Node<'a> {
    op: Option<Opcode>,
    f: &'a [f32],
    comp: usize,
    /// Operand nodes (distinct, node order) and callee computations.
    ops: Vec<usize>,
    callees: Vec<usize>,
    shape: Sh,
}

struct Comp {
    nodes: Vec<usize>,
    root: usize,
}

/// A module rebuilt from graph arrays.
#[derive(Debug)]
pub struct RebuiltModule {
    pub text: String,
    pub module: Module,
    /// Nodes replaced by a stand-in custom-call: `(node index, why)`.
    pub stand_ins: Vec<(usize, String)>,
    /// Node k's index in the module (computations in order, instructions in program
    /// order: what a configuration's `NodeRef::Index` names).
    pub program_index: Vec<usize>,
}

/// Rebuild HLO text and the parsed module from the arrays; `Err` with a message when the
/// arrays are not a graph at all.
pub fn rebuild_module(g: &GraphArrays, label: &str) -> Result<RebuiltModule, GraphError> {
    let n = g.node_opcode.len();
    if n == 0 {
        return Err(GraphError::NoNodes);
    }
    if g.node_feat.len() != n * NODE_FEATURE_COUNT {
        return Err(GraphError::FeatureCount {
            values: g.node_feat.len(),
            nodes: n,
        });
    }
    // Computations: a computation ends at its root.
    let mut comps: Vec<Comp> = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    let mut comp_of = vec![0usize; n];
    for k in 0..n {
        comp_of[k] = comps.len();
        cur.push(k);
        let is_root = g.node_feat[k * NODE_FEATURE_COUNT + col::IS_ROOT] != 0.0;
        if is_root || k == n - 1 {
            comps.push(Comp {
                nodes: std::mem::take(&mut cur),
                root: k,
            });
        }
    }
    let root_of: HashMap<usize, usize> =
        comps.iter().enumerate().map(|(c, x)| (x.root, c)).collect();
    let mut nodes: Vec<Node> = (0..n)
        .map(|k| {
            let f = &g.node_feat[k * NODE_FEATURE_COUNT..(k + 1) * NODE_FEATURE_COUNT];
            Node {
                op: opcode_name(g.node_opcode[k]).and_then(Opcode::from_name),
                f,
                comp: comp_of[k],
                ops: Vec::new(),
                callees: Vec::new(),
                shape: own_shape(f),
            }
        })
        .collect();
    let mut edges = g.edge_index.clone();
    edges.sort_unstable();
    edges.dedup();
    for &[u, v] in &edges {
        let (u, v) = (u as usize, v as usize);
        if u == v {
            continue;
        }
        if comp_of[u] == comp_of[v] {
            if v < u {
                nodes[u].ops.push(v);
            }
        } else if let Some(&c) = root_of.get(&v) {
            if c < comp_of[u] {
                nodes[u].callees.push(c);
            }
        }
    }

    // Parameters: renumbered 0.. within each computation by (parameter_number, node).
    let mut params: Vec<Vec<usize>> = vec![Vec::new(); comps.len()];
    for (c, comp) in comps.iter().enumerate() {
        let mut p: Vec<usize> = comp
            .nodes
            .iter()
            .copied()
            .filter(|&k| nodes[k].op == Some(Opcode::Parameter))
            .collect();
        p.sort_by_key(|&k| (nodes[k].f[col::PARAMETER_NUMBER] as i64, k));
        params[c] = p;
    }

    // Shapes of tuple-shaped nodes, and the operand order of every node (which depends
    // on shapes), to a fixed point.
    let mut order: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut gte_index: Vec<usize> = vec![0; n];
    for _round in 0..4 {
        let mut changed = false;
        for k in 0..n {
            let o = operand_order(&nodes, &params, k);
            if o != order[k] {
                order[k] = o;
                changed = true;
            }
            if !nodes[k].shape.is_closed() {
                if let Some(s) = tuple_shape(&nodes, &params, &order, &comps, k) {
                    if s != nodes[k].shape {
                        nodes[k].shape = s;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    // Open tuples left: elements from their get-tuple-element users, in node order.
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for k in 0..n {
        for &o in &order[k] {
            users[o].push(k);
        }
    }
    for k in 0..n {
        if let Sh::Open(size) = nodes[k].shape {
            let mut el: Vec<Sh> = users[k]
                .iter()
                .filter(|&&u| nodes[u].op == Some(Opcode::GetTupleElement))
                .take(size)
                .map(|&u| nodes[u].shape.closed())
                .collect();
            while el.len() < size {
                el.push(Sh::scalar(PrimitiveType::F32));
            }
            nodes[k].shape = Sh::Tuple(el);
        }
    }
    // get-tuple-element indices: the first unused element of the GTE's shape.
    let mut used: HashMap<usize, Vec<bool>> = HashMap::new();
    for k in 0..n {
        if nodes[k].op != Some(Opcode::GetTupleElement) {
            continue;
        }
        let Some(&t) = order[k].first() else { continue };
        let Sh::Tuple(el) = &nodes[t].shape else {
            continue;
        };
        let u = used.entry(t).or_insert_with(|| vec![false; el.len()]);
        let me = &nodes[k].shape;
        let pick = (0..el.len())
            .find(|&i| !u[i] && el[i].same(me))
            .or_else(|| (0..el.len()).find(|&i| el[i].same(me)))
            .unwrap_or(0);
        if pick < u.len() {
            u[pick] = true;
        }
        gte_index[k] = pick;
    }
    let shapes: Vec<Sh> = nodes.iter().map(|x| x.shape.closed()).collect();

    // Text, then stand-ins for what does not parse or verify.
    let mut stand_in: HashMap<usize, String> = HashMap::new();
    for _attempt in 0..(n + 2).min(4096) {
        let text = module_text(
            &nodes, &comps, &params, &order, &shapes, &gte_index, &stand_in,
        );
        let module = match crate::hlo::parse_module(label, &text) {
            Ok(m) => m,
            Err(e) => {
                let k = node_at_line(&text, e.line);
                match k {
                    Some(k) if !stand_in.contains_key(&k) => {
                        stand_in.insert(k, e.message.clone());
                        continue;
                    }
                    _ => return Err(GraphError::Parse(Box::new(e))),
                }
            }
        };
        match crate::analysis::verify::verify_module(&module) {
            Ok(()) => {
                crate::ir::check::check_module(&module).map_err(GraphError::Check)?;
                let mut v: Vec<(usize, String)> = stand_in.into_iter().collect();
                v.sort();
                let mut program_index = vec![0usize; n];
                let mut at = 0;
                for (c, comp) in comps.iter().enumerate() {
                    for k in program_order(comp, &params[c], &nodes) {
                        program_index[k] = at;
                        at += 1;
                    }
                }
                return Ok(RebuiltModule {
                    text,
                    module,
                    stand_ins: v,
                    program_index,
                });
            }
            Err(errs) => {
                let mut added = false;
                for e in &errs {
                    if let Some(k) = e.instruction.strip_prefix('n').and_then(|s| s.parse().ok()) {
                        if let std::collections::hash_map::Entry::Vacant(slot) = stand_in.entry(k) {
                            slot.insert(e.to_string());
                            added = true;
                        }
                    }
                }
                if !added {
                    return Err(match errs.into_iter().next() {
                        Some(first) => GraphError::Verify(Box::new(first)),
                        None => GraphError::TooManyStandIns(stand_in.len()),
                    });
                }
            }
        }
    }
    Err(GraphError::TooManyStandIns(stand_in.len()))
}

fn node_at_line(text: &str, line: usize) -> Option<usize> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let t = l.trim_start().trim_start_matches("ROOT ");
    let name = t.split(' ').next()?;
    name.strip_prefix("%n")?.parse().ok()
}

/// Operands of node `k` in slot order.
fn operand_order(nodes: &[Node], params: &[Vec<usize>], k: usize) -> Vec<usize> {
    let me = &nodes[k];
    let ops = &me.ops;
    let sh = |i: usize| &nodes[i].shape;
    let Some(op) = me.op else {
        return ops.clone();
    };
    use Opcode::*;
    let fill = |mut v: Vec<usize>, want: usize| -> Vec<usize> {
        if let Some(&last) = v.last() {
            while v.len() < want {
                v.push(last);
            }
        }
        v
    };
    // Arrays first, scalars last (reduce, pad, reduce-window, select-and-scatter).
    let arrays_then_scalars = || -> Vec<usize> {
        let mut a: Vec<usize> = ops
            .iter()
            .copied()
            .filter(|&o| !sh(o).is_scalar())
            .collect();
        a.extend(ops.iter().copied().filter(|&o| sh(o).is_scalar()));
        a
    };
    match op {
        Select => {
            let mut v: Vec<usize> = ops
                .iter()
                .copied()
                .filter(|&o| sh(o).ty() == Some(PrimitiveType::Pred))
                .take(1)
                .collect();
            let rest: Vec<usize> = ops.iter().copied().filter(|o| !v.contains(o)).collect();
            v.extend(rest);
            if v.len() == 2 {
                v.push(v[1]);
            }
            fill(v, 3)
        }
        Reduce | ReduceWindow => {
            let v = arrays_then_scalars();
            if v.len() == 1 {
                vec![v[0], v[0]]
            } else {
                v
            }
        }
        Pad => fill(arrays_then_scalars(), 2),
        SelectAndScatter => {
            // operand (the output's shape), source, init (scalar).
            let mut v = arrays_then_scalars();
            if v.len() >= 2 && !sh(v[0]).same(&me.shape) && sh(v[1]).same(&me.shape) {
                v.swap(0, 1);
            }
            fill(v, 3)
        }
        DynamicSlice | DynamicUpdateSlice => {
            let mut v: Vec<usize> = ops
                .iter()
                .copied()
                .filter(|&o| !sh(o).is_scalar())
                .collect();
            if op == DynamicUpdateSlice
                && v.len() >= 2
                && !sh(v[0]).same(&me.shape)
                && sh(v[1]).same(&me.shape)
            {
                v.swap(0, 1);
            }
            let rank = v.first().map(|&o| sh(o).rank()).unwrap_or(0);
            let idx: Vec<usize> = ops.iter().copied().filter(|&o| sh(o).is_scalar()).collect();
            let base = v.len();
            v.extend(idx.iter().copied());
            if let Some(&last) = idx.last() {
                while v.len() < base + rank {
                    v.push(last);
                }
            }
            v
        }
        Convolution => {
            let v = fill(ops.clone(), 2);
            if v.len() == 2
                && conv_fits(me, sh(v[1]), sh(v[0]))
                && !conv_fits(me, sh(v[0]), sh(v[1]))
            {
                vec![v[1], v[0]]
            } else {
                v
            }
        }
        Dot => {
            let v = fill(ops.clone(), 2);
            if v.len() == 2 {
                let a = dot_dims(sh(v[0]), sh(v[1]), &me.shape);
                let b = dot_dims(sh(v[1]), sh(v[0]), &me.shape);
                match (a, b) {
                    (None, Some(_)) => return vec![v[1], v[0]],
                    (Some(x), Some(y)) if y.penalty < x.penalty => return vec![v[1], v[0]],
                    _ => {}
                }
            }
            v
        }
        Gather => {
            // operand, then the integer indices.
            let mut v: Vec<usize> = ops
                .iter()
                .copied()
                .filter(|&o| !sh(o).ty().is_some_and(|t| t.is_integral()))
                .collect();
            let rest: Vec<usize> = ops.iter().copied().filter(|o| !v.contains(o)).collect();
            v.extend(rest);
            fill(v, 2)
        }
        Scatter => {
            // operand (the output's shape), indices (integers), updates.
            let mut v: Vec<usize> = Vec::new();
            if let Some(o) = ops.iter().copied().find(|&o| sh(o).same(&me.shape)) {
                v.push(o);
            }
            if let Some(o) = ops
                .iter()
                .copied()
                .find(|&o| !v.contains(&o) && sh(o).ty().is_some_and(|t| t.is_integral()))
            {
                v.push(o);
            }
            let rest: Vec<usize> = ops.iter().copied().filter(|o| !v.contains(o)).collect();
            v.extend(rest);
            fill(v, 3)
        }
        Call | Fusion | While | Conditional | Map | AsyncStart => {
            let callee_params: &[usize] = match op {
                While => &[],
                _ => me.callees.first().map(|&c| &params[c][..]).unwrap_or(&[]),
            };
            if op == While || callee_params.is_empty() {
                return fill(ops.clone(), op.arity().unwrap_or(0));
            }
            // Each callee parameter takes an unused operand of its shape (or a used one).
            let mut taken = vec![false; ops.len()];
            let mut v = Vec::with_capacity(callee_params.len());
            for &p in callee_params {
                let ps = sh(p);
                let pick = (0..ops.len())
                    .find(|&i| !taken[i] && sh(ops[i]).same(ps))
                    .or_else(|| (0..ops.len()).find(|&i| sh(ops[i]).same(ps)))
                    .or_else(|| (0..ops.len()).find(|&i| !taken[i]));
                if let Some(i) = pick {
                    taken[i] = true;
                    v.push(ops[i]);
                } else if let Some(&o) = ops.first() {
                    v.push(o);
                }
            }
            v
        }
        _ => match op.arity() {
            Some(a) => {
                let mut v = fill(ops.clone(), a);
                v.truncate(a);
                v
            }
            None => ops.clone(),
        },
    }
}

/// The shape of a tuple-shaped node once what it depends on is known.
fn tuple_shape(
    nodes: &[Node],
    params: &[Vec<usize>],
    order: &[Vec<usize>],
    comps: &[Comp],
    k: usize,
) -> Option<Sh> {
    let me = &nodes[k];
    let Sh::Open(size) = me.shape else {
        return None;
    };
    let closed = |s: &Sh| s.is_closed().then(|| s.clone());
    use Opcode::*;
    match me.op? {
        Tuple => {
            let ops = &order[k];
            let mut el: Vec<Sh> = ops
                .iter()
                .take(size)
                .map(|&o| nodes[o].shape.clone())
                .collect();
            if let Some(last) = el.last().cloned() {
                while el.len() < size {
                    el.push(last.clone());
                }
            }
            let t = Sh::Tuple(el);
            closed(&t)
        }
        Call | Fusion | Conditional | AsyncStart => {
            let c = *me.callees.first()?;
            closed(&nodes[comps[c].root].shape)
        }
        While => {
            let body = me
                .callees
                .iter()
                .copied()
                .find(|&c| !nodes[comps[c].root].shape.is_scalar())?;
            closed(&nodes[comps[body].root].shape)
        }
        GetTupleElement => {
            let t = *order[k].first()?;
            match &nodes[t].shape {
                Sh::Tuple(el) => el
                    .iter()
                    .find(|e| matches!(e, Sh::Tuple(v) if v.len() == size))
                    .cloned(),
                _ => None,
            }
        }
        Reduce => {
            // Variadic: the reducer's element types over the input's kept dims.
            let c = *me.callees.first()?;
            let Sh::Tuple(el) = &nodes[comps[c].root].shape else {
                return None;
            };
            let input = nodes.get(*order[k].first()?)?;
            let dims = increasing_prefix(&me.f[col::DIMENSIONS..col::DIMENSIONS + 6]);
            let kept: Vec<i64> = input
                .shape
                .dims()
                .iter()
                .enumerate()
                .filter(|(i, _)| !dims.contains(&(*i as i64)))
                .map(|(_, &d)| d)
                .collect();
            let t: Option<Vec<Sh>> = el
                .iter()
                .map(|e| {
                    Some(Sh::Arr {
                        ty: e.ty()?,
                        dims: kept.clone(),
                        m2m: row_major(kept.len()),
                    })
                })
                .collect();
            t.filter(|v| v.len() == size).map(Sh::Tuple)
        }
        Sort | AllReduce | AllToAll | OptimizationBarrier => {
            let el: Vec<Sh> = order[k].iter().map(|&o| nodes[o].shape.clone()).collect();
            (el.len() == size)
                .then_some(Sh::Tuple(el))
                .and_then(|t| closed(&t))
        }
        Parameter => {
            // From a caller: the operand this parameter takes.
            let c = me.comp;
            let slot = params[c].iter().position(|&p| p == k)?;
            for (u, un) in nodes.iter().enumerate() {
                if !un.callees.contains(&c) {
                    continue;
                }
                let o = match un.op? {
                    While => order[u].first().copied(),
                    _ => order[u].get(slot).copied(),
                };
                if let Some(o) = o {
                    if let Some(s) = closed(&nodes[o].shape) {
                        return Some(s);
                    }
                }
            }
            None
        }
        _ => None,
    }
}

/// The longest strictly increasing prefix of a 0-padded dimension list (`[1,0,0,..]` →
/// `[1]`, `[0,1,2,0,..]` → `[0,1,2]`).
fn increasing_prefix(f: &[f32]) -> Vec<i64> {
    let mut v: Vec<i64> = Vec::new();
    for &x in f {
        let x = x as i64;
        if v.last().is_some_and(|&l| x <= l) {
            break;
        }
        v.push(x);
    }
    v
}

fn conv_fits(me: &Node, input: &Sh, kernel: &Sh) -> bool {
    let f = me.f;
    let (i, kd, o) = (input.dims(), kernel.dims(), me.shape.dims());
    let at = |d: &[i64], c: usize| d.get(f[c] as usize).copied();
    let fgc = (f[col::FEATURE_GROUP_COUNT] as i64).max(1);
    at(i, col::CONV_INPUT_FEATURE)
        == at(kd, col::CONV_KERNEL_INPUT_FEATURE).map(|x| x.wrapping_mul(fgc))
        && at(kd, col::CONV_KERNEL_OUTPUT_FEATURE) == at(o, col::CONV_OUTPUT_FEATURE)
        && i.len() == kd.len()
}

#[derive(Debug, Clone)]
struct DotDims {
    lb: Vec<usize>,
    lc: Vec<usize>,
    rb: Vec<usize>,
    rc: Vec<usize>,
    penalty: usize,
}

/// Dot dimension numbers that give the output shape: every lhs and rhs dim labelled batch,
/// contracting or free, batch and contracting dims paired in order with equal sizes, the
/// output = batch ++ lhs free ++ rhs free. Among the fits, the least penalty: batch dims
/// leading, the lhs's last dims and the rhs's first free dims contracted.
fn dot_dims(l: &Sh, r: &Sh, out: &Sh) -> Option<DotDims> {
    let (ld, rd, od) = (l.dims(), r.dims(), out.dims());
    if ld.len() + rd.len() > 12 || !l.is_array() || !r.is_array() {
        return None;
    }
    let mut best: Option<DotDims> = None;
    // 0 = free, 1 = contracting, 2 = batch.
    let total = 3usize.pow((ld.len() + rd.len()) as u32);
    for code in 0..total {
        let mut c = code;
        let mut lab = |len: usize| -> Vec<u8> {
            (0..len)
                .map(|_| {
                    let x = (c % 3) as u8;
                    c /= 3;
                    x
                })
                .collect()
        };
        let ll = lab(ld.len());
        let rl = lab(rd.len());
        let pick =
            |lab: &[u8], x: u8| -> Vec<usize> { (0..lab.len()).filter(|&i| lab[i] == x).collect() };
        let (lb, lc, lf) = (pick(&ll, 2), pick(&ll, 1), pick(&ll, 0));
        let (rb, rc, rf) = (pick(&rl, 2), pick(&rl, 1), pick(&rl, 0));
        if lb.len() != rb.len() || lc.len() != rc.len() {
            continue;
        }
        if lb.iter().zip(&rb).any(|(&a, &b)| ld[a] != rd[b])
            || lc.iter().zip(&rc).any(|(&a, &b)| ld[a] != rd[b])
        {
            continue;
        }
        let o: Vec<i64> = lb
            .iter()
            .map(|&a| ld[a])
            .chain(lf.iter().map(|&a| ld[a]))
            .chain(rf.iter().map(|&a| rd[a]))
            .collect();
        if o != od {
            continue;
        }
        let nb = lb.len();
        let mut penalty = 0;
        penalty += lb
            .iter()
            .enumerate()
            .map(|(i, &a)| a.abs_diff(i))
            .sum::<usize>();
        penalty += rb
            .iter()
            .enumerate()
            .map(|(i, &a)| a.abs_diff(i))
            .sum::<usize>();
        penalty += lc
            .iter()
            .rev()
            .enumerate()
            .map(|(i, &a)| (ld.len() - 1 - i).abs_diff(a))
            .sum::<usize>();
        penalty += rc
            .iter()
            .enumerate()
            .map(|(i, &a)| (nb + i).abs_diff(a))
            .sum::<usize>();
        // Fewer batch dims, more contraction, on ties.
        penalty = penalty * 16 + nb;
        if best.as_ref().is_none_or(|b| penalty < b.penalty) {
            best = Some(DotDims {
                lb,
                lc,
                rb,
                rc,
                penalty,
            });
        }
    }
    best
}

fn list(v: impl IntoIterator<Item = i64>) -> String {
    let s: Vec<String> = v.into_iter().map(|x| x.to_string()).collect();
    format!("{{{}}}", s.join(","))
}

/// The `window={...}` attribute of a node with a window (`None`: no window dims).
fn window_attr(f: &[f32]) -> Option<String> {
    let size = agg_list(f, col::WINDOW_SIZE, 0);
    let nd = size.len();
    if nd == 0 {
        return None;
    }
    let get = |at: usize, default: i64| -> Vec<i64> {
        let mut v: Vec<i64> = f[at..at + 6].iter().map(|&x| x as i64).take(nd).collect();
        while v.len() < nd {
            v.push(default);
        }
        v.iter()
            .map(|&x| if x == 0 { default } else { x })
            .collect()
    };
    let stride = get(col::WINDOW_STRIDE, 1);
    let plo: Vec<i64> = f[col::WINDOW_PADDING_LOW..col::WINDOW_PADDING_LOW + 6]
        .iter()
        .map(|&x| x as i64)
        .chain(std::iter::repeat(0))
        .take(nd)
        .collect();
    let phi: Vec<i64> = f[col::WINDOW_PADDING_HIGH..col::WINDOW_PADDING_HIGH + 6]
        .iter()
        .map(|&x| x as i64)
        .chain(std::iter::repeat(0))
        .take(nd)
        .collect();
    let wd = get(col::WINDOW_DILATION, 1);
    let bd = get(col::WINDOW_BASE_DILATION, 1);
    let rev: Vec<i64> = f[col::WINDOW_REVERSAL..col::WINDOW_REVERSAL + 6]
        .iter()
        .map(|&x| x as i64)
        .chain(std::iter::repeat(0))
        .take(nd)
        .collect();
    let x = |v: &[i64]| {
        v.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("x")
    };
    let mut s = format!("window={{size={}", x(&size));
    if stride.iter().any(|&d| d != 1) {
        let _ = write!(s, " stride={}", x(&stride));
    }
    if plo.iter().chain(&phi).any(|&d| d != 0) {
        let p: Vec<String> = plo
            .iter()
            .zip(&phi)
            .map(|(a, b)| format!("{a}_{b}"))
            .collect();
        let _ = write!(s, " pad={}", p.join("x"));
    }
    if bd.iter().any(|&d| d != 1) {
        let _ = write!(s, " lhs_dilate={}", x(&bd));
    }
    if wd.iter().any(|&d| d != 1) {
        let _ = write!(s, " rhs_dilate={}", x(&wd));
    }
    if rev.iter().any(|&d| d != 0) {
        let _ = write!(s, " rhs_reversal={}", x(&rev));
    }
    s.push('}');
    Some(s)
}

/// `dim_labels=..._..->...` of a convolution.
fn dim_labels(f: &[f32], in_rank: usize, k_rank: usize, out_rank: usize) -> Option<String> {
    let nsp = agg_list(f, col::WINDOW_SIZE, 0).len();
    let at = |c: usize| f[c] as i64;
    let sp = |c: usize| -> Vec<i64> { (0..nsp).map(|i| f[c + i] as i64).collect() };
    let build = |rank: usize, a: (i64, char), b: (i64, char), spatial: &[i64]| -> Option<String> {
        let mut s = vec!['?'; rank];
        for (d, ch) in [a, b] {
            *s.get_mut(usize::try_from(d).ok()?)? = ch;
        }
        for (i, &d) in spatial.iter().enumerate() {
            let slot = s.get_mut(usize::try_from(d).ok()?)?;
            if *slot != '?' {
                return None;
            }
            *slot = char::from_digit(i as u32, 10)?;
        }
        (!s.contains(&'?')).then(|| s.into_iter().collect())
    };
    let input = build(
        in_rank,
        (at(col::CONV_INPUT_BATCH), 'b'),
        (at(col::CONV_INPUT_FEATURE), 'f'),
        &sp(col::CONV_INPUT_SPATIAL),
    )?;
    let kernel = build(
        k_rank,
        (at(col::CONV_KERNEL_INPUT_FEATURE), 'i'),
        (at(col::CONV_KERNEL_OUTPUT_FEATURE), 'o'),
        &sp(col::CONV_KERNEL_SPATIAL),
    )?;
    let (ob, of) = (at(col::CONV_OUTPUT_BATCH), at(col::CONV_OUTPUT_FEATURE));
    let osp: Vec<i64> = (0..out_rank as i64)
        .filter(|&d| d != ob && d != of)
        .collect();
    if osp.len() != nsp {
        return None;
    }
    let output = build(out_rank, (ob, 'b'), (of, 'f'), &osp)?;
    Some(format!("dim_labels={input}_{kernel}->{output}"))
}

/// The instructions of a computation in the rebuilt text: its parameters first, by
/// number (as XLA prints a computation), then the other nodes in node order.
fn program_order<'a>(
    comp: &'a Comp,
    params: &'a [usize],
    nodes: &'a [Node],
) -> impl Iterator<Item = usize> + 'a {
    params.iter().copied().chain(
        comp.nodes
            .iter()
            .copied()
            .filter(move |&k| nodes[k].op != Some(Opcode::Parameter)),
    )
}

#[allow(clippy::too_many_arguments)]
fn module_text(
    nodes: &[Node],
    comps: &[Comp],
    params: &[Vec<usize>],
    order: &[Vec<usize>],
    shapes: &[Sh],
    gte_index: &[usize],
    stand_in: &HashMap<usize, String>,
) -> String {
    let last = comps.len() - 1;
    // The entry's parameter and result layouts are the program's interface: XLA keeps
    // them (`entry_computation_layout`), so layout assignment must too.
    let mut t = String::from("HloModule rebuilt, entry_computation_layout={(");
    for (i, &p) in params[last].iter().enumerate() {
        if i > 0 {
            t.push_str(", ");
        }
        shapes[p].text(&mut t);
    }
    t.push_str(")->");
    shapes[comps[last].root].text(&mut t);
    t.push_str("}\n");
    for (c, comp) in comps.iter().enumerate() {
        t.push('\n');
        if c == last {
            t.push_str("ENTRY ");
        }
        let _ = writeln!(t, "%c{c} {{");
        for k in program_order(comp, &params[c], nodes) {
            t.push_str("  ");
            if k == comp.root {
                t.push_str("ROOT ");
            }
            let _ = write!(t, "%n{k} = ");
            shapes[k].text(&mut t);
            t.push(' ');
            instr_text(&mut t, nodes, params, order, shapes, gte_index, stand_in, k);
            t.push('\n');
        }
        t.push_str("}\n");
    }
    t
}

#[allow(clippy::too_many_arguments)]
fn instr_text(
    t: &mut String,
    nodes: &[Node],
    params: &[Vec<usize>],
    order: &[Vec<usize>],
    shapes: &[Sh],
    gte_index: &[usize],
    stand_in: &HashMap<usize, String>,
    k: usize,
) {
    use Opcode::*;
    let me = &nodes[k];
    let f = me.f;
    let ops = &order[k];
    let args = |v: &[usize]| -> String {
        v.iter()
            .map(|o| format!("%n{o}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let stand = |t: &mut String| {
        let _ = write!(
            t,
            "custom-call({}), custom_call_target=\"tpusim.rebuilt\"",
            args(&me.ops)
        );
    };
    let Some(op) = me.op else {
        stand(t);
        return;
    };
    if stand_in.contains_key(&k) {
        if op == Parameter {
            let slot = params[me.comp].iter().position(|&p| p == k).unwrap_or(0);
            let _ = write!(t, "parameter({slot})");
        } else {
            stand(t);
        }
        return;
    }
    let callee = |i: usize| me.callees.get(i).map(|c| format!("%c{c}"));
    let dims_field = || {
        let v: Vec<i64> = f[col::DIMENSIONS..col::DIMENSIONS + 6]
            .iter()
            .map(|&x| x as i64)
            .collect();
        v
    };
    let rank = shapes[k].rank();
    let op_rank = |i: usize| ops.get(i).map(|&o| shapes[o].rank()).unwrap_or(0);
    let op_dims = |i: usize| -> Vec<i64> {
        ops.get(i)
            .map(|&o| shapes[o].dims().to_vec())
            .unwrap_or_default()
    };
    // `dimensions` with as many entries as the op needs (0-padded in the features).
    let dims_n = |count: usize| list(dims_field().into_iter().take(count.min(6)));
    match op {
        Parameter => {
            let slot = params[me.comp].iter().position(|&p| p == k).unwrap_or(0);
            let _ = write!(t, "parameter({slot})");
        }
        Constant => {
            if shapes[k].is_scalar() {
                t.push_str("constant(0)");
            } else if shapes[k].is_array() {
                t.push_str("constant({...})");
            } else {
                stand(t);
            }
        }
        GetTupleElement => {
            let _ = write!(
                t,
                "get-tuple-element({}), index={}",
                args(ops),
                gte_index[k]
            );
        }
        Iota => {
            let _ = write!(t, "iota(), iota_dimension={}", dims_field()[0]);
        }
        Broadcast => {
            let _ = write!(
                t,
                "broadcast({}), dimensions={}",
                args(ops),
                dims_n(op_rank(0))
            );
        }
        Transpose => {
            let _ = write!(t, "transpose({}), dimensions={}", args(ops), dims_n(rank));
        }
        Reverse => {
            let d: Vec<i64> = dims_field()
                .into_iter()
                .take(rank.min(6))
                .enumerate()
                .take_while(|&(i, x)| i == 0 || x != 0)
                .map(|(_, x)| x)
                .collect();
            let _ = write!(t, "reverse({}), dimensions={}", args(ops), list(d));
        }
        Concatenate => {
            let _ = write!(
                t,
                "concatenate({}), dimensions={{{}}}",
                args(ops),
                dims_field()[0]
            );
        }
        Reduce => {
            let n_in = (ops.len() / 2).max(1);
            let removed = op_rank(0).saturating_sub(if shapes[k].is_array() {
                rank
            } else {
                match &shapes[k] {
                    Sh::Tuple(v) => v.first().map(Sh::rank).unwrap_or(0),
                    _ => 0,
                }
            });
            let _ = n_in;
            let _ = write!(
                t,
                "reduce({}), dimensions={}, to_apply={}",
                args(ops),
                dims_n(removed),
                callee(0).unwrap_or_default()
            );
        }
        ReduceWindow => {
            let _ = write!(
                t,
                "reduce-window({}), {}, to_apply={}",
                args(ops),
                window_attr(f).unwrap_or_else(|| "window={}".into()),
                callee(0).unwrap_or_default()
            );
        }
        SelectAndScatter => {
            // The select computation's root is pred[].
            let (mut sel, mut sca) = (me.callees.first(), me.callees.get(1));
            if let (Some(&a), Some(_)) = (sel, sca) {
                if nodes.iter().any(|x| {
                    x.comp == a
                        && x.f[col::IS_ROOT] != 0.0
                        && x.shape.ty() != Some(PrimitiveType::Pred)
                }) {
                    std::mem::swap(&mut sel, &mut sca);
                }
            }
            let _ = write!(
                t,
                "select-and-scatter({}), {}, select=%c{}, scatter=%c{}",
                args(ops),
                window_attr(f).unwrap_or_else(|| "window={}".into()),
                sel.copied().unwrap_or(0),
                sca.copied().unwrap_or(0)
            );
        }
        Convolution => {
            let labels = dim_labels(f, op_rank(0), op_rank(1), rank);
            let Some(labels) = labels else {
                stand(t);
                return;
            };
            let _ = write!(t, "convolution({})", args(ops));
            if let Some(w) = window_attr(f) {
                let _ = write!(t, ", {w}");
            }
            let _ = write!(t, ", {labels}");
            let fgc = f[col::FEATURE_GROUP_COUNT] as i64;
            let bgc = f[col::BATCH_GROUP_COUNT] as i64;
            if fgc > 1 {
                let _ = write!(t, ", feature_group_count={fgc}");
            }
            if bgc > 1 {
                let _ = write!(t, ", batch_group_count={bgc}");
            }
        }
        Dot => {
            let (Some(&a), Some(&b)) = (ops.first(), ops.get(1)) else {
                stand(t);
                return;
            };
            let Some(d) = dot_dims(&shapes[a], &shapes[b], &shapes[k]) else {
                stand(t);
                return;
            };
            let l = |v: &[usize]| list(v.iter().map(|&x| x as i64));
            let _ = write!(t, "dot({})", args(ops));
            if !d.lb.is_empty() {
                let _ = write!(
                    t,
                    ", lhs_batch_dims={}, rhs_batch_dims={}",
                    l(&d.lb),
                    l(&d.rb)
                );
            }
            let _ = write!(
                t,
                ", lhs_contracting_dims={}, rhs_contracting_dims={}",
                l(&d.lc),
                l(&d.rc)
            );
        }
        Slice => {
            let ind = op_dims(0);
            let out = shapes[k].dims().to_vec();
            let start = [f[col::SLICE_START] as i64, f[col::SLICE_START + 1] as i64];
            let stride = [f[col::SLICE_STRIDE] as i64, f[col::SLICE_STRIDE + 1] as i64];
            let limit = [f[col::SLICE_LIMIT] as i64, f[col::SLICE_LIMIT + 1] as i64];
            let parts: Vec<String> = (0..out.len())
                .map(|i| {
                    if i < 2 && limit[i] > 0 {
                        format!("[{}:{}:{}]", start[i], limit[i], stride[i].max(1))
                    } else {
                        let _ = &ind;
                        format!("[0:{}:1]", out[i])
                    }
                })
                .collect();
            let _ = write!(t, "slice({}), slice={{{}}}", args(ops), parts.join(", "));
        }
        Pad => {
            let ind = op_dims(0);
            let out = shapes[k].dims().to_vec();
            let lo = [f[col::PADDING_LOW] as i64, f[col::PADDING_LOW + 1] as i64];
            let hi = [f[col::PADDING_HIGH] as i64, f[col::PADDING_HIGH + 1] as i64];
            let parts: Vec<String> = (0..out.len())
                .map(|i| {
                    let d = ind.get(i).copied().unwrap_or(out[i]);
                    let (l, h) = if i < 2 {
                        (lo[i], hi[i])
                    } else {
                        (0, out[i].wrapping_sub(d))
                    };
                    let rest = out[i].wrapping_sub(l).wrapping_sub(h).wrapping_sub(d);
                    let interior = if d > 1 && rest > 0 && rest % (d - 1) == 0 {
                        rest / (d - 1)
                    } else {
                        0
                    };
                    if interior > 0 {
                        format!("{l}_{h}_{interior}")
                    } else {
                        format!("{l}_{}", out[i].wrapping_sub(l).wrapping_sub(d))
                    }
                })
                .collect();
            let _ = write!(t, "pad({}), padding={}", args(ops), parts.join("x"));
        }
        DynamicSlice => {
            let _ = write!(
                t,
                "dynamic-slice({}), dynamic_slice_sizes={}",
                args(ops),
                list(shapes[k].dims().iter().copied())
            );
        }
        Gather => {
            // The embedding-lookup form: the indices' last dim is the index vector (k
            // indices into the operand's leading dims, each collapsed), the other index
            // dims are batch dims, and the operand's other dims are offset dims.
            let od = op_dims(0);
            let id = op_dims(1);
            let out = shapes[k].dims().to_vec();
            let (ivd, nk, batch) = match id.last() {
                Some(&last)
                    if (last as usize) <= od.len()
                        && od.len() + id.len() == out.len() + last as usize + 1 =>
                {
                    (id.len() - 1, last as usize, id.len() - 1)
                }
                _ => (id.len(), 1usize.min(od.len()), id.len()),
            };
            let offset: Vec<i64> = (batch as i64..out.len() as i64).collect();
            let sizes: Vec<i64> = (0..od.len())
                .map(|i| {
                    if i < nk {
                        1
                    } else {
                        out.get(batch + i - nk).copied().unwrap_or(1)
                    }
                })
                .collect();
            let _ = write!(
                t,
                "gather({}), offset_dims={}, collapsed_slice_dims={}, start_index_map={}, index_vector_dim={}, slice_sizes={}",
                args(ops),
                list(offset),
                list(0..nk as i64),
                list(0..nk as i64),
                ivd,
                list(sizes)
            );
        }
        Scatter => {
            let od = op_dims(0);
            let id = op_dims(1);
            let ud = op_dims(2);
            let (ivd, nk, batch) = match id.last() {
                Some(&last)
                    if (last as usize) <= od.len()
                        && ud.len() + 1 + last as usize == id.len() + od.len() =>
                {
                    (id.len() - 1, last as usize, id.len() - 1)
                }
                _ => (id.len(), 1usize.min(od.len()), id.len()),
            };
            let _ = write!(
                t,
                "scatter({}), update_window_dims={}, inserted_window_dims={}, scatter_dims_to_operand_dims={}, index_vector_dim={}, to_apply={}",
                args(ops),
                list(batch as i64..ud.len() as i64),
                list(0..nk as i64),
                list(0..nk as i64),
                ivd,
                callee(0).unwrap_or_default()
            );
        }
        Compare => {
            let _ = write!(t, "compare({}), direction=LT", args(ops));
        }
        Fusion => {
            let _ = write!(
                t,
                "fusion({}), kind=kLoop, calls={}",
                args(ops),
                callee(0).unwrap_or_default()
            );
        }
        Call => {
            let _ = write!(
                t,
                "call({}), to_apply={}",
                args(ops),
                callee(0).unwrap_or_default()
            );
        }
        Map => {
            let _ = write!(
                t,
                "map({}), dimensions={}, to_apply={}",
                args(ops),
                list(0..rank as i64),
                callee(0).unwrap_or_default()
            );
        }
        While => {
            let (mut body, mut cond) = (me.callees.first().copied(), me.callees.get(1).copied());
            if let (Some(b), Some(_)) = (body, cond) {
                let root_is_pred = nodes
                    .iter()
                    .any(|x| x.comp == b && x.f[col::IS_ROOT] != 0.0 && x.shape.is_scalar());
                if root_is_pred {
                    std::mem::swap(&mut body, &mut cond);
                }
            }
            let (Some(b), Some(c)) = (body, cond) else {
                stand(t);
                return;
            };
            let _ = write!(t, "while({}), condition=%c{c}, body=%c{b}", args(ops));
        }
        Conditional => {
            let br: Vec<String> = me.callees.iter().map(|c| format!("%c{c}")).collect();
            let _ = write!(
                t,
                "conditional({}), branch_computations={{{}}}",
                args(ops),
                br.join(", ")
            );
        }
        Sort => {
            let _ = write!(
                t,
                "sort({}), dimensions={{{}}}, to_apply={}",
                args(ops),
                dims_field()[0],
                callee(0).unwrap_or_default()
            );
            if f[col::IS_STABLE] != 0.0 {
                t.push_str(", is_stable=true");
            }
        }
        AllReduce | ReduceScatter | AllReduceStart => {
            let _ = write!(
                t,
                "{}({}), to_apply={}",
                op.name(),
                args(ops),
                callee(0).unwrap_or_default()
            );
        }
        Rng => {
            let _ = write!(t, "rng({}), distribution=rng_uniform", args(ops));
        }
        ReducePrecision => {
            let _ = write!(
                t,
                "reduce-precision({}), exponent_bits=8, mantissa_bits=23",
                args(ops)
            );
        }
        BatchNormTraining | BatchNormInference | BatchNormGrad => {
            let fi = op_rank(0).saturating_sub(1);
            let _ = write!(
                t,
                "{}({}), epsilon=0.001, feature_index={fi}",
                op.name(),
                args(ops)
            );
        }
        CustomCall
        | Fft
        | TriangularSolve
        | Cholesky
        | Infeed
        | Outfeed
        | Send
        | Recv
        | SendDone
        | RecvDone
        | AllGather
        | AllToAll
        | CollectivePermute
        | AsyncStart
        | AsyncUpdate
        | AsyncDone
        | AllGatherStart
        | AllGatherDone
        | AllReduceDone
        | CollectivePermuteStart
        | CollectivePermuteDone
        | Domain
        | RngGetAndUpdateState
        | RngBitGenerator
        | GetDimensionSize
        | SetDimensionSize
        | DynamicReshape => {
            stand(t);
        }
        _ if op.arity().is_some() || op.is_elementwise() || !op.calls_computations() => {
            let _ = write!(t, "{}({})", op.name(), args(ops));
        }
        _ => stand(t),
    }
}
