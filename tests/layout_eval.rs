//! The layout evaluator gives the full pipeline's runtime: recompiling the module with
//! each configuration and estimating the whole program.

use std::path::Path;
use tpusim::dataset::generate::{sample_layouts, Search};
use tpusim::dataset::layout_eval::{recompiled_ns, LayoutEvaluator, NodeChoice};
use tpusim::kernels::{LoweredProgram, TileOverrides};
use tpusim::passes::{compile, CompilationConfig, NodeRef, PreparedModule};
use tpusim::tpu::TpuTarget;

/// The ResNet-18 inference sample shipped in `hlo_samples/`.
fn resnet18() -> tpusim::ir::Module {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("hlo_samples/resnet18_infer_b8.hlo");
    let text = std::fs::read_to_string(path).unwrap();
    tpusim::hlo::parse_module("r18", &text).unwrap()
}

fn full_ns(
    m: &tpusim::ir::Module,
    ev: &LayoutEvaluator,
    cfg: &[NodeChoice],
    t: &TpuTarget,
) -> Option<f64> {
    let compiled = compile(m, &ev.compilation_config(cfg)).ok()?;
    let p = LoweredProgram::new(&compiled.module).ok()?;
    p.total_ns(t, &TileOverrides::default()).ok()
}

/// The compilation configuration of a layout configuration names exactly the chosen
/// tensors; `recompiled_ns` on a prepared module is the one-shot pipeline.
#[test]
fn compilation_config_and_recompiled_ns() {
    let m = resnet18();
    let t = TpuTarget::v3();
    let ev = LayoutEvaluator::new(&m, &t);
    let mut cfg = vec![NodeChoice::default(); ev.nodes.len()];
    assert!(ev.compilation_config(&cfg).layout.is_empty());
    // The first convolution: its output stored with the features major.
    let (i, conv) = first_convolution(&ev);
    assert_eq!(conv.ranks, [4, 4, 4]);
    cfg[i].output = Some([0, 1, 2, 3].into_iter().collect());
    let c = ev.compilation_config(&cfg);
    assert_eq!(c.layout.len(), 1);
    assert_eq!(c.layout[0].node, NodeRef::Index(conv.index));
    assert_eq!(c.layout[0].output, vec![0, 1, 2, 3]);
    assert!(c.layout[0].input.is_empty() && c.layout[0].kernel.is_empty());
    let prepared = PreparedModule::new(&m).unwrap();
    let exact = recompiled_ns(&prepared, &c, &t).unwrap();
    assert_eq!(Some(exact), full_ns(&m, &ev, &cfg, &t));
    assert_eq!(exact, ev.runtime_ns(&prepared, &cfg).unwrap());
    let default = recompiled_ns(&prepared, &CompilationConfig::default(), &t).unwrap();
    assert!(exact > default, "{exact} vs {default}");
}

/// The evaluator's runtime is the full pipeline's: for sampled configurations of both
/// searches it equals compiling the module with the configuration, lowering and
/// estimating the program, to the last bit.
#[test]
fn runtime_is_the_full_pipeline() {
    let m = resnet18();
    let t = TpuTarget::v3();
    let ev = LayoutEvaluator::new(&m, &t);
    let prepared = PreparedModule::new(&m).unwrap();
    assert!(ev.nodes.len() > 20);
    let default = full_ns(&m, &ev, &vec![NodeChoice::default(); ev.nodes.len()], &t).unwrap();
    for search in [Search::Default, Search::Random] {
        let cfgs = sample_layouts(&ev, search, 12, 11);
        assert_eq!(cfgs.len(), 12);
        assert!(cfgs[0].iter().all(|c| c.is_default()));
        let ns: Vec<f64> = cfgs
            .iter()
            .map(|c| ev.runtime_ns(&prepared, c).unwrap())
            .collect();
        assert_eq!(ns[0], default);
        for (c, &n) in cfgs.iter().zip(&ns) {
            assert_eq!(Some(n), full_ns(&m, &ev, c, &t));
        }
        // Configurations change the runtime.
        assert!(ns.iter().any(|&n| n != default), "{search:?}: {ns:?}");
    }
}

/// A layout prefix means one full layout: `ConfigNode::completed` completes it as config
/// resolution does for layout assignment, so the prefix configuration and its
/// completion cost the same.
#[test]
fn prefixes_complete_alike_in_the_evaluator_and_the_compiler() {
    let m = resnet18();
    let t = TpuTarget::v3();
    let ev = LayoutEvaluator::new(&m, &t);
    let prepared = PreparedModule::new(&m).unwrap();
    let d = |v: &[i64]| -> tpusim::ir::Dims { v.iter().copied().collect() };
    let (i, conv) = first_convolution(&ev);
    // The sample writes row-major layouts: {3,2,1,0} is every tensor's default.
    assert_eq!(
        conv.default_m2m,
        [d(&[3, 2, 1, 0]), d(&[3, 2, 1, 0]), d(&[3, 2, 1, 0])]
    );
    let mut prefix = vec![NodeChoice::default(); ev.nodes.len()];
    prefix[i] = NodeChoice {
        output: Some(d(&[0, 3])),
        input: Some(d(&[1, 3])),
        kernel: Some(d(&[2, 3])),
    };
    let full_choice = conv.completed(&prefix[i]);
    assert_eq!(
        full_choice,
        NodeChoice {
            output: Some(d(&[0, 3, 2, 1])),
            input: Some(d(&[1, 3, 2, 0])),
            kernel: Some(d(&[2, 3, 1, 0])),
        }
    );
    let mut full = prefix.clone();
    full[i] = full_choice;
    let exact = |c: &[NodeChoice]| ev.runtime_ns(&prepared, c).unwrap();
    assert_eq!(exact(&prefix), exact(&full));
    let default = vec![NodeChoice::default(); ev.nodes.len()];
    assert_ne!(exact(&prefix), exact(&default));
}

/// The first convolution among the evaluator's configurable nodes, with its position.
fn first_convolution(ev: &LayoutEvaluator) -> (usize, &tpusim::dataset::layout_eval::ConfigNode) {
    ev.nodes
        .iter()
        .enumerate()
        .find(|(_, n)| n.opcode == tpusim::ir::Opcode::Convolution)
        .unwrap()
}
