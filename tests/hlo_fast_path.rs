//! The printer-form fast path (`fast_batch` / `fast_head` in grammar/hlo.pest) must
//! give exactly what the general rules give: the same IR for every corpus module, and
//! the same IR or the same error for thousands of mutated modules. Seeded.

mod common;

use tpusim::hlo::parser::{parse_module_general, parse_module_stats};
use tpusim::hlo::{parse_module, split_modules};

fn agree(name: &str, text: &str) -> Result<(), String> {
    let fast = parse_module(name, text);
    let general = parse_module_general(name, text);
    match (&fast, &general) {
        (Ok(a), Ok(b)) if a == b && positions(a) == positions(b) => Ok(()),
        (Err(a), Err(b)) if a.to_string() == b.to_string() => Ok(()),
        _ => Err(format!(
            "{name}: fast path {:?} but general rules {:?}",
            fast.as_ref().map(|_| "ok").map_err(|e| e.to_string()),
            general.as_ref().map(|_| "ok").map_err(|e| e.to_string())
        )),
    }
}

/// Source positions of every computation and instruction (not part of IR equality).
fn positions(m: &tpusim::ir::Module) -> Vec<(u32, u32)> {
    let mut v = Vec::new();
    for c in m.computations.values() {
        v.push((c.line, 0));
        for &id in &c.order {
            v.push((c.graph[id].line, c.graph[id].col));
        }
    }
    v
}

#[test]
fn samples_take_the_fast_path_and_agree() {
    for f in common::sample_files() {
        let text = std::fs::read_to_string(&f).unwrap();
        let name = f.display().to_string();
        agree(&name, &text).unwrap();
        let (m, st) = parse_module_stats(&name, &text).unwrap();
        // Every computation of XLA's printed form is read by the fast rules.
        assert_eq!(st.general, 0, "{name}: {st:?}");
        assert_eq!(st.fast, m.computations.len(), "{name}");
    }
}

#[test]
fn corpus_modules_agree() {
    if !common::has(common::Need::Shared, "corpus_modules_agree") {
        return;
    }
    let Some(files) = common::corpus_files() else {
        return;
    };
    let (mut fast, mut general) = (0, 0);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (line, part) in split_modules(&text) {
            let name = format!("{}#{line}", f.display());
            agree(&name, part).unwrap();
            let (_, st) = parse_module_stats(&name, part).unwrap();
            fast += st.fast;
            general += st.general;
        }
    }
    // The JAX files are XLA-printed; the XLA test files are partly hand-written.
    assert!(fast > 5 * general, "fast {fast}, general {general}");
}

/// Bytes that matter to the fast path's token scans.
const INTERESTING: &[u8] = b"{}()[],=:%\"/*\n -0123456789xT_<>?\\.";

#[test]
fn mutated_modules_agree() {
    let mut inputs: Vec<String> = Vec::new();
    for f in common::sample_files() {
        let t = std::fs::read_to_string(&f).unwrap();
        if t.len() < 50_000 {
            inputs.push(t);
        }
    }
    // A slice of XLA's optimised form (metadata, backend_config JSON, /*index=N*/).
    let big = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("hlo_samples/resnet50_train_b8.optimized.hlo"),
    )
    .unwrap();
    for at in ["%fused_computation.444 ", "%fused_computation.182 "] {
        let start = big.find(at).unwrap();
        let end = start + big[start..].find("\n}\n").unwrap() + 3;
        inputs.push(big[start..end].to_string());
    }
    if let Some(i) = big.find("  %ynn_fusion.184 = ") {
        let line_end = i + big[i..].find('\n').unwrap();
        let params: String = (0..3)
            .map(|k| format!("  %p{k} = f32[512]{{0}} parameter({k})\n"))
            .collect();
        let line = big[i..line_end]
            .replace("%constant.309", "%p0")
            .replace("%broadcast_subtract_fusion.27", "%p1")
            .replace("%broadcast_multiply_fusion.41", "%p2")
            .replace("calls=%fused_computation.184", "calls=%f");
        inputs.push(format!(
            "%f (a: f32[512]) -> f32[512] {{\n  ROOT %a = f32[512]{{0}} parameter(0)\n}}\n\nENTRY %e (p0: f32[512], p1: f32[512], p2: f32[512]) -> f32[512] {{\n{params}{line}\n}}\n"
        ));
    }
    for (k, t) in inputs.iter().enumerate() {
        agree(&format!("input{k}"), t).unwrap();
    }
    let mut rng = common::SplitMix(0xFA57);
    let mut ok = 0;
    for round in 0..3000 {
        let src = &inputs[round % inputs.len()];
        let mut bytes = src.as_bytes().to_vec();
        for _ in 0..1 + rng.below(2) {
            let i = rng.below(bytes.len());
            let c = INTERESTING[rng.below(INTERESTING.len())];
            match rng.below(3) {
                0 => bytes[i] = c,
                1 => bytes.insert(i, c),
                _ => {
                    bytes.remove(i);
                }
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        agree(&format!("round{round}"), &text).unwrap();
        ok += parse_module("m", &text).is_ok() as usize;
    }
    // Some mutations keep the module valid (inside strings, digits); most do not.
    assert!(ok > 100 && ok < 2500, "{ok} of 3000 mutants parse");
}

#[test]
fn newlines_inside_tokens_keep_positions() {
    // The fast path numbers lines by its structure; a newline inside a token must not
    // shift the positions of later instructions.
    for body in [
        "  %p0 = f32[2]{0} parameter\n(0)\n  ROOT %n = f32[2]{0} negate(%p0)",
        "  %p0 = f32[2]{0} parameter(0), metadata={op_name=\"a\nb\"}\n  ROOT %n = f32[2]{0} negate(%p0)",
        "  %p0 = f32[2]{0} parameter(0), backend_config={\"a\":\n{}}\n  ROOT %n = f32[2]{0} negate(%p0)",
        "  %p0 = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} negate(%p0)",
    ] {
        let text = format!("ENTRY %e (p0: f32[2]) -> f32[2] {{\n{body}\n}}\n");
        agree("newlines", &text).unwrap();
        let m = parse_module("newlines", &text).unwrap();
        let c = &m.computations[m.entry];
        let root = &c.graph[c.root];
        let expected = 2 + body.matches('\n').count() as u32;
        assert_eq!((root.line, root.col), (expected, 3), "{body:?}");
    }
}

#[test]
fn compiled_modules_with_tiled_layouts_agree() {
    // Our own compiler's output: fusions, copies, bitcasts and TPU-tiled layouts
    // (`{1,0:T(8,128)}`), which the fast path checks through the grammar's shape rule.
    for f in common::sample_files() {
        let text = std::fs::read_to_string(&f).unwrap();
        if text.len() > 100_000 {
            continue;
        }
        let m = parse_module("in", &text).unwrap();
        for seed in [None, Some(3)] {
            let cfg = match seed {
                None => tpusim::passes::CompilationConfig::default(),
                Some(s) => tpusim::passes::CompilationConfig::random_layouts(&m, s),
            };
            let compiled = tpusim::passes::compile(&m, &cfg).unwrap();
            let printed = tpusim::hlo::print_module(&compiled.module);
            assert!(printed.contains(":T("), "{}: no tiled layout", f.display());
            let name = format!("{} compiled {seed:?}", f.display());
            agree(&name, &printed).unwrap();
            let (_, st) = parse_module_stats(&name, &printed).unwrap();
            assert_eq!(st.general, 0, "{name}: {st:?}");
        }
    }
}

#[test]
fn shapes_written_alike_are_shared_and_copied_on_write() {
    let text = "HloModule m\n\nENTRY e {\n  p = f32[8,128]{1,0} parameter(0)\n  a = f32[8,128]{1,0} negate(p)\n  b = f32[8,128]{0,1} copy(a)\n  ROOT c = f32[8,128]{1,0} add(a, a)\n}\n";
    let mut m = parse_module("t.hlo", text).unwrap();
    // Read by the fast path (which shares shapes by their text).
    let stats = parse_module_stats("t.hlo", text).unwrap().1;
    assert_eq!((stats.fast, stats.general), (1, 0));
    let e = m.entry();
    let id = |n: &str| e.find(n).unwrap();
    let (p, a, b, c) = (id("p"), id("a"), id("b"), id("c"));
    // The same text gives the same shape; another layout another one.
    assert!(e.instr(p).shape.same_as(&e.instr(a).shape));
    assert!(e.instr(a).shape.same_as(&e.instr(c).shape));
    assert!(!e.instr(a).shape.same_as(&e.instr(b).shape));
    // Writing to one instruction's shape leaves the others as they were.
    let e = m.entry_mut();
    e.instr_mut(a).shape.clear_layouts();
    let e = m.entry();
    assert_eq!(e.instr(a).shape.as_array().unwrap().layout, None);
    assert_eq!(
        e.instr(c)
            .shape
            .as_array()
            .unwrap()
            .layout
            .as_ref()
            .unwrap()
            .minor_to_major[..],
        [1, 0]
    );
    assert!(e.instr(p).shape.same_as(&e.instr(c).shape));
}
