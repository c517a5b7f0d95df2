//! `kernels::compile_program` (the compilation every command costs: kernel bodies, and
//! for a program with loops the output module's skeleton, never the module) against
//! the module `tpusim compile` prints lowered again (`PreparedModule::compile` +
//! `LoweredProgram::new`): on every straight-line program of the corpus and on
//! hand-written modules, the same kernels, lowered the same, with the same estimates.

mod common;

use tpusim::hlo::parse_module;
use tpusim::ir::{Module, Opcode};
use tpusim::kernels::{compile_program, LoweredProgram, TileOverrides};
use tpusim::passes::{CompilationConfig, PreparedModule};
use tpusim::tpu::TpuTarget;

/// Every corpus file that parses: (file name, module).
fn corpus_modules() -> Option<Vec<(String, Module)>> {
    let files = common::corpus_files()?;
    Some(
        files
            .iter()
            .filter_map(|path| {
                let text = std::fs::read_to_string(path).unwrap();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                let module = parse_module(&name, &text).ok()?;
                Some((name, module))
            })
            .collect(),
    )
}

/// `b` is program `a`: the same kernels lowered the same, in the same computations,
/// the same loops and classes, the same estimates on v3 and v5e.
fn assert_same_program(what: &str, a: &LoweredProgram, b: &LoweredProgram) {
    assert_eq!(
        a.kernels.len(),
        b.kernels.len(),
        "{what}: kernel counts differ"
    );
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
            "{what}: estimates differ"
        );
    }
}

/// Compiles `config` both ways and asserts the programs agree; returns the number of
/// lowered kernels.
fn assert_same(what: &str, prepared: &PreparedModule, config: &CompilationConfig) -> usize {
    let full = prepared.compile(config).unwrap();
    let bodies = prepared.compile_bodies(config).unwrap();
    assert_eq!(bodies.kernels, full.kernels, "{what}: kernel lists differ");
    assert_eq!(bodies.stats, full.stats, "{what}: counters differ");
    assert_eq!(bodies.bodies.len(), bodies.kernels.len(), "{what}");
    for (k, b) in bodies.kernels.iter().zip(bodies.bodies.iter()) {
        let expect = match k.fused_computation {
            Some(_) => k.instruction_count + b.leaves as usize,
            None => b.leaves as usize + 1,
        };
        assert_eq!(b.instrs.len(), expect, "{what}: body of {}", k.name);
        assert_eq!(
            b.single,
            k.fused_computation.is_none(),
            "{what}: {}",
            k.name
        );
    }
    let a = LoweredProgram::new(&full.module).unwrap();
    let b = compile_program(prepared, config).unwrap();
    assert_eq!(b.kernels, full.kernels, "{what}");
    assert_eq!(b.notes, full.notes, "{what}");
    assert_same_program(what, &a, &b.program);
    let none = TileOverrides::default();
    for target in [TpuTarget::v3(), TpuTarget::v5e()] {
        assert!(a.estimate(&target, &none).is_ok(), "{what}");
    }
    a.kernels.len()
}

#[test]
fn bodies_lower_like_the_compiled_module_on_the_corpus() {
    if !common::has(
        common::Need::Shared,
        "bodies_lower_like_the_compiled_module_on_the_corpus",
    ) {
        return;
    }
    let Some(modules) = corpus_modules() else {
        return;
    };
    let mut straight = Vec::new();
    let mut kernels = 0;
    for (name, module) in &modules {
        let Ok(prepared) = PreparedModule::new(module) else {
            continue;
        };
        if !prepared.is_straight_line() {
            continue;
        }
        let mut configs = vec![CompilationConfig::default()];
        configs.extend((0..3).map(|s| CompilationConfig::random_layouts(module, s)));
        for (i, c) in configs.iter().enumerate() {
            if prepared.compile(c).is_err() {
                continue;
            }
            kernels += assert_same(&format!("{name} config {i}"), &prepared, c);
        }
        straight.push(name.as_str());
    }
    for must in [
        "resnet50_train_b8.hlo",
        "resnet18_infer_b8.hlo",
        "bert_small_train_b8s128.hlo",
        "effnet_b0_train_b4.hlo",
        "mlp_train.hlo",
    ] {
        assert!(straight.contains(&must), "{must} is straight-line");
    }
    for not in ["lstm_train.hlo", "resnet50_train_b8.optimized.hlo"] {
        assert!(!straight.contains(&not), "{not} is not straight-line");
    }
    eprintln!(
        "{} straight-line programs of {}, {kernels} kernels compared",
        straight.len(),
        modules.len()
    );
    assert!(kernels > 10_000, "{kernels}");
}

#[test]
fn compile_program_equals_the_module_path_on_every_corpus_file() {
    // straight-line or not (loops, conditionals, async operations, input fusions: the
    // skeleton path)
    if !common::has(
        common::Need::Shared,
        "compile_program_equals_the_module_path_on_every_corpus_file",
    ) {
        return;
    }
    let Some(modules) = corpus_modules() else {
        return;
    };
    let (mut programs, mut skeletons, mut loops) = (0, 0, 0);
    for (name, module) in &modules {
        let Ok(prepared) = PreparedModule::new(module) else {
            continue;
        };
        for seed in [None, Some(3)] {
            let config = match seed {
                None => CompilationConfig::default(),
                Some(s) => CompilationConfig::random_layouts(module, s),
            };
            let Ok(full) = prepared.compile(&config) else {
                continue;
            };
            let what = format!("{name} seed {seed:?}");
            let a = LoweredProgram::new(&full.module);
            let b = compile_program(&prepared, &config);
            let (a, b) = match (a, b) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(x), Err(y)) => {
                    assert_eq!(x.to_string(), y.to_string(), "{what}");
                    continue;
                }
                (x, y) => panic!("{what}: {:?} / {:?}", x.err(), y.err()),
            };
            assert_eq!(b.kernels, full.kernels, "{what}");
            assert_eq!(b.stats, full.stats, "{what}");
            assert_same_program(&what, &a, &b.program);
            programs += 1;
            skeletons += usize::from(!prepared.is_straight_line());
            loops += a.loops.len();
        }
    }
    eprintln!("{programs} programs compared, {skeletons} through the skeleton, {loops} loops");
    assert!(skeletons >= 40, "{skeletons}");
    assert!(loops >= 4, "{loops}");
}

#[test]
fn bodies_of_a_small_module_by_hand() {
    // dot(transpose-free weights) + bias + relu, and a reduction: one kOutput fusion
    // (dot with its epilogue), one kInput fusion (reduce) and the parameters.
    let text = r#"HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[128,256] parameter(0)
  w = f32[256,512] parameter(1)
  d = f32[128,512] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[] constant(0)
  zb = f32[128,512] broadcast(z), dimensions={}
  r = f32[128,512] maximum(d, zb)
  ROOT s = f32[128] reduce(r, z), dimensions={1}, to_apply=add
}
"#;
    let module = parse_module("m.hlo", text).unwrap();
    let prepared = PreparedModule::new(&module).unwrap();
    assert!(prepared.is_straight_line());
    let c = prepared
        .compile_bodies(&CompilationConfig::default())
        .unwrap();
    // every kernel's body: leaves first, then the instructions, root inside
    for (k, b) in c.kernels.iter().zip(c.bodies.iter()) {
        assert!(
            b.root >= b.leaves && (b.root as usize) < b.instrs.len(),
            "{}",
            k.name
        );
        for (i, ins) in b.instrs.iter().enumerate() {
            assert!(
                ins.operands.iter().all(|&o| o.index() < i),
                "{}: ids in order",
                k.name
            );
        }
        if !b.single {
            assert_eq!(b.leaves as usize, k.parameters.len(), "{}", k.name);
            let hero = (0..b.instrs.len())
                .find(|&i| b.name(i) == k.hero_name)
                .unwrap();
            assert_eq!(b.opcode(hero), k.hero, "{}", k.name);
            for i in 0..b.leaves as usize {
                assert_eq!(b.opcode(i), Opcode::Parameter, "{}", k.name);
                assert_eq!(b.attrs(i).parameter_number, Some(i as i64), "{}", k.name);
            }
        }
    }
    let n = assert_same("small", &prepared, &CompilationConfig::default());
    assert_eq!(n, c.kernels.len());
    // a layout for the dot's output that the compiler would not choose: same again
    let json = r#"{"layout":[{"node":"d","output":[0,1]}]}"#;
    let cfg = CompilationConfig::from_json_str(json).unwrap();
    assert_same("small, d column-major", &prepared, &cfg);
}

#[test]
fn control_flow_is_not_straight_line() {
    let text = r#"HloModule w

cond {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  v = f32[8] get-tuple-element(p), index=1
  e = f32[8] exponential(v)
  ROOT t = (s32[], f32[8]) tuple(j, e)
}

ENTRY e {
  x = f32[8] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[8]) tuple(z, x)
  w = (s32[], f32[8]) while(t), condition=cond, body=body
  ROOT r = f32[8] get-tuple-element(w), index=1
}
"#;
    let module = parse_module("w.hlo", text).unwrap();
    let prepared = PreparedModule::new(&module).unwrap();
    assert!(!prepared.is_straight_line());
    // the bodies are listed, but they are not the whole program
    let c = prepared
        .compile_bodies(&CompilationConfig::default())
        .unwrap();
    assert!(!c.is_straight_line());
    let full = prepared.compile(&CompilationConfig::default()).unwrap();
    assert_eq!(c.kernels, full.kernels);
    // compile_program walks the compilation's skeleton: the loop is there, 4 trips
    let p = compile_program(&prepared, &CompilationConfig::default()).unwrap();
    assert_eq!(p.program.loops.len(), 1);
    assert_eq!(p.program.loops[0].1, 4);
    let direct = LoweredProgram::new(&full.module).unwrap();
    assert_same_program("while loop", &direct, &p.program);
    let none = TileOverrides::default();
    assert!(direct.estimate(&TpuTarget::v3(), &none).is_ok());
}
