//! TpuGraphs graph encoding and node features on hand-made HLO modules (values from
//! spec `tpugraphs_format.md` §1.4–§2) and on the shared JAX corpus.

mod common;

use std::path::PathBuf;

use tpusim::dataset::features::{col, feature_index, NODE_FEATURE_COUNT};
use tpusim::dataset::graph::{
    encode_graph, encode_graph_with, EncodeOptions, GraphEncoding, GraphError, NodeOrder,
};
use tpusim::dataset::opcodes::{opcode_id, opcode_id_of};
use tpusim::hlo::parse_module;
use tpusim::ir::{CallRole, Module, Opcode};

fn parse(text: &str) -> Module {
    match parse_module("test.hlo", text) {
        Ok(m) => m,
        Err(e) => panic!("test module does not parse: {e}"),
    }
}

/// Node index of `comp`/`name`.
fn node(g: &GraphEncoding, m: &Module, comp: &str, name: &str) -> usize {
    g.node_by_name(m, comp, name)
        .unwrap_or_else(|| panic!("no node {comp}/{name}"))
}

/// Feature `name` of node `k`.
fn f(g: &GraphEncoding, k: usize, name: &str) -> f32 {
    let c = feature_index(name).unwrap_or_else(|| panic!("no feature {name}"));
    g.feature(k, c).unwrap_or_else(|| panic!("no node {k}"))
}

/// Features `prefix_0 .. prefix_{n-1}` of node `k`.
fn fs(g: &GraphEncoding, k: usize, prefix: &str, n: usize) -> Vec<f32> {
    (0..n).map(|i| f(g, k, &format!("{prefix}_{i}"))).collect()
}

const CONV: &str = r#"
HloModule conv_test

ENTRY main {
  x = f32[8,32,32,3]{3,2,1,0} parameter(0)
  w = f32[3,3,3,16]{3,2,1,0} parameter(1)
  c = f32[8,16,16,16]{3,2,1,0} convolution(x, w), window={size=3x3 stride=2x2 pad=0_1x1_0}, dim_labels=b01f_01io->b01f
  g = f32[8,16,16,16]{3,2,1,0} parameter(2)
  k = f32[3,3,1,16]{3,2,1,0} parameter(3)
  d = f32[8,16,16,16]{3,2,1,0} convolution(g, k), window={size=3x3 pad=2_2x1_1 rhs_dilate=2x1 rhs_reversal=1x0}, dim_labels=b01f_01io->b01f, feature_group_count=16
  ROOT s = f32[8,16,16,16]{3,2,1,0} add(c, d)
}
"#;

#[test]
fn convolution_window_and_dim_numbers() {
    let m = parse(CONV);
    let g = encode_graph(&m).unwrap();
    let c = node(&g, &m, "main", "c");
    assert_eq!(g.node_opcode[c], 26);
    // Window: size 3x3 stride 2x2 pad 0_1x1_0, dilations default to 1.
    assert_eq!(fs(&g, c, "window_size", 6), [3.0, 3.0, 0.0, 0.0, 0.0, 0.0]);
    assert_eq!(f(&g, c, "window_size_sum"), 6.0);
    assert_eq!(f(&g, c, "window_size_product"), 9.0);
    assert_eq!(fs(&g, c, "window_stride", 2), [2.0, 2.0]);
    assert_eq!(f(&g, c, "window_stride_sum"), 4.0);
    assert_eq!(f(&g, c, "window_stride_product"), 4.0);
    assert_eq!(fs(&g, c, "window_padding_low", 2), [0.0, 1.0]);
    assert_eq!(f(&g, c, "window_padding_low_sum"), 1.0);
    assert_eq!(f(&g, c, "window_padding_low_product"), 0.0);
    assert_eq!(fs(&g, c, "window_padding_high", 2), [1.0, 0.0]);
    assert_eq!(f(&g, c, "window_padding_high_sum"), 1.0);
    assert_eq!(fs(&g, c, "window_window_dilation", 3), [1.0, 1.0, 0.0]);
    assert_eq!(f(&g, c, "window_window_dilation_product"), 1.0);
    assert_eq!(f(&g, c, "window_base_dilation_sum"), 2.0);
    assert_eq!(f(&g, c, "window_window_reversal_true_count"), 0.0);
    assert_eq!(f(&g, c, "window_window_reversal_false_count"), 2.0);
    // dim_labels b01f_01io->b01f.
    assert_eq!(f(&g, c, "convolution_dim_numbers_input_batch_dim"), 0.0);
    assert_eq!(f(&g, c, "convolution_dim_numbers_input_feature_dim"), 3.0);
    assert_eq!(
        fs(&g, c, "convolution_dim_numbers_input_spatial_dims", 4),
        [1.0, 2.0, 0.0, 0.0]
    );
    assert_eq!(
        f(&g, c, "convolution_dim_numbers_kernel_input_feature_dim"),
        2.0
    );
    assert_eq!(
        f(&g, c, "convolution_dim_numbers_kernel_output_feature_dim"),
        3.0
    );
    assert_eq!(
        fs(&g, c, "convolution_dim_numbers_kernel_spatial_dims", 4),
        [0.0, 1.0, 0.0, 0.0]
    );
    assert_eq!(f(&g, c, "convolution_dim_numbers_output_batch_dim"), 0.0);
    assert_eq!(f(&g, c, "convolution_dim_numbers_output_feature_dim"), 3.0);
    // Group counts: XLA's proto holds 1 for a convolution without the attribute.
    assert_eq!(f(&g, c, "feature_group_count"), 1.0);
    assert_eq!(f(&g, c, "batch_group_count"), 1.0);
    // Output shape f32[8,16,16,16]{3,2,1,0}.
    assert_eq!(f(&g, c, "shape_element_type_is_f32"), 1.0);
    assert_eq!(
        fs(&g, c, "shape_dimensions", 6),
        [8.0, 16.0, 16.0, 16.0, 0.0, 0.0]
    );
    assert_eq!(f(&g, c, "shape_dimensions_sum"), 56.0);
    assert_eq!(f(&g, c, "shape_dimensions_product"), 32768.0);
    assert_eq!(
        fs(&g, c, "layout_minor_to_major", 6),
        [3.0, 2.0, 1.0, 0.0, 0.0, 0.0]
    );
    assert_eq!(f(&g, c, "is_root"), 0.0);

    let d = node(&g, &m, "main", "d");
    assert_eq!(f(&g, d, "feature_group_count"), 16.0);
    assert_eq!(fs(&g, d, "window_window_dilation", 2), [2.0, 1.0]);
    assert_eq!(f(&g, d, "window_window_dilation_product"), 2.0);
    assert_eq!(fs(&g, d, "window_window_reversal", 3), [1.0, 0.0, 0.0]);
    assert_eq!(f(&g, d, "window_window_reversal_true_count"), 1.0);
    assert_eq!(f(&g, d, "window_window_reversal_false_count"), 1.0);

    // Non-convolutions: group counts and conv dims are proto defaults (0), window
    // products of the empty list are 1.
    let s = node(&g, &m, "main", "s");
    assert_eq!(f(&g, s, "is_root"), 1.0);
    assert_eq!(f(&g, s, "feature_group_count"), 0.0);
    assert_eq!(f(&g, s, "batch_group_count"), 0.0);
    assert_eq!(f(&g, s, "convolution_dim_numbers_input_feature_dim"), 0.0);
    for p in ["window_size", "window_stride", "window_base_dilation"] {
        assert_eq!(f(&g, s, &format!("{p}_sum")), 0.0);
        assert_eq!(f(&g, s, &format!("{p}_product")), 1.0);
    }
    for p in [
        "slice_dims_start",
        "dynamic_slice_sizes",
        "padding_config_edge_padding_high",
    ] {
        assert_eq!(f(&g, s, &format!("{p}_product")), 1.0, "{p}");
    }
    let w = node(&g, &m, "main", "w");
    assert_eq!(g.node_opcode[w], 63);
    assert_eq!(f(&g, w, "parameter_number"), 1.0);
    assert_eq!(f(&g, node(&g, &m, "main", "k"), "parameter_number"), 3.0);
    assert_eq!(f(&g, node(&g, &m, "main", "x"), "parameter_number"), 0.0);
}

#[test]
fn minus_one_padding_only_touches_the_no_aggregate_lists() {
    let m = parse(CONV);
    let g0 = encode_graph(&m).unwrap();
    let g1 = encode_graph_with(
        &m,
        &EncodeOptions {
            pad_minus_one: true,
            ..Default::default()
        },
    )
    .unwrap();
    let no_agg: Vec<usize> = (31..37)
        .chain(95..99)
        .chain(101..105)
        .chain(134..140)
        .collect();
    for k in 0..g0.num_nodes() {
        let (r0, r1) = (g0.features(k).unwrap(), g1.features(k).unwrap());
        for c in 0..NODE_FEATURE_COUNT {
            if r0[c] != r1[c] {
                assert!(no_agg.contains(&c), "column {c} changed");
                assert_eq!((r0[c], r1[c]), (0.0, -1.0), "column {c}");
            }
        }
    }
    let c = node(&g1, &m, "main", "c");
    assert_eq!(
        fs(&g1, c, "convolution_dim_numbers_input_spatial_dims", 4),
        [1.0, 2.0, -1.0, -1.0]
    );
    assert_eq!(
        fs(&g1, c, "layout_minor_to_major", 6),
        [3.0, 2.0, 1.0, 0.0, -1.0, -1.0]
    );
    assert_eq!(fs(&g1, c, "dimensions", 6), [-1.0; 6]);
    // Scalar conv-dim fields keep the proto default 0.
    let s = node(&g1, &m, "main", "s");
    assert_eq!(f(&g1, s, "convolution_dim_numbers_input_batch_dim"), 0.0);
    assert_eq!(
        fs(&g1, s, "convolution_dim_numbers_kernel_spatial_dims", 4),
        [-1.0; 4]
    );
}

const MISC: &str = r#"
HloModule misc

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

fused_mul {
  p0 = f32[10,8]{1,0} parameter(0)
  ROOT m = f32[10,8]{1,0} multiply(p0, p0)
}

ENTRY main {
  p = f32[10,8]{1,0} parameter(0)
  q = f32[6,10,8]{2,1,0} parameter(1)
  i = s32[] parameter(2)
  z = f32[] constant(0)
  sl = f32[4,5]{1,0} slice(p), slice={[2:10:2], [1:6]}
  sl3 = f32[2,3,4]{2,1,0} slice(q), slice={[1:5:2], [0:6:2], [4:8]}
  r = f32[20,4]{0,1} reshape(p)
  red = f32[10]{0} reduce(p, z), dimensions={1}, to_apply=add_f32
  red2 = f32[10]{0} reduce(q, z), dimensions={0,2}, to_apply=add_f32
  pd = f32[22,11]{1,0} pad(p, z), padding=1_2_1x0_3
  ds = f32[2,8]{1,0} dynamic-slice(p, i, i), dynamic_slice_sizes={2,8}
  io = s32[4,5]{1,0} iota(), iota_dimension=1
  fu = f32[10,8]{1,0} fusion(p), kind=kLoop, calls=fused_mul
  sq = f32[10,8]{1,0} add(fu, fu)
  tr = f32[8,10]{0,1} transpose(sq), dimensions={1,0}
  srt = f32[10,8]{1,0} sort(p), dimensions={1}, is_stable=true, to_apply=lt
  ROOT t = (f32[4,5]{1,0}, f32[2,3,4]{2,1,0}, f32[20,4]{0,1}, f32[10]{0}, f32[10]{0}, f32[22,11]{1,0}, f32[2,8]{1,0}, s32[4,5]{1,0}, f32[8,10]{0,1}, f32[10,8]{1,0}) tuple(sl, sl3, r, red, red2, pd, ds, io, tr, srt)
}
"#;

/// MISC with a comparator for the sort (added before the entry).
fn misc() -> Module {
    let text = MISC.replace(
        "ENTRY main {",
        "lt {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT c = pred[] compare(x, y), direction=LT\n}\n\nENTRY main {",
    );
    parse(&text)
}

#[test]
fn slice_pad_dynamic_slice_and_iota() {
    let m = misc();
    let g = encode_graph(&m).unwrap();
    let sl = node(&g, &m, "main", "sl");
    assert_eq!(g.node_opcode[sl], 92);
    assert_eq!(fs(&g, sl, "slice_dims_start", 2), [2.0, 1.0]);
    assert_eq!(f(&g, sl, "slice_dims_start_sum"), 3.0);
    assert_eq!(f(&g, sl, "slice_dims_start_product"), 2.0);
    assert_eq!(fs(&g, sl, "slice_dims_stride", 2), [2.0, 1.0]);
    assert_eq!(f(&g, sl, "slice_dims_stride_product"), 2.0);
    assert_eq!(fs(&g, sl, "slice_dims_limit", 2), [10.0, 6.0]);
    assert_eq!(f(&g, sl, "slice_dims_limit_sum"), 16.0);
    assert_eq!(f(&g, sl, "slice_dims_limit_product"), 60.0);
    // Only two leading dims are kept, sum/product cover all three.
    let sl3 = node(&g, &m, "main", "sl3");
    assert_eq!(fs(&g, sl3, "slice_dims_start", 2), [1.0, 0.0]);
    assert_eq!(f(&g, sl3, "slice_dims_start_sum"), 5.0);
    assert_eq!(f(&g, sl3, "slice_dims_start_product"), 0.0);
    assert_eq!(f(&g, sl3, "slice_dims_stride_sum"), 5.0);
    assert_eq!(f(&g, sl3, "slice_dims_stride_product"), 4.0);
    assert_eq!(f(&g, sl3, "slice_dims_limit_sum"), 19.0);
    assert_eq!(f(&g, sl3, "slice_dims_limit_product"), 240.0);

    // padding=1_2_1x0_3: edge padding only, interior ignored.
    let pd = node(&g, &m, "main", "pd");
    assert_eq!(fs(&g, pd, "padding_config_edge_padding_low", 2), [1.0, 0.0]);
    assert_eq!(f(&g, pd, "padding_config_edge_padding_low_sum"), 1.0);
    assert_eq!(f(&g, pd, "padding_config_edge_padding_low_product"), 0.0);
    assert_eq!(
        fs(&g, pd, "padding_config_edge_padding_high", 2),
        [2.0, 3.0]
    );
    assert_eq!(f(&g, pd, "padding_config_edge_padding_high_sum"), 5.0);
    assert_eq!(f(&g, pd, "padding_config_edge_padding_high_product"), 6.0);

    let ds = node(&g, &m, "main", "ds");
    assert_eq!(g.node_opcode[ds], 35);
    assert_eq!(fs(&g, ds, "dynamic_slice_sizes", 2), [2.0, 8.0]);
    assert_eq!(f(&g, ds, "dynamic_slice_sizes_sum"), 10.0);
    assert_eq!(f(&g, ds, "dynamic_slice_sizes_product"), 16.0);

    // iota_dimension is stored in the proto's `dimensions`.
    let io = node(&g, &m, "main", "io");
    assert_eq!(fs(&g, io, "dimensions", 2), [1.0, 0.0]);
    assert_eq!(f(&g, io, "shape_element_type_is_s32"), 1.0);
}

#[test]
fn reshape_layout_reduce_dimensions_scalar_and_tuple() {
    let m = misc();
    let g = encode_graph(&m).unwrap();
    let r = node(&g, &m, "main", "r");
    assert_eq!(g.node_opcode[r], 75);
    assert_eq!(
        fs(&g, r, "layout_minor_to_major", 6),
        [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    );
    assert_eq!(fs(&g, r, "dimensions", 6), [0.0; 6]);

    let red = node(&g, &m, "main", "red");
    assert_eq!(g.node_opcode[red], 70);
    assert_eq!(fs(&g, red, "dimensions", 6), [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    let red2 = node(&g, &m, "main", "red2");
    assert_eq!(fs(&g, red2, "dimensions", 3), [0.0, 2.0, 0.0]);
    let tr = node(&g, &m, "main", "tr");
    assert_eq!(fs(&g, tr, "dimensions", 2), [1.0, 0.0]);
    assert_eq!(fs(&g, tr, "layout_minor_to_major", 2), [0.0, 1.0]);

    let srt = node(&g, &m, "main", "srt");
    assert_eq!(f(&g, srt, "is_stable"), 1.0);
    assert_eq!(fs(&g, srt, "dimensions", 2), [1.0, 0.0]);
    assert_eq!(f(&g, red, "is_stable"), 0.0);

    // Scalar: no dims, product 1, empty layout.
    let z = node(&g, &m, "main", "z");
    assert_eq!(g.node_opcode[z], 24);
    assert_eq!(fs(&g, z, "shape_dimensions", 6), [0.0; 6]);
    assert_eq!(f(&g, z, "shape_dimensions_sum"), 0.0);
    assert_eq!(f(&g, z, "shape_dimensions_product"), 1.0);
    assert_eq!(fs(&g, z, "layout_minor_to_major", 6), [0.0; 6]);
    assert_eq!(f(&g, z, "shape_tuple_shapes_size"), 0.0);

    // Tuple: tuple one-hot, 10 elements, no dims (product 1), no layout.
    let t = node(&g, &m, "main", "t");
    assert_eq!(g.node_opcode[t], 100);
    assert_eq!(f(&g, t, "shape_element_type_is_tuple"), 1.0);
    assert_eq!(f(&g, t, "shape_element_type_is_f32"), 0.0);
    assert_eq!(f(&g, t, "shape_tuple_shapes_size"), 10.0);
    assert_eq!(f(&g, t, "shape_dimensions_product"), 1.0);
    assert_eq!(f(&g, t, "is_root"), 1.0);
    // The one-hot block has exactly one 1 for known types.
    for k in 0..g.num_nodes() {
        let row = g.features(k).unwrap();
        let hot: f32 = row[col::ELEMENT_TYPE..col::SHAPE_DIMS].iter().sum();
        assert_eq!(hot, 1.0, "node {k}");
        assert_eq!(row[col::ELEMENT_SIZE_IN_BITS], 0.0);
    }
}

#[test]
fn is_root_on_every_computation_root_and_call_edges() {
    let m = misc();
    let g = encode_graph(&m).unwrap();
    let roots: Vec<usize> = (0..g.num_nodes())
        .filter(|&k| f(&g, k, "is_root") == 1.0)
        .collect();
    let expect = vec![
        node(&g, &m, "add_f32", "s"),
        node(&g, &m, "fused_mul", "m"),
        node(&g, &m, "lt", "c"),
        node(&g, &m, "main", "t"),
    ];
    let mut e = expect.clone();
    e.sort_unstable();
    assert_eq!(roots, e);
    let fm = node(&g, &m, "fused_mul", "m");
    assert_eq!(f(&g, fm, "is_root"), 1.0);

    // Fusion: edge to its operand and to the fused root; `add(fu, fu)` gives one edge.
    let fu = node(&g, &m, "main", "fu");
    let p = node(&g, &m, "main", "p");
    let out: Vec<i64> = g
        .edge_index
        .iter()
        .filter(|e| e[0] == fu as i64)
        .map(|e| e[1])
        .collect();
    let mut want = vec![p as i64, fm as i64];
    want.sort_unstable();
    assert_eq!(out, want);
    let sq = node(&g, &m, "main", "sq");
    assert_eq!(g.edge_index.iter().filter(|e| e[0] == sq as i64).count(), 1);
    // multiply(p0, p0) inside the fusion: one edge.
    assert_eq!(g.edge_index.iter().filter(|e| e[0] == fm as i64).count(), 1);
    // Reduce -> root of to_apply; sort -> comparator root.
    let red = node(&g, &m, "main", "red");
    let add_root = node(&g, &m, "add_f32", "s");
    assert!(g.edge_index.contains(&[red as i64, add_root as i64]));
    let srt = node(&g, &m, "main", "srt");
    assert!(g
        .edge_index
        .contains(&[srt as i64, node(&g, &m, "lt", "c") as i64]));
    check_invariants(&m, &g, "misc");
    // Callees before callers, entry last.
    assert_eq!(*g.comp_order.last().unwrap(), m.entry);
    assert_eq!(g.node_splits, vec![0, g.num_nodes() as i64]);
}

const WHILE: &str = r#"
HloModule loop

while_cond.1 {
  p = (s32[], f32[4]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}

while_body.2 {
  p = (s32[], f32[4]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4]{0} get-tuple-element(p), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x2 = f32[4]{0} multiply(x, x)
  ROOT t = (s32[], f32[4]{0}) tuple(i2, x2)
}

ENTRY main {
  x0 = f32[4]{0} parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[4]{0}) tuple(z, x0)
  w = (s32[], f32[4]{0}) while(init), condition=while_cond.1, body=while_body.2
  ROOT r = f32[4]{0} get-tuple-element(w), index=1
}
"#;

#[test]
fn while_node_splits() {
    let m = parse(WHILE);
    let g = encode_graph(&m).unwrap();
    let names: Vec<&str> = g
        .comp_order
        .iter()
        .map(|&c| m.comp(c).name.as_str())
        .collect();
    // Module order is kept: it already has callees first and the entry last.
    assert_eq!(names, ["while_cond.1", "while_body.2", "main"]);
    assert_eq!(g.num_nodes(), 4 + 7 + 5);
    // A split after each computation whose name contains "while"/"cond"/"cluster".
    assert_eq!(g.node_splits, vec![0, 4, 11, 16]);
    let w = node(&g, &m, "main", "w");
    assert_eq!(g.node_opcode[w], 102);
    let body_root = node(&g, &m, "while_body.2", "t") as i64;
    let cond_root = node(&g, &m, "while_cond.1", "lt") as i64;
    let init = node(&g, &m, "main", "init") as i64;
    let out: Vec<[i64; 2]> = g
        .edge_index
        .iter()
        .filter(|e| e[0] == w as i64)
        .copied()
        .collect();
    let mut want = vec![
        [w as i64, body_root],
        [w as i64, cond_root],
        [w as i64, init],
    ];
    want.sort_unstable();
    assert_eq!(out, want);
    // Inside the body, XLA's post order visits tuple(i2, x2) operand by operand.
    let body: Vec<String> = g
        .nodes
        .iter()
        .filter(|(c, _)| m.comp(*c).name == "while_body.2")
        .map(|&(c, id)| m.comp(c).instr(id).name.to_string())
        .collect();
    assert_eq!(body, ["p", "i", "one", "i2", "x", "x2", "t"]);
    check_invariants(&m, &g, "while");
}

/// The module with its computations permuted (`perm[new] = old`), call ids remapped.
fn permute(m: &Module, perm: &[usize]) -> Module {
    let mut inv = vec![0; perm.len()];
    for (new, &old) in perm.iter().enumerate() {
        inv[old] = new;
    }
    let mut comps = indexmap::IndexMap::new();
    for &old in perm {
        let (name, c) = m.computations.get_index(old).unwrap();
        let mut c = c.clone();
        for id in c.order.clone() {
            for call in c.instr_mut(id).attrs.called.iter_mut() {
                call.1 = inv[call.1];
            }
        }
        comps.insert(name.clone(), c);
    }
    Module {
        computations: comps,
        entry: inv[m.entry],
        ..m.clone()
    }
}

#[test]
fn callers_before_callees_are_reordered_like_xla() {
    // Entry first, then the condition, then the body.
    let m = permute(&parse(WHILE), &[2, 0, 1]);
    assert_eq!(m.comp(0).name, "main");
    let g = encode_graph(&m).unwrap();
    let names: Vec<&str> = g
        .comp_order
        .iter()
        .map(|&c| m.comp(c).name.as_str())
        .collect();
    // 2023 XLA's MakeComputationPostOrder: a while stores body before condition.
    assert_eq!(names, ["while_body.2", "while_cond.1", "main"]);
    assert_eq!(g.node_splits, vec![0, 7, 11, 16]);
    check_invariants(&m, &g, "permuted while");
    // Same features per instruction as the unpermuted module.
    let m0 = parse(WHILE);
    let g0 = encode_graph(&m0).unwrap();
    for comp in ["while_body.2", "while_cond.1", "main"] {
        for name in ["p", "i", "t", "lt", "w", "r"] {
            if let (Some(a), Some(b)) = (
                g.node_by_name(&m, comp, name),
                g0.node_by_name(&m0, comp, name),
            ) {
                assert_eq!(g.features(a), g0.features(b), "{comp}/{name}");
            }
        }
    }
}

#[test]
fn entry_defined_first_is_moved_last() {
    let text = r#"
HloModule entry_first

ENTRY main {
  a = f32[2]{0} parameter(0)
  ROOT n = f32[2]{0} negate(a)
}

unused_cluster_3 {
  b = f32[2]{0} parameter(0)
  ROOT e = f32[2]{0} exponential(b)
}
"#;
    let m = parse(text);
    for order in [NodeOrder::XlaPostOrder, NodeOrder::Program] {
        let g = encode_graph_with(
            &m,
            &EncodeOptions {
                order,
                ..Default::default()
            },
        )
        .unwrap();
        let names: Vec<&str> = g
            .comp_order
            .iter()
            .map(|&c| m.comp(c).name.as_str())
            .collect();
        assert_eq!(names, ["unused_cluster_3", "main"]);
        assert_eq!(g.node_splits, vec![0, 2, 4]);
        assert_eq!(f(&g, 1, "is_root"), 1.0);
        assert_eq!(f(&g, 3, "is_root"), 1.0);
        assert_eq!(g.node_opcode, vec![63, 37, 63, 60]);
        assert_eq!(g.edge_index, vec![[1, 0], [3, 2]]);
    }
}

#[test]
fn xla_instruction_post_order_differs_from_program_order() {
    let text = r#"
HloModule post

ENTRY main {
  a = f32[2]{0} parameter(0)
  b = f32[2]{0} parameter(1)
  unused = f32[2]{0} parameter(2)
  x = f32[2]{0} add(b, b)
  y = f32[2]{0} multiply(a, a)
  ROOT t = (f32[2]{0}, f32[2]{0}) tuple(y, x)
}
"#;
    let m = parse(text);
    let order_of = |g: &GraphEncoding| -> Vec<String> {
        g.nodes
            .iter()
            .map(|&(c, id)| m.comp(c).instr(id).name.to_string())
            .collect()
    };
    let gx = encode_graph(&m).unwrap();
    assert_eq!(order_of(&gx), ["unused", "a", "y", "b", "x", "t"]);
    let gp = encode_graph_with(
        &m,
        &EncodeOptions {
            order: NodeOrder::Program,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(order_of(&gp), ["a", "b", "unused", "x", "y", "t"]);
    // Same edges up to renumbering: [x,b] [y,a] [t,x] [t,y].
    assert_eq!(gx.edge_index, vec![[2, 1], [4, 3], [5, 2], [5, 4]]);
    assert_eq!(gp.edge_index, vec![[3, 1], [4, 0], [5, 3], [5, 4]]);
    check_invariants(&m, &gx, "post");
    check_invariants(&m, &gp, "post/program");
}

#[test]
fn async_sugar_and_new_opcodes() {
    let text = r#"
HloModule asyncs

ENTRY main {
  a = f32[8]{0} parameter(0)
  e = f32[8]{0} erf(a)
  s = f32[8]{0} all-reduce-start(e), replica_groups={}, to_apply=add_f32
  ROOT d = f32[8]{0} all-reduce-done(s)
}
"#
    .replace(
        "ENTRY main {",
        "add_f32 {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\nENTRY main {",
    );
    let m = parse(&text);
    let g = encode_graph(&m).unwrap();
    assert_eq!(
        g.node_opcode[node(&g, &m, "main", "e")],
        0,
        "erf is newer than the table"
    );
    assert_eq!(g.node_opcode[node(&g, &m, "main", "s")], 109);
    assert_eq!(g.node_opcode[node(&g, &m, "main", "d")], 110);
    // Sugar maps to the async-* ids XLA writes into the proto.
    let mut i = m.entry().instr(m.entry().root).clone();
    i.opcode = Opcode::AsyncDone;
    i.async_wrapped = Some(Opcode::Fusion);
    assert_eq!(opcode_id(&i), 117);
    i.opcode = Opcode::AsyncStart;
    assert_eq!(opcode_id(&i), 115);
}

#[test]
fn malformed_ir_gives_errors_not_panics() {
    let mut m = misc();
    let fu_comp = m.entry;
    let fu = m.comp(fu_comp).find("fu").unwrap();
    m.computations[fu_comp].instr_mut(fu).attrs.called[0].1 = 99;
    match encode_graph(&m) {
        Err(GraphError::DanglingCallee { callee: 99, .. }) => {}
        other => panic!("expected DanglingCallee, got {other:?}"),
    }
    // A computation that calls itself.
    let mut m = misc();
    let add = m.comp_id("add_f32").unwrap();
    let s = m.comp(add).find("s").unwrap();
    m.computations[add]
        .instr_mut(s)
        .attrs
        .called
        .push((CallRole::ToApply, add));
    let e = encode_graph(&m).unwrap_err();
    assert!(
        matches!(e, GraphError::CallCycle(ref n) if n == "add_f32"),
        "{e}"
    );
    assert!(e.to_string().contains("add_f32"));
}

/// Structural invariants of an encoding (spec §1.3–§1.5).
fn check_invariants(m: &Module, g: &GraphEncoding, what: &str) {
    let n = g.num_nodes();
    assert_eq!(n, m.instruction_count(), "{what}: one node per instruction");
    assert_eq!(g.node_feat.len(), n * NODE_FEATURE_COUNT, "{what}");
    assert_eq!(g.nodes.len(), n, "{what}");
    for (k, &(c, id)) in g.nodes.iter().enumerate() {
        assert_eq!(g.node_of(c, id), Some(k), "{what}: node_of");
        let instr = m.comp(c).instr(id);
        assert_eq!(g.node_opcode[k], opcode_id(instr), "{what}");
        if opcode_id_of(instr.opcode) != 0 {
            assert_ne!(g.node_opcode[k], 0, "{what}: {}", instr.name);
        }
    }
    for w in g.edge_index.windows(2) {
        assert!(w[0] < w[1], "{what}: edges sorted and unique: {:?}", w);
    }
    for e in &g.edge_index {
        assert!(
            e[0] > e[1] && e[1] >= 0 && (e[0] as usize) < n,
            "{what}: edge {e:?}"
        );
    }
    assert_eq!(g.node_splits.first(), Some(&0), "{what}");
    if n > 0 {
        assert_eq!(g.node_splits.last(), Some(&(n as i64)), "{what}");
    }
    for w in g.node_splits.windows(2) {
        assert!(w[0] < w[1], "{what}: splits increase");
    }
    // Every computation is contiguous, callees before callers.
    let mut seen = vec![false; m.computations.len()];
    for w in g.nodes.windows(2) {
        if w[0].0 != w[1].0 {
            assert!(!seen[w[1].0], "{what}: computation split");
            seen[w[0].0] = true;
        }
    }
    assert!(g.node_feat.iter().all(|v| v.is_finite()), "{what}: finite");
}

#[test]
fn jax_corpus_encodes_with_valid_invariants() {
    let Some(shared) = common::shared("jax_corpus_encodes_with_valid_invariants") else {
        return;
    };
    let dir = shared.join("hlo_corpus/jax");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "hlo"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 20,
        "expected the JAX corpus, found {}",
        files.len()
    );
    let mut total_nodes = 0;
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(path).unwrap();
        let m = parse_module(&name, &text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let g = encode_graph(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_invariants(&m, &g, &name);
        total_nodes += g.num_nodes();
        let gp = encode_graph_with(
            &m,
            &EncodeOptions {
                order: NodeOrder::Program,
                ..Default::default()
            },
        )
        .unwrap();
        check_invariants(&m, &gp, &name);
        assert_eq!(g.edge_index.len(), gp.edge_index.len(), "{name}");
        if !m.attrs.is_scheduled {
            // XLA prints unscheduled modules in the order it serialises them.
            assert_eq!(g.nodes, gp.nodes, "{name}: text order is XLA's post order");
        }
        let roots = (0..g.num_nodes())
            .filter(|&k| g.feature(k, col::IS_ROOT) == Some(1.0))
            .count();
        assert_eq!(
            roots,
            m.computations.len(),
            "{name}: one root per computation"
        );
    }
    eprintln!("encoded {} files, {total_nodes} nodes", files.len());
}

/// Pure-Python port of the official extractor (`hlo_encoder.cc::EncodeHloModule` +
/// `featurizers.h::FeaturizeHloInstruction`, FEATURE_OP_NON_ZERO) that reads the fields
/// of a serialized `xla.HloModuleProto` directly. Used to check our encoding of the text
/// module against XLA's own proto of the same module.
const REFERENCE_ENCODER_PY: &str = r#"# Reference TpuGraphs encoder over a serialized xla.HloModuleProto (pure Python):
# hlo_encoder.cc::EncodeHloModule + featurizers.h::FeaturizeHloInstruction
# (FEATURE_OP_NON_ZERO), reading the proto fields directly. Prints JSON.
import sys, json, struct

def varint(b, i):
    r = 0; s = 0
    while True:
        c = b[i]; i += 1; r |= (c & 0x7f) << s; s += 7
        if c < 0x80:
            return r, i

def fields(b):
    i = 0; out = []
    while i < len(b):
        k, i = varint(b, i); f = k >> 3; t = k & 7
        if t == 0: v, i = varint(b, i)
        elif t == 2:
            l, i = varint(b, i); v = b[i:i + l]; i += l
        elif t == 1: v = b[i:i + 8]; i += 8
        elif t == 5: v = b[i:i + 4]; i += 4
        else: raise ValueError("wire type %d" % t)
        out.append((f, t, v))
    return out

def s64(x):
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >= (1 << 63) else x

def ints(fl, num):
    out = []
    for f, t, v in fl:
        if f != num: continue
        if t == 0: out.append(s64(v))
        elif t == 2:
            i = 0
            while i < len(v):
                x, i = varint(v, i); out.append(s64(x))
    return out

def one(fl, num, default=0):
    v = ints(fl, num)
    return v[-1] if v else default

def subs(fl, num):
    return [fields(v) for f, t, v in fl if f == num and t == 2]

def sub(fl, num):
    s = subs(fl, num)
    return s[-1] if s else []

def f32(x):
    return struct.unpack('<f', struct.pack('<f', float(x)))[0]

def agg(out, vals, k):
    s = 0; p = 1
    for v in vals:
        s = s64(s + v); p = s64(p * v)
    lead = list(vals[:k]) + [0] * max(0, k - len(vals))
    out += [f32(v) for v in lead] + [f32(s), f32(p)]

def noagg(out, vals, k):
    lead = list(vals[:k]) + [0] * max(0, k - len(vals))
    out += [f32(v) for v in lead]

# PRIMITIVE_TYPE_FEATURES order, as proto enum numbers.
TYPES = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16, 15, 18, 13, 14, 17]

def features(ins, root_id):
    out = []
    out.append(1.0 if one(ins, 35) == root_id else 0.0)
    out.append(0.0)
    shape = sub(ins, 3)
    et = one(shape, 2)
    out += [1.0 if et == t else 0.0 for t in TYPES]
    agg(out, ints(shape, 3), 6)
    out.append(float(len(subs(shape, 4))))
    out.append(f32(one(ins, 9)))
    noagg(out, ints(ins, 14), 6)
    wd = subs(sub(ins, 15), 1)
    for num in (1, 2, 3, 4, 5, 6):
        agg(out, [one(d, num) for d in wd], 6)
    rev = [one(d, 7) != 0 for d in wd]
    out += [1.0 if b else 0.0 for b in rev[:6]] + [0.0] * max(0, 6 - len(rev))
    out += [float(sum(rev)), float(len(rev) - sum(rev))]
    cd = sub(ins, 16)
    out += [f32(one(cd, 7)), f32(one(cd, 8))]
    noagg(out, ints(cd, 11), 4)
    out += [f32(one(cd, 3)), f32(one(cd, 4))]
    noagg(out, ints(cd, 6), 4)
    out += [f32(one(cd, 9)), f32(one(cd, 10))]
    out += [f32(one(ins, 50)), f32(one(ins, 58))]
    sl = subs(ins, 17)
    for num in (1, 3, 2):  # start, stride, limit
        agg(out, [one(d, num) for d in sl], 2)
    agg(out, ints(ins, 20), 2)
    pd = subs(sub(ins, 21), 1)
    agg(out, [one(d, 1) for d in pd], 2)
    agg(out, [one(d, 2) for d in pd], 2)
    out.append(1.0 if one(ins, 60) else 0.0)
    noagg(out, ints(sub(shape, 5), 1), 6)
    assert len(out) == 140, len(out)
    return out

def main(path, opcode_table):
    ids = dict(json.loads(opcode_table))
    m = fields(open(path, 'rb').read())
    comps = subs(m, 3)
    roots = {one(c, 5): one(c, 6) for c in comps}
    pos = {}
    n = 0
    for c in comps:
        for ins in subs(c, 2):
            pos[one(ins, 35)] = n; n += 1
    opcodes, feat, edges, splits = [], [], [], [0]
    count = 0
    for c in comps:
        root_id = one(c, 6)
        for ins in subs(c, 2):
            u = pos[one(ins, 35)]
            op = [v for f, t, v in ins if f == 2][0].decode()
            opcodes.append(ids.get(op, 0))
            feat += features(ins, root_id)
            for o in sorted(set(ints(ins, 36))):
                edges.append([u, pos[o]])
            for cc in ints(ins, 38):
                edges.append([u, pos[roots[cc]]])
        count += len(subs(c, 2))
        name = [v for f, t, v in c if f == 1][0].decode()
        if 'cluster' in name or 'while' in name or 'cond' in name:
            splits.append(count)
    if splits[-1] < count:
        splits.append(count)
    edges.sort()
    print(json.dumps({"opcodes": opcodes, "feat": feat, "edges": edges, "splits": splits}))

main(sys.argv[1], sys.argv[2])
"#;

#[derive(serde::Deserialize)]
struct Reference {
    opcodes: Vec<u8>,
    feat: Vec<f64>,
    edges: Vec<[i64; 2]>,
    splits: Vec<i64>,
}

#[test]
fn matches_the_official_extractor_on_xla_protos() {
    let Some(shared) = common::shared("matches_the_official_extractor_on_xla_protos") else {
        return;
    };
    if !common::has(
        common::Need::Python3,
        "matches_the_official_extractor_on_xla_protos",
    ) {
        return;
    }
    let table: Vec<(&str, u8)> = tpusim::dataset::opcodes::OPCODE_TABLE.to_vec();
    let table = serde_json::to_string(&table).unwrap();
    let dir = shared.join("hlo_corpus/jax");
    let mut pbs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".hlo.pb"))
        .collect();
    pbs.sort();
    assert!(!pbs.is_empty(), "no .hlo.pb files in {}", dir.display());
    let mut checked = 0;
    for pb in &pbs {
        let hlo = pb.with_extension(""); // strip ".pb"
        let name = hlo.file_name().unwrap().to_string_lossy().to_string();
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(REFERENCE_ENCODER_PY)
            .arg(pb)
            .arg(&table)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: reference encoder failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: Reference = serde_json::from_slice(&out.stdout).unwrap();
        let m = parse_module(&name, &std::fs::read_to_string(&hlo).unwrap()).unwrap();
        let g = encode_graph(&m).unwrap();
        assert_eq!(g.num_nodes(), r.opcodes.len(), "{name}: node count");
        assert_eq!(g.node_opcode, r.opcodes, "{name}: opcodes");
        assert_eq!(g.node_splits, r.splits, "{name}: node_splits");
        assert_eq!(g.edge_index.len(), r.edges.len(), "{name}: edge count");
        assert!(g.edge_index == r.edges, "{name}: edges differ");
        let mut bad = 0;
        for (i, (&a, &b)) in g.node_feat.iter().zip(&r.feat).enumerate() {
            if a as f64 != b {
                if bad < 5 {
                    let k = i / NODE_FEATURE_COUNT;
                    let (c, id) = g.nodes[k];
                    eprintln!(
                        "{name}: node {k} ({}) column {} = {a}, reference {b}",
                        m.comp(c).instr(id).name,
                        tpusim::dataset::features::FEATURE_NAMES[i % NODE_FEATURE_COUNT]
                    );
                }
                bad += 1;
            }
        }
        assert_eq!(bad, 0, "{name}: {bad} feature values differ");
        checked += 1;
    }
    eprintln!("{checked} modules identical to the reference encoding of XLA's protos");
}
