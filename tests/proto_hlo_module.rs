//! For every `hlo_corpus/jax/*.hlo.pb`, the IR read from the proto equals the
//! IR parsed from its `.hlo` text twin (names, opcodes, shapes, layouts,
//! operands, attributes, entry layout).

mod proto_common;

use proto_common::{corpus_pbs, jax_corpus};
use tpusim::ir::Module;
use tpusim::proto::module_from_proto_bytes;

/// The text front end reports an absent stack-frame section as `Some("")`;
/// a proto has none. Both mean "no section".
fn norm(mut m: Module) -> Module {
    if m.stack_frames.as_deref() == Some("") {
        m.stack_frames = None;
    }
    m
}

/// First difference between two modules, for a readable failure message.
fn first_difference(a: &Module, b: &Module) -> String {
    if a.name != b.name {
        return format!("module name {:?} vs {:?}", a.name, b.name);
    }
    if a.attrs != b.attrs {
        return format!("module attrs\n  {:?}\nvs\n  {:?}", a.attrs, b.attrs);
    }
    if a.stack_frames != b.stack_frames {
        return format!("stack_frames {:?} vs {:?}", a.stack_frames, b.stack_frames);
    }
    if a.entry != b.entry {
        return format!("entry {} vs {}", a.entry, b.entry);
    }
    let an: Vec<&String> = a.computations.keys().collect();
    let bn: Vec<&String> = b.computations.keys().collect();
    if an != bn {
        return format!("computation names {an:?} vs {bn:?}");
    }
    for (name, ca) in &a.computations {
        let cb = &b.computations[name];
        if ca == cb {
            continue;
        }
        if ca.len() != cb.len() {
            return format!("{name}: {} vs {} instructions", ca.len(), cb.len());
        }
        for (&x, &y) in ca.order.iter().zip(&cb.order) {
            let (ix, iy) = (ca.instr(x), cb.instr(y));
            if ix != iy {
                return format!("{name}: instruction\n  {ix:?}\nvs\n  {iy:?}");
            }
            let ox: Vec<&str> = ca
                .operands(x)
                .iter()
                .map(|&o| ca.instr(o).name.as_str())
                .collect();
            let oy: Vec<&str> = cb
                .operands(y)
                .iter()
                .map(|&o| cb.instr(o).name.as_str())
                .collect();
            if ox != oy {
                return format!("{name}: {} operands {ox:?} vs {oy:?}", ix.name);
            }
        }
        return format!(
            "{name}: root {} vs {} / thread {:?} vs {:?}",
            ca.instr(ca.root).name,
            cb.instr(cb.root).name,
            ca.execution_thread,
            cb.execution_thread
        );
    }
    "modules differ (params?)".to_string()
}

#[test]
fn proto_ir_equals_text_ir_for_every_corpus_module() {
    let Some(dir) = jax_corpus() else { return };
    let pbs = corpus_pbs(&dir);
    assert!(pbs.len() >= 10, "only {} corpus protos", pbs.len());
    let mut instructions = 0;
    for pb in &pbs {
        let txt = pb.with_extension(""); // x.hlo.pb -> x.hlo
        let src = std::fs::read_to_string(&txt).unwrap();
        let from_text = norm(
            tpusim::hlo::parse_module(&txt.display().to_string(), &src)
                .unwrap_or_else(|e| panic!("{e}")),
        );
        let bytes = std::fs::read(pb).unwrap();
        let from_proto =
            module_from_proto_bytes(&bytes).unwrap_or_else(|e| panic!("{}: {e}", pb.display()));
        assert!(
            from_proto == from_text,
            "{}: {}",
            pb.display(),
            first_difference(&from_proto, &from_text)
        );
        // parameters by number agree too (not part of Computation equality)
        for (name, c) in &from_proto.computations {
            let t = &from_text.computations[name];
            let pn: Vec<&str> = c.params.iter().map(|&p| c.instr(p).name.as_str()).collect();
            let tn: Vec<&str> = t.params.iter().map(|&p| t.instr(p).name.as_str()).collect();
            assert_eq!(pn, tn, "{name}");
        }
        instructions += from_proto.instruction_count();
    }
    eprintln!("{} modules, {instructions} instructions equal", pbs.len());
    assert!(instructions > 10_000);
}

#[test]
fn printed_proto_ir_reparses_to_the_same_ir() {
    let Some(dir) = jax_corpus() else { return };
    for pb in corpus_pbs(&dir).iter().take(6) {
        let m = module_from_proto_bytes(&std::fs::read(pb).unwrap()).unwrap();
        let text = tpusim::hlo::print_module(&m);
        let back =
            norm(tpusim::hlo::parse_module("printed", &text).unwrap_or_else(|e| panic!("{e}")));
        assert!(
            back == m,
            "{}: {}",
            pb.display(),
            first_difference(&back, &m)
        );
    }
}
