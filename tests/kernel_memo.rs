//! A kernel memo changes nothing but the time: the program compiled through it is the
//! program compiled without it (kernels, names, estimates), and its runtimes are the
//! same to the bit, on the memo's target and on any other. So does a table of small
//! kernel bodies' and kernel classes' times (`KernelTimes`, the `random` search's).

mod common;

use tpusim::dataset::generate::{sample_layouts, Search};
use tpusim::dataset::layout_eval::{recompiled_ns, remembered_ns, timed_ns, LayoutEvaluator};
use tpusim::hlo::parse_module;
use tpusim::ir::Module;
use tpusim::kernels::TileOverrides;
use tpusim::kernels::{
    compile_program, compile_program_with, KernelMemo, KernelTimes, LoweredProgram,
};
use tpusim::passes::{CompilationConfig, LayoutEntry, NodeRef, PreparedModule};
use tpusim::tpu::TpuTarget;

fn assert_same_program(what: &str, a: &LoweredProgram, b: &LoweredProgram) {
    assert_eq!(a.kernels.len(), b.kernels.len(), "{what}: kernel counts");
    for (x, y) in a.kernels.iter().zip(&b.kernels) {
        assert_eq!(
            x.lowered,
            y.lowered,
            "{what}: kernel {}",
            x.lowered.desc().name
        );
        assert_eq!(x.computation, y.computation, "{what}");
    }
    assert_eq!(a.loops, b.loops, "{what}");
    assert_eq!(a.distinct_kernels(), b.distinct_kernels(), "{what}");
    let none = TileOverrides::default();
    for target in [TpuTarget::v3(), TpuTarget::v5e()] {
        assert_eq!(
            a.estimate(&target, &none),
            b.estimate(&target, &none),
            "{what}: estimates on {}",
            target.name
        );
    }
}

/// `configs` random layout configurations of `m` (and the default), each compiled with
/// and without one shared memo, and costed with one shared table of small bodies'
/// times; returns (kernels lowered, bodies remembered, bodies timed).
fn check_module(what: &str, m: &Module, configs: usize) -> (usize, usize, usize) {
    let v3 = TpuTarget::v3();
    let ev = LayoutEvaluator::new(m, &v3);
    let prepared = PreparedModule::new(m).unwrap();
    let memo = KernelMemo::new(m, &v3);
    let times = KernelTimes::new(m, &v3);
    let mut timed_after_first = 0;
    let mut classes_after_first = 0;
    let mut cfgs = vec![CompilationConfig::default()];
    cfgs.extend(
        sample_layouts(&ev, Search::Random, configs, 3)
            .iter()
            .map(|c| ev.compilation_config(c)),
    );
    let mut lowered = 0;
    // twice over: the second pass takes every kernel from the memo
    for pass in 0..2 {
        for (i, cfg) in cfgs.iter().enumerate() {
            let what = format!("{what}, config {i}, pass {pass}");
            let plain = compile_program(&prepared, cfg).unwrap();
            let kept = compile_program_with(&prepared, cfg, Some(&memo)).unwrap();
            assert_same_program(&what, &plain.program, &kept.program);
            assert_eq!(plain.kernels, kept.kernels, "{what}");
            let exact = recompiled_ns(&prepared, cfg, &v3).unwrap();
            // the labels' compilation (no physical shapes in the kernel list) costs what
            // the program costs
            let whole = plain.total_ns(&v3).unwrap();
            assert_eq!(
                exact.to_bits(),
                whole.to_bits(),
                "{what}: {exact} vs {whole}"
            );
            let fast = remembered_ns(&prepared, cfg, &memo).unwrap();
            assert_eq!(exact.to_bits(), fast.to_bits(), "{what}: {exact} vs {fast}");
            let timed = timed_ns(&prepared, cfg, &times).unwrap();
            assert_eq!(
                exact.to_bits(),
                timed.to_bits(),
                "{what}: {exact} vs {timed}"
            );
            // the evaluator's own memo gives the same
            if pass == 0 {
                lowered += plain.program.kernels.len();
            }
        }
        if pass == 0 {
            let after_first = memo.len();
            assert!(after_first > 0, "{what}: nothing remembered");
            timed_after_first = times.len();
            assert!(timed_after_first > 0, "{what}: nothing timed");
            classes_after_first = times.classes_len();
            assert!(classes_after_first > 0, "{what}: no class timed");
        } else {
            // the second pass found every small body and every class: it kept none anew
            assert_eq!(times.len(), timed_after_first, "{what}: bodies timed");
            assert_eq!(
                times.classes_len(),
                classes_after_first,
                "{what}: classes timed"
            );
        }
    }
    (lowered, memo.len(), times.len())
}

#[test]
fn memo_changes_nothing_on_the_samples() {
    // (module, configurations, whether the table keeps fewer bodies than the memo: a
    // model with equal layers or with bodies of more than `KernelTimes::MAX_BODY`
    // instructions)
    for (name, configs, fewer) in [
        ("resnet18_infer_b8", 12, true),
        ("mlp_train", 12, false),
        ("bert_base_infer_b8s128", 6, true),
        ("resnet50_train_b8", 4, true),
    ] {
        let m = common::load_sample(&format!("{name}.hlo"));
        let (lowered, remembered, timed) = check_module(name, &m, configs);
        // kernels repeat within and across configurations: fewer bodies than kernels
        assert!(
            remembered < lowered,
            "{name}: {remembered} bodies remembered for {lowered} kernels"
        );
        // only the small bodies are timed, by content (equal layers' bodies once), where
        // the memo keeps every body by address (resnet18_infer_b8: 1,537 against 1,715;
        // bert_base_infer_b8s128: 685 against 837; resnet50_train_b8: 3,786 against
        // 4,761; mlp_train: 54 and 54)
        assert!(
            if fewer {
                timed < remembered
            } else {
                timed == remembered
            },
            "{name}: {timed} bodies timed, {remembered} remembered"
        );
    }
}

/// A program with a loop (the skeleton path of `compile_program`) and a second target.
#[test]
fn memo_changes_nothing_in_loops_and_on_other_targets() {
    let text = r#"
HloModule w

cond {
  p = (s32[], f32[8,128]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT c = pred[] compare(i, n), direction=LT
}

body {
  p = (s32[], f32[8,128]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  v = f32[8,128] get-tuple-element(p), index=1
  e = f32[8,128] exponential(v)
  a = f32[8,128] add(e, v)
  ROOT t = (s32[], f32[8,128]) tuple(j, a)
}

ENTRY e {
  x = f32[8,128] parameter(0)
  y = f32[128,8] transpose(x), dimensions={1,0}
  d = f32[8,8] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = f32[8,8] add(d, d)
  z = s32[] constant(0)
  t = (s32[], f32[8,128]) tuple(z, x)
  w = (s32[], f32[8,128]) while(t), condition=cond, body=body
  r = f32[8,128] get-tuple-element(w), index=1
  ROOT o = (f32[8,128], f32[8,8]) tuple(r, s)
}
"#;
    let m = parse_module("w.hlo", text).unwrap();
    let prepared = PreparedModule::new(&m).unwrap();
    assert!(!prepared.is_straight_line());
    let v5e = TpuTarget::v5e();
    let memo = KernelMemo::new(&m, &v5e);
    let times = KernelTimes::new(&m, &v5e);
    for _ in 0..2 {
        let cfg = CompilationConfig::default();
        let plain = compile_program(&prepared, &cfg).unwrap();
        let kept = compile_program_with(&prepared, &cfg, Some(&memo)).unwrap();
        assert_eq!(kept.program.loops[0].1, 4);
        assert_same_program("while loop", &plain.program, &kept.program);
        // the label paths (`remembered_ns` and `timed_ns` cost a program with loops
        // through the program, a straight-line one kernel by kernel) give the same
        let exact = recompiled_ns(&prepared, &cfg, &v5e).unwrap().to_bits();
        assert_eq!(
            remembered_ns(&prepared, &cfg, &memo).unwrap().to_bits(),
            exact
        );
        assert_eq!(timed_ns(&prepared, &cfg, &times).unwrap().to_bits(), exact);
        for t in [TpuTarget::v3(), v5e.clone()] {
            let none = TileOverrides::default();
            assert_eq!(
                plain.program.total_ns(&t, &none).unwrap().to_bits(),
                kept.program.total_ns(&t, &none).unwrap().to_bits(),
                "{}",
                t.name
            );
        }
    }
    // the fusions the compiler makes are remembered (the loop body's and the dot's);
    // unfused instructions of a program with loops are lowered from the skeleton
    let fusions = compile_program(&prepared, &CompilationConfig::default())
        .unwrap()
        .kernels
        .iter()
        .filter(|k| k.fused_computation.is_some())
        .count();
    assert_eq!(fusions, 2);
    assert_eq!(memo.len(), fusions);
    // nor are small bodies' or classes' times kept for it
    assert!(times.is_empty() && times.classes_len() == 0);
}

/// A memo made for another module is not used (its attribute addresses mean nothing
/// there): the program is still right.
#[test]
fn memo_of_another_module_is_ignored() {
    let a = common::load_sample("mlp_train.hlo");
    let b = common::load_sample("mlp_train.hlo");
    let v3 = TpuTarget::v3();
    let memo = KernelMemo::new(&a, &v3);
    assert!(memo.is_for(&a) && !memo.is_for(&b));
    let prepared = PreparedModule::new(&b).unwrap();
    let cfg = CompilationConfig::default();
    let kept = compile_program_with(&prepared, &cfg, Some(&memo)).unwrap();
    let plain = compile_program(&prepared, &cfg).unwrap();
    assert_same_program("other module", &plain.program, &kept.program);
    assert!(memo.is_empty());
    let times = KernelTimes::new(&a, &v3);
    assert!(times.is_for(&a) && !times.is_for(&b));
    assert_eq!(
        timed_ns(&prepared, &cfg, &times).unwrap().to_bits(),
        plain.total_ns(&v3).unwrap().to_bits()
    );
    assert!(times.is_empty() && times.classes_len() == 0);
}

/// The memo names a laid-out shape by its id (the address of the input shape it lays
/// out and its packed layout) instead of writing the shape into the key: across the
/// compilations of a module, nodes with equal ids have equal shapes, and a change of
/// layout is a change of id.
#[test]
fn equal_shape_ids_are_equal_shapes() {
    let m = common::load_sample("resnet18_infer_b8.hlo");
    let v3 = TpuTarget::v3();
    let ev = LayoutEvaluator::new(&m, &v3);
    let prepared = PreparedModule::new(&m).unwrap();
    let mut cfgs = vec![CompilationConfig::default()];
    cfgs.extend(
        sample_layouts(&ev, Search::Random, 20, 5)
            .iter()
            .map(|c| ev.compilation_config(c)),
    );
    let mut seen: std::collections::HashMap<(usize, u64), tpusim::ir::Shape> =
        std::collections::HashMap::new();
    let (mut with_id, mut without_id, mut in_default) = (0, 0, 0);
    for (i, cfg) in cfgs.iter().enumerate() {
        let c = prepared.compile_bodies(cfg).unwrap();
        // the nodes of a compilation are shared by its kernels' bodies
        let body = c.bodies.get(0).unwrap();
        for n in body.nodes {
            let Some(id) = n.shape_id else {
                without_id += 1;
                continue;
            };
            with_id += 1;
            let shape: &tpusim::ir::Shape = &n.shape;
            let kept = seen.entry(id).or_insert_with(|| shape.clone());
            assert_eq!(kept, shape, "config {i}: node {} under id {id:?}", n.name);
        }
        if i == 0 {
            in_default = seen.len();
        }
    }
    // resnet18_infer_b8 (18,961 listed nodes over the 21 compilations): every node the
    // compiler lists borrows its input shape and has one array leaf
    assert_eq!(without_id, 0, "{with_id} nodes with an id");
    assert!(with_id > 10_000, "{with_id} nodes with an id");
    // the random layouts give the convolutions' tensors new shapes, with new ids
    // (509 ids in all, 69 in the default compilation)
    assert!(
        seen.len() > 5 * in_default,
        "{} ids in all, {in_default} in the default compilation",
        seen.len()
    );
}

/// Two layers that differ in names, metadata and the name of their reducer only: the
/// table of times keys their kernels by content, so the second layer's kernel time is
/// the first's; the memo keys them by address, one each. The runtimes are the same.
#[test]
fn equal_layers_share_one_kept_time() {
    let text = r#"
HloModule two

add_a {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

add_b {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT t = f32[] add(p, q)
}

ENTRY e {
  p0 = f32[64,128] parameter(0)
  p1 = f32[64,128] parameter(1)
  z = f32[] constant(0)
  e0 = f32[64,128] exponential(p0), metadata={op_name="layer0/exp"}
  r0 = f32[64] reduce(e0, z), dimensions={1}, to_apply=add_a, metadata={op_name="layer0/sum"}
  e1 = f32[64,128] exponential(p1), metadata={op_name="layer1/exp"}
  r1 = f32[64] reduce(e1, z), dimensions={1}, to_apply=add_b, metadata={op_name="layer1/sum"}
  ROOT t = (f32[64], f32[64]) tuple(r0, r1)
}
"#;
    let m = parse_module("two.hlo", text).unwrap();
    let prepared = PreparedModule::new(&m).unwrap();
    let v3 = TpuTarget::v3();
    let memo = KernelMemo::new(&m, &v3);
    let times = KernelTimes::new(&m, &v3);
    let cfg = CompilationConfig::default();
    let plain = compile_program(&prepared, &cfg).unwrap();
    let kept = compile_program_with(&prepared, &cfg, Some(&memo)).unwrap();
    assert_same_program("two layers", &plain.program, &kept.program);
    // one kernel a layer, named after its own layer
    let names: Vec<&str> = kept
        .program
        .kernels
        .iter()
        .map(|k| &*k.lowered.desc().name)
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_ne!(names[0], names[1]);
    assert_eq!(memo.len(), 2);
    let exact = recompiled_ns(&prepared, &cfg, &v3).unwrap();
    assert_eq!(
        timed_ns(&prepared, &cfg, &times).unwrap().to_bits(),
        exact.to_bits()
    );
    assert_eq!(times.len(), 1);
}

/// Layouts that differ only in which size-1 dim sits where lay out the same bytes: the
/// model reads them alike (`kernels::ops::with_model_minor_to_major`), so they cost the
/// same to the bit, and the table of times keys their kernels alike: a second such
/// configuration is costed from the first one's entries, adding none.
#[test]
fn layouts_differing_only_in_size_one_dims_share_their_times() {
    let text = r#"
HloModule unit_dims, entry_computation_layout={(f32[64]{0}, f32[8,16,16,32]{3,2,1,0}, f32[1,1,32,32]{3,2,1,0})->(f32[1,1,1,64]{3,2,1,0}, f32[8,16,16,32]{3,2,1,0})}

ENTRY e {
  p = f32[64]{0} parameter(0)
  x = f32[8,16,16,32]{3,2,1,0} parameter(1)
  k = f32[1,1,32,32]{3,2,1,0} parameter(2)
  r = f32[1,1,1,64]{3,2,1,0} reshape(p)
  ex = f32[1,1,1,64]{3,2,1,0} exponential(r)
  c = f32[8,16,16,32]{3,2,1,0} convolution(x, k), window={size=1x1}, dim_labels=b01f_01io->b01f
  ROOT t = (f32[1,1,1,64]{3,2,1,0}, f32[8,16,16,32]{3,2,1,0}) tuple(ex, c)
}
"#;
    let m = parse_module("unit_dims.hlo", text).unwrap();
    let prepared = PreparedModule::new(&m).unwrap();
    let v3 = TpuTarget::v3();
    let cfg = |reshape_out: &[i64], kernel: &[i64]| CompilationConfig {
        layout: vec![
            LayoutEntry {
                node: NodeRef::Name("r".into()),
                output: reshape_out.to_vec(),
                input: Vec::new(),
                kernel: Vec::new(),
            },
            LayoutEntry {
                node: NodeRef::Name("c".into()),
                output: Vec::new(),
                input: Vec::new(),
                kernel: kernel.to_vec(),
            },
        ],
        ..Default::default()
    };
    // the reshape's output: its size-1 dims 0, 1, 2 at the three major places, in
    // another order; the convolution's kernel: its size-1 spatial dims 0 and 1 swapped
    // (prefixes [2, 0] and [2, 1] complete to {2,0,3,1} and {2,1,3,0})
    let first = cfg(&[3, 0, 1, 2], &[2, 0]);
    let second = cfg(&[3, 1, 2, 0], &[2, 1]);
    let exact = recompiled_ns(&prepared, &first, &v3).unwrap();
    assert!(exact > 0.0);
    assert_eq!(
        recompiled_ns(&prepared, &second, &v3).unwrap().to_bits(),
        exact.to_bits()
    );
    let times = KernelTimes::new(&m, &v3);
    assert_eq!(
        timed_ns(&prepared, &first, &times).unwrap().to_bits(),
        exact.to_bits()
    );
    let kept = times.len();
    assert!(kept >= 2, "{kept} bodies kept");
    assert_eq!(
        timed_ns(&prepared, &second, &times).unwrap().to_bits(),
        exact.to_bits()
    );
    assert_eq!(
        times.len(),
        kept,
        "the second configuration's bodies were all kept"
    );
    // a layout that moves the 64 to another place is another layout: a new body
    let third = cfg(&[0, 3, 1, 2], &[2, 0]);
    timed_ns(&prepared, &third, &times).unwrap();
    assert!(times.len() > kept);
}
