//! How the incremental layout evaluator relates to the full pipeline: its ranking of
//! configurations against recompiling the module with each configuration and
//! estimating the whole program.

use std::path::Path;
use tpusim::dataset::generate::{sample_layouts, Search};
use tpusim::dataset::layout_eval::{recompiled_ns, LayoutEvaluator, NodeChoice};
use tpusim::eval::metrics::kendall_tau_b;
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
    let ev = LayoutEvaluator::new(&m, &t).unwrap();
    let mut cfg = vec![NodeChoice::default(); ev.nodes.len()];
    assert!(ev.compilation_config(&cfg).layout.is_empty());
    // The first convolution: its output stored with the features major.
    let (i, conv) = first_convolution(&ev);
    assert_eq!(conv.ranks, [4, 4, 4]);
    cfg[i].output = Some([0, 1, 2, 3].into_iter().collect());
    let c = ev.compilation_config(&cfg);
    assert_eq!(c.layout.len(), 1);
    assert_eq!(c.layout[0].node, NodeRef::Name(conv.name.clone()));
    assert_eq!(c.layout[0].output, vec![0, 1, 2, 3]);
    assert!(c.layout[0].input.is_empty() && c.layout[0].kernel.is_empty());
    let prepared = PreparedModule::new(&m).unwrap();
    let exact = recompiled_ns(&prepared, &c, &t).unwrap();
    assert_eq!(Some(exact), full_ns(&m, &ev, &cfg, &t));
    assert_eq!(
        recompiled_ns(&prepared, &CompilationConfig::default(), &t).unwrap(),
        ev.default_ns
    );
    assert!(exact > ev.default_ns, "{exact} vs {}", ev.default_ns);
}

#[test]
fn incremental_model_tracks_the_full_pipeline() {
    let m = resnet18();
    let t = TpuTarget::v3();
    let mut ev = LayoutEvaluator::new(&m, &t).unwrap();
    assert!(ev.nodes.len() > 20);
    for search in [Search::Default, Search::Random] {
        let cfgs = sample_layouts(&ev, search, 40, 11);
        assert_eq!(cfgs.len(), 40);
        assert!(cfgs[0].iter().all(|c| c.is_default()));
        let joint: Vec<f64> = cfgs.iter().map(|c| ev.runtime_ns(c)).collect();
        // The default configuration costs exactly the default program.
        assert_eq!(joint[0], ev.default_ns);
        let full: Vec<(f64, f64)> = cfgs
            .iter()
            .zip(&joint)
            .filter_map(|(c, &j)| full_ns(&m, &ev, c, &t).map(|f| (j, f)))
            .collect();
        let (js, fs): (Vec<f64>, Vec<f64>) = full.iter().copied().unzip();
        let tau_jf = kendall_tau_b(&js, &fs).unwrap();
        eprintln!(
            "{search:?}: tau(incremental, recompiled) = {tau_jf:.3} over {} configs",
            full.len()
        );
        assert!(full.len() >= 30);
        // Measured: 0.66 (default search) and 0.32 (random search) on this module.
        let floor = if search == Search::Default { 0.5 } else { 0.2 };
        assert!(tau_jf > floor, "incremental vs recompiled: {tau_jf}");
    }
}

/// A layout prefix means one full layout everywhere: the evaluator completes it
/// (`ConfigNode::completed`) as config resolution does for layout assignment, so the
/// prefix configuration and its completion cost the same in both models.
#[test]
fn prefixes_complete_alike_in_the_evaluator_and_the_compiler() {
    let m = resnet18();
    let t = TpuTarget::v3();
    let mut ev = LayoutEvaluator::new(&m, &t).unwrap();
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
    assert_eq!(ev.runtime_ns(&prefix), ev.runtime_ns(&full));
    let exact = |c: &[NodeChoice]| recompiled_ns(&prepared, &ev.compilation_config(c), &t).unwrap();
    assert_eq!(exact(&prefix), exact(&full));
    assert_ne!(exact(&prefix), ev.default_ns);
}

/// The first convolution among the evaluator's configurable nodes, with its position.
fn first_convolution(ev: &LayoutEvaluator) -> (usize, &tpusim::dataset::layout_eval::ConfigNode) {
    ev.nodes
        .iter()
        .enumerate()
        .find(|(_, n)| n.opcode == tpusim::ir::Opcode::Convolution)
        .unwrap()
}
