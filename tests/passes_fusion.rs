//! Fusion on small hand-written modules.

use tpusim::hlo::{parse_module, print_module};
use tpusim::ir::{Computation, Module, Opcode};
use tpusim::passes::{
    compile, verify::verify, CompilationConfig, CompileError, CompiledModule, FusionConfig,
    FusionOverride, FusionPolicy, KernelKind, KernelRef, NodeRef, TileBounds, TileEntry,
};

fn module(text: &str) -> Module {
    parse_module("test.hlo", text).unwrap()
}

fn with_policy(p: FusionPolicy) -> CompilationConfig {
    CompilationConfig {
        fusion: FusionConfig {
            policy: p,
            overrides: vec![],
        },
        ..Default::default()
    }
}

fn with_override(producer: &str, consumer: &str, fuse: bool) -> CompilationConfig {
    CompilationConfig {
        fusion: FusionConfig {
            policy: FusionPolicy::Xla,
            overrides: vec![FusionOverride {
                producer: NodeRef::Name(producer.into()),
                consumer: NodeRef::Name(consumer.into()),
                fuse,
            }],
        },
        ..Default::default()
    }
}

fn ok(m: &Module, cfg: &CompilationConfig) -> CompiledModule {
    let c = compile(m, cfg).unwrap();
    verify(&c.module).unwrap();
    let back = parse_module("back", &print_module(&c.module)).unwrap();
    assert!(back == c.module);
    c
}

/// Names of the instructions of the kernel that holds instruction `name`.
fn kernel_members(c: &CompiledModule, name: &str) -> Vec<String> {
    let holds = |k: &&tpusim::passes::Kernel| match k.fused_computation {
        Some(f) => c.module.comp(f).find(name).is_some(),
        None => k.name == name,
    };
    let k = c.kernels.iter().find(holds).unwrap_or_else(|| {
        panic!(
            "no kernel holds {name}: {:?}",
            c.kernels.iter().map(|k| &k.name).collect::<Vec<_>>()
        )
    });
    match k.fused_computation {
        Some(f) => {
            let fc: &Computation = c.module.comp(f);
            let mut v: Vec<String> = fc
                .order
                .iter()
                .map(|&i| fc.instr(i))
                .filter(|i| i.opcode != Opcode::Parameter)
                .map(|i| i.name.to_string())
                .collect();
            v.sort();
            v
        }
        None => vec![k.name.to_string()],
    }
}

fn kinds(c: &CompiledModule) -> Vec<(KernelKind, Opcode)> {
    c.kernels.iter().map(|k| (k.kind, k.hero)).collect()
}

const CONV_BIAS_RELU: &str = r#"
HloModule cbr, entry_computation_layout={(f32[8,16,16,32]{3,0,2,1}, f32[3,3,32,64]{3,2,1,0}, f32[64]{0})->f32[8,16,16,64]{3,0,2,1}}
ENTRY e {
  x = f32[8,16,16,32] parameter(0)
  k = f32[3,3,32,64] parameter(1)
  b = f32[64] parameter(2)
  conv = f32[8,16,16,64] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  bb = f32[8,16,16,64] broadcast(b), dimensions={3}
  add = f32[8,16,16,64] add(conv, bb)
  zero = f32[] constant(0)
  zeros = f32[8,16,16,64] broadcast(zero), dimensions={}
  ROOT relu = f32[8,16,16,64] maximum(add, zeros)
}
"#;

#[test]
fn convolution_takes_its_epilogue() {
    let m = module(CONV_BIAS_RELU);
    let c = ok(&m, &CompilationConfig::default());
    assert_eq!(kinds(&c), vec![(KernelKind::Output, Opcode::Convolution)]);
    assert_eq!(
        kernel_members(&c, "conv"),
        vec!["add", "bb", "conv", "relu", "zero", "zeros"]
    );
    let k = &c.kernels[0];
    assert_eq!(k.parameters.len(), 3);
    assert_eq!(k.outputs[0].minor_to_major.to_vec(), vec![3, 0, 2, 1]);
    assert_eq!(k.hero_operands[1].dims.to_vec(), vec![3, 3, 32, 64]);
    assert!(print_module(&c.module).contains("kind=kOutput"));

    // Without fusion every op but the constant is a kernel of its own.
    let c = ok(&m, &with_policy(FusionPolicy::None));
    assert_eq!(c.kernels.len(), 5);
    assert!(c.kernels.iter().all(|k| k.kind == KernelKind::Unfused));
    assert!(!print_module(&c.module).contains("fusion("));
    assert_eq!(c.stats.fusions, 0);

    // Forbidding add -> relu stops the epilogue at the add; relu fuses with its broadcast.
    let c = ok(&m, &with_override("add", "relu", false));
    assert_eq!(kernel_members(&c, "conv"), vec!["add", "bb", "conv"]);
    assert_eq!(kernel_members(&c, "relu"), vec!["relu", "zero", "zeros"]);
}

const SOFTMAX: &str = r#"
HloModule sm
max_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[64,1000] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[64] reduce(x, ninf), dimensions={1}, to_apply=max_f
  mxb = f32[64,1000] broadcast(mx), dimensions={0}
  sh = f32[64,1000] subtract(x, mxb)
  ex = f32[64,1000] exponential(sh)
  zero = f32[] constant(0)
  sum = f32[64] reduce(ex, zero), dimensions={1}, to_apply=add_f
  sb = f32[64,1000] broadcast(sum), dimensions={0}
  ROOT y = f32[64,1000] divide(ex, sb)
}
"#;

#[test]
fn reductions_are_input_fusions_that_are_not_recomputed() {
    let m = module(SOFTMAX);
    let c = ok(&m, &CompilationConfig::default());
    // The max reduce stays alone (its producer is a parameter); the sum reduce takes
    // the exp and subtract (duplicating them: `ex` is also read by the divide); the
    // divide re-reads `sum` through a broadcast, so the reduce is not fused into it.
    assert_eq!(
        kinds(&c),
        vec![
            (KernelKind::Unfused, Opcode::Reduce),
            (KernelKind::Input, Opcode::Reduce),
            (KernelKind::Loop, Opcode::Divide),
        ]
    );
    assert_eq!(
        kernel_members(&c, "sum"),
        vec!["ex", "mxb", "sh", "sum", "zero"]
    );
    let y = kernel_members(&c, "y");
    assert!(
        y.contains(&"sb".to_string()) && y.iter().any(|n| n.starts_with("ex")),
        "{y:?}"
    );
    assert!(!y.contains(&"sum".to_string()));

    // Forcing the reduce into the broadcast that re-reads it is honoured.
    let c = ok(&m, &with_override("sum", "sb", true));
    assert_eq!(c.kernels.len(), 2);
    assert!(kernel_members(&c, "y").contains(&"sum".to_string()));
    assert!(c.notes.is_empty(), "{:?}", c.notes);

    // A forced fusion that breaks a hard rule is reported, not applied.
    let c = ok(&m, &with_override("x", "mx", true));
    assert_eq!(c.notes.len(), 1, "{:?}", c.notes);
    assert!(
        c.notes[0].contains("'x'") || c.notes[0].contains("x ->"),
        "{:?}",
        c.notes
    );

    // An override must name a real edge.
    let e = compile(&m, &with_override("x", "y", false)).unwrap_err();
    assert!(matches!(e, CompileError::NotAnEdge { .. }), "{e}");
    assert!(
        e.to_string().contains("'x' is not an operand of 'y'"),
        "{e}"
    );
}

#[test]
fn aggressive_policy_duplicates_expensive_elementwise_producers() {
    let m = module(
        r#"
HloModule agg
ENTRY e {
  x = f32[64,256] parameter(0)
  l = f32[64,256] log(x)
  a = f32[64,256] negate(l)
  b = f32[64,256] abs(l)
  ROOT t = (f32[64,256], f32[64,256]) tuple(a, b)
}
"#,
    );
    // log is expensive: XLA keeps it as its own kernel rather than computing it twice.
    let c = ok(&m, &CompilationConfig::default());
    assert_eq!(c.kernels.len(), 3);
    assert!(c
        .kernels
        .iter()
        .any(|k| k.hero == Opcode::Log && k.kind == KernelKind::Unfused));
    let c = ok(&m, &with_policy(FusionPolicy::Aggressive));
    assert_eq!(c.kernels.len(), 2);
    assert!(c.kernels.iter().all(|k| k.kind == KernelKind::Loop));
}

#[test]
fn cheap_producers_are_duplicated_at_most_15_times() {
    let mut text = String::from(
        "HloModule dup\nENTRY e {\n  x = f32[8,128] parameter(0)\n  n = f32[8,128] negate(x)\n",
    );
    let mut outs = Vec::new();
    for i in 0..20 {
        text.push_str(&format!(
            "  p{i} = f32[8,128] parameter({})\n  m{i} = f32[8,128] multiply(n, p{i})\n",
            i + 1
        ));
        outs.push(format!("m{i}"));
    }
    let shape = vec!["f32[8,128]"; 20].join(", ");
    text.push_str(&format!(
        "  ROOT t = ({shape}) tuple({})\n}}\n",
        outs.join(", ")
    ));
    let m = module(&text);
    let c = ok(&m, &CompilationConfig::default());
    let fused_negates: usize = c
        .kernels
        .iter()
        .filter_map(|k| k.fused_computation)
        .map(|f| {
            let fc = c.module.comp(f);
            fc.order
                .iter()
                .filter(|&&i| fc.instr(i).opcode == Opcode::Negate)
                .count()
        })
        .sum();
    assert_eq!(fused_negates, 15);
    // The other 5 consumers read the negate, which stays a kernel of its own.
    assert!(c
        .kernels
        .iter()
        .any(|k| k.hero == Opcode::Negate && k.kind == KernelKind::Unfused));
    assert_eq!(c.kernels.len(), 21);
}

#[test]
fn fusions_have_at_most_96_operands_and_outputs() {
    let mut text = String::from(
        "HloModule wide\nENTRY e {\n  p0 = f32[8,128] parameter(0)\n  a0 = f32[8,128] negate(p0)\n",
    );
    for i in 1..120 {
        text.push_str(&format!(
            "  p{i} = f32[8,128] parameter({i})\n  a{i} = f32[8,128] add(a{}, p{i})\n",
            i - 1
        ));
    }
    text = text.replace("  a119 =", "  ROOT a119 =");
    text.push_str("}\n");
    let m = module(&text);
    let c = ok(&m, &CompilationConfig::default());
    let params: Vec<usize> = c.kernels.iter().map(|k| k.parameters.len()).collect();
    assert!(params.iter().all(|&p| p < 96), "{params:?}");
    // The root's fusion is full: 94 parameters p + the partial sum = 95 operands.
    let root = c.kernels.iter().find(|k| k.hero_name == "a119").unwrap();
    assert_eq!(root.parameters.len(), 95);
    assert_eq!(c.kernels.len(), 2);
}

#[test]
fn broadcasts_are_cloned_into_every_consumer() {
    let m = module(
        r#"
HloModule bc
ENTRY e {
  p0 = f32[64,256] parameter(0)
  p1 = f32[64,256] parameter(1)
  c = f32[] constant(2)
  b = f32[64,256] broadcast(c), dimensions={}
  x1 = f32[64,256] add(p0, b)
  x2 = f32[64,256] multiply(p1, b)
  ROOT t = (f32[64,256], f32[64,256]) tuple(x1, x2)
}
"#,
    );
    let c = ok(&m, &CompilationConfig::default());
    assert_eq!(
        kinds(&c),
        vec![
            (KernelKind::Loop, Opcode::Add),
            (KernelKind::Loop, Opcode::Multiply)
        ]
    );
    for k in &c.kernels {
        let fc = c.module.comp(k.fused_computation.unwrap());
        assert_eq!(
            fc.order
                .iter()
                .filter(|&&i| fc.instr(i).opcode == Opcode::Broadcast)
                .count(),
            1
        );
        assert_eq!(k.parameters.len(), 1);
    }
    // One clone keeps the name, the other gets a fresh one; names stay unique.
    let text = print_module(&c.module);
    let defs: Vec<&str> = text
        .lines()
        .map(|l| l.trim_start())
        .filter(|l| l.starts_with("%b = ") || l.starts_with("%b."))
        .collect();
    assert_eq!(defs.len(), 2, "{defs:?}");
    assert_ne!(defs[0].split(' ').next(), defs[1].split(' ').next());
}

#[test]
fn tile_configs_attach_to_kernels_and_are_checked() {
    let m = module(CONV_BIAS_RELU);
    let tile = |kernel: KernelRef, out: &[i64], ker: &[i64], inp: &[i64]| CompilationConfig {
        tile: vec![TileEntry {
            kernel,
            bounds: TileBounds {
                output_bounds: out.to_vec(),
                kernel_bounds: ker.to_vec(),
                input_bounds: inp.to_vec(),
            },
        }],
        ..Default::default()
    };
    let c = ok(&m, &CompilationConfig::default());
    let name = c.kernels[0].name.clone();
    // Output [8,16,16,64]{3,0,2,1}: physical dims H, W, N, C = 16, 16, 8, 64, in tiles
    // of (8, 128) on the two minor dims: (16, 16, 1, 1). The filter [3,3,32,64]{3,2,1,0}:
    // (3, 3, 4, 1).
    let c = ok(
        &m,
        &tile(
            KernelRef::Name(name.to_string()),
            &[4, 16, 1, 1],
            &[3, 3, 4, 1],
            &[],
        ),
    );
    assert_eq!(
        c.kernels[0].tile.as_ref().unwrap().output_bounds,
        vec![4, 16, 1, 1]
    );
    let json = c.kernels_json();
    assert!(
        json.contains("\"output_bounds\"") && json.contains("\"kOutput\""),
        "{json}"
    );
    // The cost model checks the bounds: their count against the iteration-space
    // tensor's rank, each against its extent in tiles.
    let target = tpusim::tpu::TpuTarget::v3();
    let estimate_err = |cfg: CompilationConfig| {
        let c = ok(&m, &cfg);
        let p = tpusim::kernels::LoweredProgram::new(&c.module).unwrap();
        p.estimate(&target, &tpusim::kernels::tile_overrides(&c.kernels))
            .unwrap_err()
            .to_string()
    };
    let e = estimate_err(tile(KernelRef::Index(0), &[1, 1, 1, 1, 1], &[], &[]));
    assert!(
        e.contains("`output_bounds` has 5 entries, expected 4"),
        "{e}"
    );
    let e = estimate_err(tile(KernelRef::Index(0), &[17, 1, 1, 1], &[], &[]));
    assert!(
        e.contains("`output_bounds[0]` = 17 is outside 1..=16"),
        "{e}"
    );
    assert!(e.contains(name.as_str()), "{e}");
    let e = estimate_err(tile(KernelRef::Index(0), &[1, 1, 2, 1], &[], &[]));
    assert!(e.contains("`output_bounds[2]` = 2 is outside 1..=1"), "{e}");
    let e = estimate_err(tile(KernelRef::Index(0), &[], &[0, 1, 1, 1], &[]));
    assert!(e.contains("`kernel_bounds[0]` = 0 is outside 1..=3"), "{e}");
    let err = |cfg: CompilationConfig| compile(&m, &cfg).unwrap_err();
    let e = err(tile(KernelRef::Index(3), &[1], &[], &[]));
    assert!(
        matches!(e, CompileError::UnknownKernel { count: 1, .. }),
        "{e}"
    );
    let e = err(tile(KernelRef::Name("fusion.999".into()), &[1], &[], &[]));
    assert!(matches!(e, CompileError::UnknownKernel { .. }), "{e}");
}

#[test]
fn compiled_instructions_share_their_attributes_with_the_input() {
    // Cloning an instruction into the output shares its attributes (no ~650-byte copy);
    // instructions whose attributes change get their own.
    let m = module(
        r#"HloModule m
ENTRY e {
  p = f32[8,128]{1,0} parameter(0), metadata={op_name="p"}
  t = f32[128,8]{1,0} transpose(p), dimensions={1,0}, metadata={op_name="t"}
  ROOT n = f32[128,8]{1,0} negate(t), metadata={op_name="n"}
}
"#,
    );
    let c = ok(&m, &with_policy(FusionPolicy::None));
    let find = |mm: &Module, name: &str| {
        mm.computations
            .values()
            .flat_map(|c| c.order.iter().map(move |&id| c.instr(id)))
            .find(|i| i.name == name)
            .unwrap_or_else(|| panic!("no instruction '{name}'"))
            .clone()
    };
    let (pi, po) = (find(&m, "p"), find(&c.module, "p"));
    assert!(po.attrs.same_as(&pi.attrs));
    let (ni, no) = (find(&m, "n"), find(&c.module, "n"));
    assert!(no.attrs.same_as(&ni.attrs));
    assert_eq!(no.attrs.metadata.as_deref(), Some("{op_name=\"n\"}"));
    // The input is untouched by the compilation.
    assert_eq!(
        find(&m, "t").attrs.dimensions.as_deref(),
        Some(&[1i64, 0][..])
    );
}

#[test]
fn a_forced_fusion_into_an_in_place_buffer_is_refused_and_its_update_fuses() {
    let m = module(
        "HloModule m\n\nENTRY e {\n  p = f32[8,128] parameter(0)\n  u = f32[1,128] parameter(1)\n  i = s32[] parameter(2)\n  buf = f32[8,128] add(p, p)\n  upd = f32[1,128] negate(u)\n  ROOT d = f32[8,128] dynamic-update-slice(buf, upd, i, i)\n}\n",
    );
    // Unforced, the buffer stays out (it is updated in place) and the update joins.
    let c = ok(&m, &CompilationConfig::default());
    assert!(c.notes.is_empty(), "{:?}", c.notes);
    let d = kernel_members(&c, "d");
    assert!(d.contains(&"upd".to_string()), "{d:?}");
    assert!(!d.contains(&"buf".to_string()), "{d:?}");
    // Forced, the same rule refuses it, and says which.
    let c = ok(&m, &with_override("buf", "d", true));
    assert_eq!(c.notes.len(), 1, "{:?}", c.notes);
    assert!(
        c.notes[0].contains("in-place buffer of its consumer"),
        "{:?}",
        c.notes
    );
    assert!(!kernel_members(&c, "d").contains(&"buf".to_string()));
}
