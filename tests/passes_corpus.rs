//! Compile every pre-optimisation JAX module of the shared corpus with the default
//! configuration (and a few random layout configurations) and check that the result is
//! a valid, equivalent module with plausible kernels.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use tpusim::hlo::{parse_module, print_module};
use tpusim::ir::{CallRole, Module, Opcode};
use tpusim::passes::{compile, verify::verify, CompilationConfig, KernelKind, SiteRole};

/// The corpus modules, or `None` after printing why `test` skips.
fn corpus(test: &str) -> Option<Vec<(String, Module)>> {
    let dir = common::shared(test)?;
    let jax = dir.join("hlo_corpus/jax");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&jax)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.ends_with(".hlo") && !n.ends_with(".optimized.hlo")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .hlo files in {}", jax.display());
    Some(
        files
            .into_iter()
            .map(|f| {
                let text = std::fs::read_to_string(&f).unwrap();
                let name = f.file_stem().unwrap().to_str().unwrap().to_string();
                let m = parse_module(&f.display().to_string(), &text).unwrap();
                (name, m)
            })
            .collect(),
    )
}

/// Opcodes that need not survive compilation (no computation of their own, or folded).
fn trivial(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Parameter
            | Opcode::Constant
            | Opcode::GetTupleElement
            | Opcode::Tuple
            | Opcode::Call
            | Opcode::Bitcast
            | Opcode::AfterAll
    )
}

/// (computation name, instruction name, opcode) of every instruction the module's entry
/// result depends on, looking through calls, while loops and conditionals.
fn live_instructions(m: &Module) -> Vec<(String, String, Opcode)> {
    let mut out = Vec::new();
    let mut seen_comp = HashSet::new();
    let mut stack = vec![m.entry];
    while let Some(c) = stack.pop() {
        if !seen_comp.insert(c) {
            continue;
        }
        let comp = m.comp(c);
        let mut live = HashSet::new();
        let mut work = vec![comp.root];
        while let Some(id) = work.pop() {
            if !live.insert(id) {
                continue;
            }
            work.extend(comp.operands(id));
            let ins = comp.instr(id);
            for &(role, callee) in &ins.attrs.called {
                let flat = matches!(
                    (ins.opcode, role),
                    (Opcode::Call, _) | (Opcode::While, _) | (Opcode::Conditional, _)
                );
                if flat {
                    stack.push(callee);
                }
            }
        }
        for &id in &comp.order {
            if live.contains(&id) {
                let ins = comp.instr(id);
                out.push((comp.name.clone(), ins.name.to_string(), ins.opcode));
            }
        }
    }
    out
}

/// Names of a compiled module with their opcodes.
fn names(m: &Module) -> HashMap<String, Opcode> {
    let mut h = HashMap::new();
    for c in m.computations.values() {
        for &id in &c.order {
            let i = c.instr(id);
            h.insert(i.name.to_string(), i.opcode);
        }
    }
    h
}

/// The instruction (or an inlined clone `name.N`) exists with a compatible opcode.
fn present(
    names: &HashMap<String, Opcode>,
    by_prefix: &HashMap<&str, Vec<Opcode>>,
    name: &str,
    op: Opcode,
) -> bool {
    let ok = |o: Opcode| {
        o == op || (o == Opcode::Bitcast && matches!(op, Opcode::Reshape | Opcode::Transpose))
    };
    if names.get(name).copied().map(ok).unwrap_or(false) {
        return true;
    }
    by_prefix
        .get(name)
        .map(|v| v.iter().any(|&o| ok(o)))
        .unwrap_or(false)
}

#[test]
fn default_compile_is_valid_and_complete() {
    let Some(mods) = corpus("default_compile_is_valid_and_complete") else {
        return;
    };
    let out_dir = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    for (name, m) in &mods {
        let c = compile(m, &CompilationConfig::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        verify(&c.module).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Prints and reads back to the same module.
        let text = print_module(&c.module);
        let back = parse_module(name, &text).unwrap_or_else(|e| panic!("{name}: reparse: {e}"));
        assert!(
            back == c.module,
            "{name}: print/parse round trip changed the module"
        );
        let path = out_dir.path().join(format!("{name}.hlo"));
        std::fs::write(&path, &text).unwrap();
        written.push(path);

        // Same entry signature (the entry layout is fixed, only tiles are added).
        let (e0, e1) = (m.entry(), c.module.entry());
        assert_eq!(e0.params.len(), e1.params.len(), "{name}: parameter count");
        let given = m.attrs.entry_computation_layout.as_ref();
        for (k, (&a, &b)) in e0.params.iter().zip(&e1.params).enumerate() {
            let (sa, sb) = (&e0.instr(a).shape, &e1.instr(b).shape);
            assert!(
                sa.compatible(sb),
                "{name}: parameter {k} changed: {sa:?} vs {sb:?}"
            );
            if let Some((ps, _)) = given {
                let want: Vec<_> = ps[k].leaves().iter().map(|l| l.minor_to_major()).collect();
                let got: Vec<_> = sb.leaves().iter().map(|l| l.minor_to_major()).collect();
                assert_eq!(want, got, "{name}: parameter {k} layout changed");
            }
        }
        let (ra, rb) = (&e0.instr(e0.root).shape, &e1.instr(e1.root).shape);
        assert!(ra.compatible(rb), "{name}: result shape changed");
        if let Some((_, r)) = given {
            let want: Vec<_> = r.leaves().iter().map(|l| l.minor_to_major()).collect();
            let got: Vec<_> = rb.leaves().iter().map(|l| l.minor_to_major()).collect();
            assert_eq!(want, got, "{name}: result layout changed");
        }

        // Every live non-trivial instruction is still there (inside a fusion or not).
        let have = names(&c.module);
        let mut by_prefix: HashMap<&str, Vec<Opcode>> = HashMap::new();
        for (n, &op) in &have {
            if let Some(p) = n.rfind('.') {
                if n[p + 1..].bytes().all(|b| b.is_ascii_digit()) {
                    by_prefix.entry(&n[..p]).or_default().push(op);
                }
            }
        }
        let mut checked = 0;
        for (comp, iname, op) in live_instructions(m) {
            if trivial(op) {
                continue;
            }
            checked += 1;
            assert!(
                present(&have, &by_prefix, &iname, op),
                "{name}: {comp}/{iname} ({op}) is missing from the compiled module"
            );
        }
        assert!(checked > 10, "{name}: only {checked} instructions checked");

        // Kernels: each names an instruction of its computation; fusions hold their hero.
        assert!(!c.kernels.is_empty(), "{name}: no kernels");
        for (i, k) in c.kernels.iter().enumerate() {
            assert_eq!(k.index, i);
            let comp = c.module.comp(k.computation);
            assert_eq!(comp.name, k.computation_name);
            let ins = comp.instr(k.instr_id());
            assert_eq!(ins.name, k.name, "{name}: kernel {i}");
            match k.fused_computation {
                Some(f) => {
                    assert_eq!(ins.opcode, Opcode::Fusion);
                    assert_eq!(ins.attrs.called_with(CallRole::Calls), Some(f));
                    let fc = c.module.comp(f);
                    assert_eq!(fc.len() - fc.params.len(), k.instruction_count);
                    assert_eq!(fc.params.len(), k.parameters.len());
                    assert!(
                        fc.find(&k.hero_name).is_some(),
                        "{name}: hero {} not in {}",
                        k.hero_name,
                        fc.name
                    );
                    assert_eq!(fc.instr(fc.find(&k.hero_name).unwrap()).opcode, k.hero);
                    assert_ne!(k.kind, KernelKind::Unfused);
                }
                None => {
                    assert_eq!(k.kind, KernelKind::Unfused);
                    assert_eq!(ins.opcode, k.hero);
                    assert_eq!(k.instruction_count, 1);
                }
            }
            // Every dot/convolution kernel is kOutput.
            if k.hero.is_mxu() {
                assert_eq!(
                    k.kind,
                    KernelKind::Output,
                    "{name}: {} is not kOutput",
                    k.name
                );
            }
        }
        // The cost model's compilation (no module) gives the same kernels.
        let prepared = tpusim::passes::PreparedModule::new(m).unwrap();
        let dry = prepared
            .compile_bodies(&CompilationConfig::default())
            .unwrap();
        assert_eq!(dry.kernels, c.kernels, "{name}: compile_bodies differs");
        assert_eq!(dry.stats, c.stats);
        assert_eq!(c.stats.output_instructions, c.module.instruction_count());
        // JSON view.
        let v: serde_json::Value = serde_json::from_str(&c.kernels_json()).unwrap();
        assert_eq!(
            v["kernels"].as_array().map(|a| a.len()),
            Some(c.kernels.len())
        );
    }
    oracle(&written);
}

/// XLA's own parser must accept the printed modules (needs python3 with jaxlib).
fn oracle(files: &[PathBuf]) {
    if !common::has(
        common::Need::Jax,
        "the XLA oracle check of the compiled corpus",
    ) {
        return;
    }
    let Some(dir) = common::shared_dir() else {
        return;
    };
    let text = common::xla_oracle(&dir, files);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), files.len(), "oracle output: {text}");
    for l in lines {
        assert!(l.starts_with("ok\t"), "XLA rejects a compiled module: {l}");
    }
}

fn find<'a>(mods: &'a [(String, Module)], name: &str) -> Option<&'a Module> {
    mods.iter().find(|(n, _)| n == name).map(|(_, m)| m)
}

#[test]
fn resnet50_inference_has_one_output_fusion_per_convolution() {
    let Some(mods) = corpus("resnet50_inference_has_one_output_fusion_per_convolution") else {
        return;
    };
    let Some(m) = find(&mods, "resnet50_infer_b4") else {
        println!("skipping: resnet50_infer_b4.hlo not in the corpus");
        return;
    };
    let convs: usize = m
        .computations
        .values()
        .map(|c| {
            c.order
                .iter()
                .filter(|&&i| c.instr(i).opcode == Opcode::Convolution)
                .count()
        })
        .sum();
    assert_eq!(convs, 53);
    let c = compile(m, &CompilationConfig::default()).unwrap();
    let conv_kernels: Vec<_> = c
        .kernels
        .iter()
        .filter(|k| k.hero == Opcode::Convolution)
        .collect();
    assert_eq!(conv_kernels.len(), 53);
    let mut heroes = HashSet::new();
    for k in &conv_kernels {
        assert_eq!(k.kind, KernelKind::Output);
        assert!(
            heroes.insert(k.hero_name.clone()),
            "two kernels with hero {}",
            k.hero_name
        );
        let fc = c.module.comp(k.fused_computation.unwrap());
        let n = fc
            .order
            .iter()
            .filter(|&&i| fc.instr(i).opcode == Opcode::Convolution)
            .count();
        assert_eq!(n, 1, "{} holds {n} convolutions", k.name);
        // Layouts: activations NHWC with the feature dim minor.
        let out = &k.outputs[0];
        assert_eq!(
            out.minor_to_major[0], 3,
            "{}: feature dim not minor",
            k.name
        );
        assert_eq!(out.tiles.len(), 1);
    }
    // Convolutions whose only user is elementwise get it fused (the epilogue).
    for comp in m.computations.values() {
        for &id in &comp.order {
            if comp.instr(id).opcode != Opcode::Convolution {
                continue;
            }
            let users = comp.users(id);
            if users.len() == 1 && comp.instr(users[0]).opcode.is_elementwise() {
                let u = &comp.instr(users[0]).name;
                let k = conv_kernels
                    .iter()
                    .find(|k| k.hero_name == comp.instr(id).name)
                    .unwrap();
                let fc = c.module.comp(k.fused_computation.unwrap());
                assert!(
                    fc.find(u).is_some(),
                    "epilogue {u} not fused with {}",
                    comp.instr(id).name
                );
            }
        }
    }
    // The kernel count is plausible: at least one kernel per convolution, and fewer than
    // half of the instructions.
    assert!(
        c.kernels.len() >= 53 && c.kernels.len() < m.instruction_count() / 2,
        "{} kernels",
        c.kernels.len()
    );
}

#[test]
fn bert_dots_are_output_fusions_with_bias_epilogue() {
    let Some(mods) = corpus("bert_dots_are_output_fusions_with_bias_epilogue") else {
        return;
    };
    let Some(m) = find(&mods, "bert_base_infer_b8s128") else {
        println!("skipping: bert_base_infer_b8s128.hlo not in the corpus");
        return;
    };
    let c = compile(m, &CompilationConfig::default()).unwrap();
    let dots: Vec<_> = c.kernels.iter().filter(|k| k.hero == Opcode::Dot).collect();
    assert_eq!(dots.len(), 25);
    // Most dense layers end with a bias add fused into the dot's kernel.
    let with_add = dots
        .iter()
        .filter(|k| {
            let fc = c.module.comp(k.fused_computation.unwrap());
            fc.order.iter().any(|&i| fc.instr(i).opcode == Opcode::Add)
        })
        .count();
    assert!(
        with_add >= 12,
        "only {with_add} dot kernels have a fused add"
    );
    // Reductions (softmax, layer norm) are kInput kernels or unfused reduces.
    assert!(c
        .kernels
        .iter()
        .any(|k| k.kind == KernelKind::Input && k.hero == Opcode::Reduce));
}

#[test]
fn lstm_while_loop_kernels_carry_the_trip_count() {
    let Some(mods) = corpus("lstm_while_loop_kernels_carry_the_trip_count") else {
        return;
    };
    let Some(m) = find(&mods, "lstm_train") else {
        println!("skipping: lstm_train.hlo not in the corpus");
        return;
    };
    let c = compile(m, &CompilationConfig::default()).unwrap();
    let in_loops: Vec<_> = c.kernels.iter().filter(|k| k.call_site.is_some()).collect();
    assert!(!in_loops.is_empty());
    for k in &in_loops {
        let s = k.call_site.as_ref().unwrap();
        assert!(matches!(s.role, SiteRole::Body | SiteRole::Condition));
        // The LSTM scans 32 time steps.
        assert_eq!(s.trip_count, Some(32), "{} in {}", k.name, s.instruction);
    }
    // Kernels of a body come right after the kernels before the while in the entry.
    let first_loop = c
        .kernels
        .iter()
        .position(|k| k.call_site.is_some())
        .unwrap();
    assert!(c.kernels[..first_loop]
        .iter()
        .all(|k| k.computation == c.module.entry));
}

#[test]
fn random_layouts_compile_to_valid_modules() {
    let Some(mods) = corpus("random_layouts_compile_to_valid_modules") else {
        return;
    };
    for (name, m) in &mods {
        for seed in 0..3 {
            let cfg = CompilationConfig::random_layouts(m, seed);
            let c = compile(m, &cfg).unwrap_or_else(|e| panic!("{name} seed {seed}: {e}"));
            verify(&c.module).unwrap_or_else(|e| panic!("{name} seed {seed}: {e}"));
            let text = print_module(&c.module);
            let back =
                parse_module(name, &text).unwrap_or_else(|e| panic!("{name} seed {seed}: {e}"));
            assert!(back == c.module, "{name} seed {seed}: round trip");
            // Deterministic.
            let again = compile(m, &cfg).unwrap();
            assert_eq!(
                print_module(&again.module),
                text,
                "{name} seed {seed}: not deterministic"
            );
            // A configured convolution input layout is what the convolution reads.
            let table = tpusim::passes::NodeTable::new(m);
            for e in &cfg.layout {
                let tpusim::passes::NodeRef::Index(i) = e.node else {
                    continue;
                };
                let (ci, id) = table.nodes[i];
                let ins = m.comp(ci).instr(id);
                if ins.opcode != Opcode::Convolution || e.input.is_empty() || ci != m.entry {
                    continue;
                }
                let k = c.kernels.iter().find(|k| k.hero_name == ins.name).unwrap();
                assert_eq!(
                    k.hero_operands[0].minor_to_major.to_vec(),
                    e.input,
                    "{name}: {}",
                    ins.name
                );
                if !e.kernel.is_empty() {
                    assert_eq!(k.hero_operands[1].minor_to_major.to_vec(), e.kernel);
                }
            }
        }
    }
}

#[test]
fn optimized_and_xla_corpus_modules_compile_to_valid_modules() {
    let Some(dir) = common::shared("optimized_and_xla_corpus_modules_compile_to_valid_modules")
    else {
        return;
    };
    let mut files: Vec<PathBuf> = Vec::new();
    for sub in ["hlo_corpus/jax", "hlo_corpus/xla"] {
        let Ok(rd) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let n = p
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("")
                .to_string();
            let small = e.metadata().map(|m| m.len() < 1_000_000).unwrap_or(false);
            if (n.ends_with(".optimized.hlo") || (sub.ends_with("xla") && n.ends_with(".hlo")))
                && small
            {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut compiled = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, part) in tpusim::hlo::split_modules(&text) {
            let Ok(m) = parse_module(&f.display().to_string(), part) else {
                continue;
            };
            let what = format!("{}:{line}", f.display());
            let c = compile(&m, &CompilationConfig::default())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            verify(&c.module).unwrap_or_else(|e| panic!("{what}: {e}"));
            let back = parse_module(&what, &print_module(&c.module))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(back == c.module, "{what}: round trip");
            compiled += 1;
        }
    }
    assert!(compiled >= 20, "only {compiled} modules compiled");
}
