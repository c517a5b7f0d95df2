//! Layout assignment on small hand-written modules with hand-computed results.

use tpusim::hlo::{parse_module, print_module};
use tpusim::ir::{Computation, Module, Opcode, Shape};
use tpusim::passes::{
    compile, configurable_nodes, verify::verify, CompilationConfig, CompileError, LayoutEntry,
    NodeRef,
};

fn module(text: &str) -> Module {
    parse_module("test.hlo", text).unwrap()
}

/// (node, output, input, kernel)
type Entry<'a> = (&'a str, &'a [i64], &'a [i64], &'a [i64]);

fn layout_cfg(entries: &[Entry<'_>]) -> CompilationConfig {
    CompilationConfig {
        layout: entries
            .iter()
            .map(|(n, o, i, k)| LayoutEntry {
                node: NodeRef::Name(n.to_string()),
                output: o.to_vec(),
                input: i.to_vec(),
                kernel: k.to_vec(),
            })
            .collect(),
        ..Default::default()
    }
}

fn m2m(s: &Shape) -> Vec<i64> {
    s.as_array().unwrap().minor_to_major().to_vec()
}

/// All `copy` instructions of the module as (operand name, result minor_to_major),
/// looking inside fused computations too.
fn copies(m: &Module) -> Vec<(String, Vec<i64>)> {
    let mut v = Vec::new();
    for c in m.computations.values() {
        for &id in &c.order {
            let i = c.instr(id);
            if i.opcode == Opcode::Copy {
                let o = c.instr(c.operand(id, 0).unwrap());
                // A fusion operand is named by the instruction that produces it (its root).
                let src = match o.attrs.called.first() {
                    Some(&(_, f)) if o.opcode == Opcode::Fusion => {
                        let fc = m.comp(f);
                        fc.instr(fc.root).name.to_string()
                    }
                    _ => o.name.to_string(),
                };
                v.push((src, m2m(&i.shape)));
            }
        }
    }
    v.sort();
    v
}

/// The instruction named `name` anywhere in the module.
fn instr<'a>(m: &'a Module, name: &str) -> (&'a Computation, tpusim::ir::InstrId) {
    for c in m.computations.values() {
        if let Some(id) = c.find(name) {
            return (c, id);
        }
    }
    panic!("no instruction {name}");
}

fn operand_layout(m: &Module, name: &str, slot: usize) -> Vec<i64> {
    let (c, id) = instr(m, name);
    m2m(&c.instr(c.operand(id, slot).unwrap()).shape)
}

const ONE_CONV: &str = r#"
HloModule one_conv, entry_computation_layout={(f32[8,16,16,32]{3,2,1,0}, f32[3,3,32,64]{3,2,1,0})->f32[8,16,16,64]{3,2,1,0}}

ENTRY e {
  x = f32[8,16,16,32]{3,2,1,0} parameter(0)
  k = f32[3,3,32,64]{3,2,1,0} parameter(1)
  ROOT conv = f32[8,16,16,64]{3,2,1,0} convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
"#;

#[test]
fn default_layout_moves_the_batch_next_to_the_feature_dim() {
    let m = module(ONE_CONV);
    let c = compile(&m, &CompilationConfig::default()).unwrap();
    verify(&c.module).unwrap();
    // Batch 8 fills a sublane tile: the TPU input layout is {3,0,2,1} (H, W, N, C major to
    // minor), so the row-major parameter is copied once; the HWIO kernel is already
    // {3,2,1,0}; the output is the entry result layout.
    assert_eq!(copies(&c.module), vec![("x".to_string(), vec![3, 0, 2, 1])]);
    assert_eq!(operand_layout(&c.module, "conv", 0), vec![3, 0, 2, 1]);
    assert_eq!(operand_layout(&c.module, "conv", 1), vec![3, 2, 1, 0]);
    assert_eq!(c.stats.copies_inserted, 1);
}

/// A training step: the forward convolution and the filter gradient JAX writes for it
/// (`dim_labels=f01b_i01o->01bf`: the activation's batch is the "feature", its channels
/// the "batch", the output gradient the 16×16 "window").
const FILTER_GRADIENT: &str = r#"
HloModule fg, entry_computation_layout={(f32[8,16,16,32]{3,2,1,0}, f32[3,3,32,64]{3,2,1,0}, f32[8,16,16,64]{3,2,1,0})->(f32[8,16,16,64]{3,2,1,0}, f32[3,3,32,64]{3,2,1,0})}

ENTRY e {
  x = f32[8,16,16,32]{3,2,1,0} parameter(0)
  k = f32[3,3,32,64]{3,2,1,0} parameter(1)
  g = f32[8,16,16,64]{3,2,1,0} parameter(2)
  y = f32[8,16,16,64]{3,2,1,0} convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  dk = f32[3,3,32,64]{3,2,1,0} convolution(x, g), window={size=16x16 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf
  ROOT t = (f32[8,16,16,64]{3,2,1,0}, f32[3,3,32,64]{3,2,1,0}) tuple(y, dk)
}
"#;

#[test]
fn filter_gradient_reads_the_activation_in_its_forward_layout() {
    let m = module(FILTER_GRADIENT);
    let c = compile(&m, &CompilationConfig::default()).unwrap();
    verify(&c.module).unwrap();
    // The forward convolution wants x as {3,0,2,1} (H, W, N, C major to minor). The
    // filter gradient reads x as [spatial…, feature (N), batch (C)] = the same {3,0,2,1}
    // (not {0,3,2,1}, which would put the batch of 8 in the 128 lanes), so one copy of x
    // serves both; g is read as its filter layout [spatial…, in (N), out (C)] =
    // {3,0,2,1}; the 3×3×32×64 result is row-major, as the entry result wants.
    assert_eq!(
        copies(&c.module),
        vec![
            ("g".to_string(), vec![3, 0, 2, 1]),
            ("x".to_string(), vec![3, 0, 2, 1])
        ]
    );
    assert_eq!(operand_layout(&c.module, "dk", 0), vec![3, 0, 2, 1]);
    assert_eq!(operand_layout(&c.module, "dk", 1), vec![3, 0, 2, 1]);
    assert_eq!(operand_layout(&c.module, "y", 0), vec![3, 0, 2, 1]);
    assert_eq!(c.stats.copies_inserted, 2);
}

#[test]
fn configured_operand_layouts_insert_exactly_the_needed_copies() {
    let m = module(ONE_CONV);
    // Input and kernel differ from the parameters' layouts, the output from the result's.
    let cfg = layout_cfg(&[("conv", &[0, 3, 2, 1], &[2, 1, 3, 0], &[2, 3, 1, 0])]);
    let c = compile(&m, &cfg).unwrap();
    verify(&c.module).unwrap();
    assert_eq!(
        copies(&c.module),
        vec![
            ("conv".to_string(), vec![3, 2, 1, 0]),
            ("k".to_string(), vec![2, 3, 1, 0]),
            ("x".to_string(), vec![2, 1, 3, 0]),
        ]
    );
    assert_eq!(operand_layout(&c.module, "conv", 0), vec![2, 1, 3, 0]);
    let (cc, id) = instr(&c.module, "conv");
    assert_eq!(m2m(&cc.instr(id).shape), vec![0, 3, 2, 1]);
    // The root is the copy back to the entry result layout.
    let e = c.module.entry();
    assert_eq!(e.instr(e.root).opcode, Opcode::Copy);
    assert_eq!(m2m(&e.instr(e.root).shape), vec![3, 2, 1, 0]);

    // Layouts equal to the producers' need no copy at all.
    let cfg = layout_cfg(&[("conv", &[], &[3, 2, 1, 0], &[])]);
    let c = compile(&m, &cfg).unwrap();
    assert!(copies(&c.module).is_empty(), "{:?}", copies(&c.module));
}

const TWO_CONVS: &str = r#"
HloModule two_convs, entry_computation_layout={(f32[8,16,16,32]{3,2,1,0}, f32[1,1,32,32]{3,2,1,0}, f32[1,1,32,32]{3,2,1,0})->f32[8,16,16,32]{3,2,1,0}}

ENTRY e {
  x = f32[8,16,16,32]{3,2,1,0} parameter(0)
  k1 = f32[1,1,32,32]{3,2,1,0} parameter(1)
  k2 = f32[1,1,32,32]{3,2,1,0} parameter(2)
  c1 = f32[8,16,16,32]{3,2,1,0} convolution(x, k1), window={size=1x1}, dim_labels=b01f_01io->b01f
  zero = f32[] constant(0)
  zeros = f32[8,16,16,32]{3,2,1,0} broadcast(zero), dimensions={}
  r = f32[8,16,16,32]{3,2,1,0} maximum(c1, zeros)
  ROOT c2 = f32[8,16,16,32]{3,2,1,0} convolution(r, k2), window={size=1x1}, dim_labels=b01f_01io->b01f
}
"#;

#[test]
fn convolution_input_layout_differing_from_its_producer_costs_one_copy() {
    let m = module(TWO_CONVS);
    // c1 writes row-major, c2 wants {0,3,2,1}: the relu between them follows c1 (layouts
    // propagate through elementwise ops), so one copy r -> {0,3,2,1}; plus the copy of x
    // into the TPU input layout of c1.
    let cfg = layout_cfg(&[
        ("c1", &[3, 2, 1, 0], &[], &[]),
        ("c2", &[], &[0, 3, 2, 1], &[]),
    ]);
    let c = compile(&m, &cfg).unwrap();
    verify(&c.module).unwrap();
    assert_eq!(
        copies(&c.module),
        vec![
            ("r".to_string(), vec![0, 3, 2, 1]),
            ("x".to_string(), vec![3, 0, 2, 1])
        ]
    );
    // The copy is a kernel of its own (a physical transpose) between the two fusions.
    let copy_kernels: Vec<_> = c
        .kernels
        .iter()
        .filter(|k| k.hero == Opcode::Copy)
        .collect();
    assert_eq!(copy_kernels.len(), 2);

    // When c1 already produces what c2 reads, the relu is in that layout too: no copy.
    let cfg = layout_cfg(&[
        ("c1", &[0, 3, 2, 1], &[], &[]),
        ("c2", &[], &[0, 3, 2, 1], &[]),
    ]);
    let c = compile(&m, &cfg).unwrap();
    assert_eq!(copies(&c.module), vec![("x".to_string(), vec![3, 0, 2, 1])]);
    let (rc, rid) = instr(&c.module, "r");
    assert_eq!(m2m(&rc.instr(rid).shape), vec![0, 3, 2, 1]);

    // Node indices address the same nodes: c2 is node 7 (x, k1, k2, c1, zero, zeros, r, c2).
    let nodes = configurable_nodes(&m);
    assert_eq!(nodes.iter().map(|n| n.2).collect::<Vec<_>>(), vec![3, 7]);
    let by_index = CompilationConfig {
        layout: vec![
            LayoutEntry {
                node: NodeRef::Index(3),
                output: vec![0, 3, 2, 1],
                input: vec![],
                kernel: vec![],
            },
            LayoutEntry {
                node: NodeRef::Index(7),
                output: vec![],
                input: vec![0, 3, 2, 1],
                kernel: vec![],
            },
        ],
        ..Default::default()
    };
    let c2 = compile(&m, &by_index).unwrap();
    assert_eq!(print_module(&c2.module), print_module(&c.module));
}

#[test]
fn tpu_tiles_follow_the_element_type() {
    let m = module(
        r#"
HloModule tiles
ENTRY e {
  a = f32[64,256]{1,0} parameter(0)
  b = bf16[64,256]{1,0} parameter(1)
  c = s8[64,256]{1,0} parameter(2)
  d = f32[2,1000]{1,0} parameter(3)
  s = f32[] parameter(4)
  v = f32[4096]{0} parameter(5)
  i = s32[] parameter(6)
  ROOT t = (f32[64,256]{1,0}, bf16[64,256]{1,0}, s8[64,256]{1,0}, f32[2,1000]{1,0}, f32[], f32[4096]{0}, s32[]) tuple(a, b, c, d, s, v, i)
}
"#,
    );
    let c = compile(&m, &CompilationConfig::default()).unwrap();
    let text = print_module(&c.module);
    for want in [
        "f32[64,256]{1,0:T(8,128)}",
        "bf16[64,256]{1,0:T(8,128)(2,1)}",
        "s8[64,256]{1,0:T(8,128)(4,1)}",
        "f32[2,1000]{1,0:T(2,128)}",
        "f32[]{:T(256)}",
        "f32[4096]{0:T(1024)}",
        "s32[]{:T(128)}",
    ] {
        assert!(text.contains(want), "missing {want} in\n{text}");
    }
    // Padded sizes: bf16[64,256] is exact; f32[2,1000] pads 1000 to 1024.
    let e = c.module.entry();
    let d = e.instr(e.params[3]).shape.as_array().unwrap();
    assert_eq!(d.padded_byte_size(), 2 * 1024 * 4);
}

#[test]
fn layout_preserving_transposes_and_reshapes_become_bitcasts() {
    let src = |result_layout: &str, reshape_to: &str| {
        format!(
            r#"
HloModule bc, entry_computation_layout={{(f32[128,256]{{1,0}}, f32[8,16,128]{{2,1,0}}, f32[8,5,128]{{2,1,0}})->(f32[256,128]{{{result_layout}}}, {reshape_to}, f32[40,128]{{1,0}})}}
ENTRY e {{
  p = f32[128,256]{{1,0}} parameter(0)
  q = f32[8,16,128]{{2,1,0}} parameter(1)
  w = f32[8,5,128]{{2,1,0}} parameter(2)
  t = f32[256,128]{{{result_layout}}} transpose(p), dimensions={{1,0}}
  r = {reshape_to} reshape(q)
  s = f32[40,128]{{1,0}} reshape(w)
  ROOT out = (f32[256,128]{{{result_layout}}}, {reshape_to}, f32[40,128]{{1,0}}) tuple(t, r, s)
}}
"#
        )
    };
    // Result {0,1}: the transpose only renames dims -> bitcast. [8,16,128] -> [128,128]
    // keeps the bytes with T(8,128) tiles -> bitcast. [8,5,128] -> [40,128] does not (the
    // 5-row slabs are padded to 8) -> stays a reshape.
    let m = module(&src("0,1", "f32[128,128]{1,0}"));
    let c = compile(&m, &CompilationConfig::default()).unwrap();
    verify(&c.module).unwrap();
    let op = |n: &str| {
        let (cc, id) = instr(&c.module, n);
        cc.instr(id).opcode
    };
    assert_eq!(op("t"), Opcode::Bitcast);
    assert_eq!(op("r"), Opcode::Bitcast);
    assert_eq!(op("s"), Opcode::Reshape);
    assert_eq!(c.stats.bitcasts, 2);
    assert!(copies(&c.module).is_empty());
    // A bitcast has no `dimensions=`.
    assert!(print_module(&c.module).contains("%t = f32[256,128]{0,1:T(8,128)} bitcast(%p)"));

    // Result {1,0}: the transpose moves data and stays a transpose (no extra copy).
    let m = module(&src("1,0", "f32[128,128]{1,0}"));
    let c = compile(&m, &CompilationConfig::default()).unwrap();
    let (cc, id) = instr(&c.module, "t");
    assert_eq!(cc.instr(id).opcode, Opcode::Transpose);
    assert!(copies(&c.module).is_empty());
}

#[test]
fn dot_operands_keep_valid_layouts() {
    let m = module(
        r#"
HloModule d, entry_computation_layout={(f32[64,512]{1,0}, f32[1024,512]{1,0}, f32[4,64,32]{2,1,0}, f32[4,32,16]{1,2,0})->(f32[64,1024]{1,0}, f32[4,64,16]{2,1,0})}
ENTRY e {
  a = f32[64,512]{1,0} parameter(0)
  b = f32[1024,512]{1,0} parameter(1)
  x = f32[4,64,32]{2,1,0} parameter(2)
  y = f32[4,32,16]{1,2,0} parameter(3)
  d = f32[64,1024]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  bd = f32[4,64,16]{2,1,0} dot(x, y), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  ROOT t = (f32[64,1024]{1,0}, f32[4,64,16]{2,1,0}) tuple(d, bd)
}
"#,
    );
    // Both operands of both dots are valid (batch major, free and contracting dims
    // contiguous), so no copy; a dot operand with a batch dim minor would need one.
    let c = compile(&m, &CompilationConfig::default()).unwrap();
    assert!(copies(&c.module).is_empty(), "{:?}", copies(&c.module));
    // Configured: the kernel (rhs) of d read column-major -> one copy of b.
    let cfg = layout_cfg(&[("d", &[], &[], &[0, 1])]);
    let c = compile(&m, &cfg).unwrap();
    assert_eq!(copies(&c.module), vec![("b".to_string(), vec![0, 1])]);
}

#[test]
fn layouts_flow_through_while_loops() {
    let m = module(
        r#"
HloModule loop, entry_computation_layout={(f32[16,256]{1,0}, f32[256,256]{1,0})->f32[16,256]{1,0}}
cond {
  p = (s32[], f32[16,256], f32[256,256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[16,256], f32[256,256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  h = f32[16,256] get-tuple-element(p), index=1
  w = f32[256,256] get-tuple-element(p), index=2
  hw = f32[16,256] dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  h2 = f32[16,256] tanh(hw)
  ROOT t = (s32[], f32[16,256], f32[256,256]) tuple(i2, h2, w)
}
ENTRY e {
  h0 = f32[16,256] parameter(0)
  w0 = f32[256,256] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[16,256], f32[256,256]) tuple(zero, h0, w0)
  loop = (s32[], f32[16,256], f32[256,256]) while(init), condition=cond, body=body
  ROOT out = f32[16,256] get-tuple-element(loop), index=1
}
"#,
    );
    let c = compile(&m, &CompilationConfig::default()).unwrap();
    verify(&c.module).unwrap();
    assert!(copies(&c.module).is_empty());
    // The dot + tanh of the body is one kOutput kernel executed 10 times.
    let k = c.kernels.iter().find(|k| k.hero == Opcode::Dot).unwrap();
    assert_eq!(k.computation_name, "body");
    let site = k.call_site.as_ref().unwrap();
    assert_eq!(
        (
            site.instruction.as_str(),
            site.role.to_string().as_str(),
            site.trip_count
        ),
        ("loop", "body", Some(10))
    );
    assert_eq!(k.instruction_count, 2);
    // A configured dot output layout {0,1}: the body decides the loop-carried layout
    // (tanh keeps it, the body parameter follows the body result), so the loop carries
    // {0,1} and the two copies sit outside the loop: h0 in, the result out.
    let cfg = layout_cfg(&[("hw", &[0, 1], &[], &[])]);
    let c = compile(&m, &cfg).unwrap();
    verify(&c.module).unwrap();
    assert_eq!(
        copies(&c.module),
        vec![
            ("h0".to_string(), vec![0, 1]),
            ("out".to_string(), vec![1, 0])
        ]
    );
    assert!(c
        .kernels
        .iter()
        .filter(|k| k.hero == Opcode::Copy)
        .all(|k| k.computation_name == "e" && k.call_site.is_none()));
    let back = parse_module("x", &print_module(&c.module)).unwrap();
    assert!(back == c.module);
}

#[test]
fn layout_prefixes_compile_as_their_completion() {
    // A prefix is completed with the remaining dims in the input module's order
    // ({3,2,1,0} here): [3, 0] is {3,0,2,1}, [0] is {0,3,2,1}.
    let m = module(TWO_CONVS);
    let text = |cfg: CompilationConfig| print_module(&compile(&m, &cfg).unwrap().module);
    let prefix = text(layout_cfg(&[("c1", &[3, 0], &[0], &[2, 3])]));
    let full = text(layout_cfg(&[(
        "c1",
        &[3, 0, 2, 1],
        &[0, 3, 2, 1],
        &[2, 3, 1, 0],
    )]));
    assert_eq!(prefix, full);
    assert_ne!(prefix, text(CompilationConfig::default()));
}

#[test]
fn invalid_layout_configs_name_the_node() {
    let m = module(TWO_CONVS);
    let err = |cfg: CompilationConfig| compile(&m, &cfg).unwrap_err();

    let e = err(layout_cfg(&[("c1", &[0, 1, 2, 3, 1], &[], &[])]));
    assert!(matches!(e, CompileError::BadLayout { .. }), "{e}");
    assert!(e.to_string().contains("'c1'"), "{e}");
    assert!(e.to_string().contains("5 entries for a rank-4"), "{e}");
    let e = err(layout_cfg(&[("c1", &[3, 3], &[], &[])]));
    assert_eq!(
        e.to_string(),
        "layout config for node 'c1' (#3): output layout [3, 3] is not a minor_to_major \
         prefix of a rank-4 tensor (dimension 3 repeated)"
    );
    let e = err(layout_cfg(&[("c1", &[0, 1, 2, 2], &[], &[])]));
    assert!(e.to_string().contains("repeated"), "{e}");
    let e = err(layout_cfg(&[("c1", &[], &[], &[0, 1, 2, 4])]));
    assert!(
        e.to_string().contains("kernel") && e.to_string().contains("does not exist"),
        "{e}"
    );
    let e = err(layout_cfg(&[("nope", &[0, 1, 2, 3], &[], &[])]));
    assert!(
        matches!(e, CompileError::UnknownNode { ref name, .. } if name == "nope"),
        "{e}"
    );
    let e = err(layout_cfg(&[("r", &[0, 1, 2, 3], &[], &[])]));
    assert!(matches!(e, CompileError::NotConfigurable { .. }), "{e}");
    assert!(
        e.to_string().contains("maximum") && e.to_string().contains("'r'"),
        "{e}"
    );
    let e = err(CompilationConfig {
        layout: vec![LayoutEntry {
            node: NodeRef::Index(99),
            output: vec![],
            input: vec![],
            kernel: vec![],
        }],
        ..Default::default()
    });
    assert!(
        matches!(
            e,
            CompileError::NodeIndexOutOfRange {
                index: 99,
                count: 8,
                ..
            }
        ),
        "{e}"
    );
    let e = err(layout_cfg(&[
        ("c1", &[0, 1, 2, 3], &[], &[]),
        ("c1", &[], &[0, 1, 2, 3], &[]),
    ]));
    assert!(matches!(e, CompileError::DuplicateLayout { .. }), "{e}");
    // Trailing -1 padding (TpuGraphs) is fine; all -1 means compiler's choice.
    assert!(compile(
        &m,
        &layout_cfg(&[("c1", &[3, 2, 1, 0, -1, -1], &[-1, -1, -1, -1, -1, -1], &[])])
    )
    .is_ok());

    let r = module(
        r#"
HloModule r
ENTRY e {
  x = f32[4,8,16]{2,1,0} parameter(0)
  ROOT y = f32[32,16]{1,0} reshape(x)
}
"#,
    );
    let e = compile(&r, &layout_cfg(&[("y", &[], &[], &[1, 0])])).unwrap_err();
    assert!(
        matches!(
            e,
            CompileError::NoSuchTensor {
                tensor: "kernel",
                ..
            }
        ),
        "{e}"
    );
    // A reshape's configured input layout is what it reads.
    let c = compile(&r, &layout_cfg(&[("y", &[0, 1], &[0, 1, 2], &[])])).unwrap();
    assert_eq!(copies(&c.module), vec![("x".to_string(), vec![0, 1, 2])]);
}

#[test]
fn configs_load_from_json_and_toml_files() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    std::fs::write(
        &json,
        r#"{"layout": [{"node": "c2", "input": [0, 3, 2, 1]}], "fusion": {"policy": "none"}}"#,
    )
    .unwrap();
    let toml = dir.path().join("c.toml");
    std::fs::write(
        &toml,
        "[fusion]\npolicy = \"none\"\n\n[[layout]]\nnode = \"c2\"\ninput = [0, 3, 2, 1]\n",
    )
    .unwrap();
    let a = CompilationConfig::from_path(&json).unwrap();
    let b = CompilationConfig::from_path(&toml).unwrap();
    assert_eq!(a, b);
    let m = module(TWO_CONVS);
    let c = compile(&m, &a).unwrap();
    assert!(!print_module(&c.module).contains("fusion("));
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[layout]]\nnode = \"c2\"\ninptu = [0]\n").unwrap();
    let e = CompilationConfig::from_path(&bad).unwrap_err();
    assert!(
        e.to_string().contains("bad.toml") && e.to_string().contains("inptu"),
        "{e}"
    );
}

#[test]
fn prepared_module_compiles_like_compile() {
    fn is_sync<T: Sync + Send>() {}
    is_sync::<tpusim::passes::PreparedModule<'static>>();
    let m = module(TWO_CONVS);
    let p = tpusim::passes::PreparedModule::new(&m).unwrap();
    let configs = [
        CompilationConfig::default(),
        layout_cfg(&[
            ("c1", &[3, 2, 1, 0], &[], &[]),
            ("c2", &[], &[0, 3, 2, 1], &[]),
        ]),
    ];
    // Twice round: the prepared module keeps laid-out and physical shapes between
    // compilations; going back to a configuration must give what a fresh compile gives.
    for cfg in configs.iter().chain(&configs) {
        let a = compile(&m, cfg).unwrap();
        let b = p.compile(cfg).unwrap();
        assert_eq!(print_module(&a.module), print_module(&b.module));
        assert_eq!(a.kernels, b.kernels);
        let k = p.compile_bodies(cfg).unwrap();
        assert_eq!(k.kernels, a.kernels);
        assert_eq!(k.stats, a.stats);
    }
    assert_eq!(p.node_table().len(), 8);
    // Compiled twice with the same configuration, an instruction gets the very same
    // shape, and a kernel the very same physical shapes.
    let (a, b) = (
        p.compile(&configs[1]).unwrap(),
        p.compile(&configs[1]).unwrap(),
    );
    let (ea, eb) = (a.module.entry(), b.module.entry());
    assert!(ea.instr(ea.root).shape.same_as(&eb.instr(eb.root).shape));
    let (ka, kb) = (a.kernels.last().unwrap(), b.kernels.last().unwrap());
    assert!(std::sync::Arc::ptr_eq(&ka.outputs[0], &kb.outputs[0]));
}
