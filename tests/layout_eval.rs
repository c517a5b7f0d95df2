//! How the incremental layout evaluator relates to the full pipeline: its ranking of
//! configurations against recompiling the module with each configuration and
//! estimating the whole program.

use std::path::Path;
use tpusim::dataset::generate::{sample_layouts, Search};
use tpusim::dataset::layout_eval::{LayoutEvaluator, NodeChoice};
use tpusim::eval::metrics::kendall_tau_b;
use tpusim::kernels::{LoweredProgram, TileOverrides};
use tpusim::passes::{compile, CompilationConfig, LayoutEntry, NodeRef};
use tpusim::tpu::TpuTarget;

fn full_ns(
    m: &tpusim::ir::Module,
    ev: &LayoutEvaluator,
    cfg: &[NodeChoice],
    t: &TpuTarget,
) -> Option<f64> {
    let mut c = CompilationConfig::default();
    for (n, ch) in ev.nodes.iter().zip(cfg) {
        if ch.is_default() {
            continue;
        }
        c.layout.push(LayoutEntry {
            node: NodeRef::Name(n.name.clone()),
            output: ch.output.as_ref().map(|d| d.to_vec()).unwrap_or_default(),
            input: ch.input.as_ref().map(|d| d.to_vec()).unwrap_or_default(),
            kernel: ch.kernel.as_ref().map(|d| d.to_vec()).unwrap_or_default(),
        });
    }
    let compiled = compile(m, &c).ok()?;
    let p = LoweredProgram::new(&compiled.module).ok()?;
    p.total_ns(t, &TileOverrides::default()).ok()
}

#[test]
fn incremental_model_tracks_the_full_pipeline() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("hlo_samples/resnet18_infer_b8.hlo");
    let text = std::fs::read_to_string(path).unwrap();
    let m = tpusim::hlo::parse_module("r18", &text).unwrap();
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
