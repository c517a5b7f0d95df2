//! Layout configurations as real TpuGraphs data writes them (../shared/specs/
//! tpugraphs_real_configs.md §2): a tensor's dims are a `minor_to_major` prefix. The real
//! sample's runs must all apply, and what `tpusim generate layout` writes must have the
//! same style.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use tpusim::ir::Opcode;
use tpusim::passes::NodeTable;
use tpusim::proto::{read_tuning_file, ModuleTuning, RunConfig, Tuning};

fn tpusim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tpusim"))
}

fn module_tuning(path: &Path) -> ModuleTuning {
    match read_tuning_file(path).unwrap() {
        Tuning::Module(m) => m,
        Tuning::Set(_) => panic!("{}: not a layout file", path.display()),
    }
}

/// Per (opcode, tensor): how many configured tensors have 0 entries, 2 entries fewer than
/// the rank (a 2-dim prefix), all entries (a full permutation), or some other count.
#[derive(Debug, Default, PartialEq, Eq)]
struct Style {
    empty: usize,
    two: usize,
    full: usize,
    other: usize,
}

impl Style {
    fn total(&self) -> usize {
        self.empty + self.two + self.full + self.other
    }
    fn shares(&self) -> String {
        let p = |n: usize| 100.0 * n as f64 / self.total().max(1) as f64;
        format!(
            "empty {:.0} % / 2-dim prefix {:.0} % / full {:.0} % / other {:.0} % of {}",
            p(self.empty),
            p(self.two),
            p(self.full),
            p(self.other),
            self.total()
        )
    }
}

/// The layout style of every run but the default one (which leaves everything to the
/// compiler), by opcode ("convolution", "reshape", "dot"), over all tensors of the node.
fn styles(mt: &ModuleTuning) -> BTreeMap<&'static str, Style> {
    let m = mt.module_ir().unwrap().unwrap();
    let t = NodeTable::new(&m);
    let mut out: BTreeMap<&'static str, Style> = BTreeMap::new();
    for run in mt.runs.iter().filter(|r| !r.is_default) {
        let RunConfig::Layout(l) = &run.config else {
            panic!("not a layout run")
        };
        for (k, node) in l.nodes.iter().enumerate() {
            let (c, id) = t.nodes[mt.config_index_to_node[k] as usize];
            let comp = m.comp(c);
            let ins = comp.instr(id);
            let kind = match ins.opcode {
                Opcode::Convolution => "convolution",
                Opcode::Dot => "dot",
                Opcode::Reshape => "reshape",
                o => panic!("{o:?} is not configurable"),
            };
            let tensors = if ins.opcode == Opcode::Reshape { 2 } else { 3 };
            for slot in 0..tensors {
                let rank = match slot {
                    0 => ins.shape.rank(),
                    s => comp.instr(comp.operand(id, s - 1).unwrap()).shape.rank(),
                };
                let n = node.tensors.get(slot).map_or(0, Vec::len);
                let s = out.entry(kind).or_default();
                match n {
                    0 => s.empty += 1,
                    n if n == rank => s.full += 1,
                    2 => s.two += 1,
                    _ => s.other += 1,
                }
            }
        }
    }
    out
}

#[test]
fn every_real_layout_run_applies() {
    let Some(shared) = common::shared("every_real_layout_run_applies") else {
        return;
    };
    let pb = shared.join("reference/tpugraphs_samples/module_tuning_data_layout.pb");
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("F.csv");
    let start = std::time::Instant::now();
    let out = tpusim()
        .args([
            "estimate",
            pb.to_str().unwrap(),
            "--runs",
            "--quiet",
            "--out",
        ])
        .arg(&csv)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    eprintln!("estimate --runs: {:.1} s", start.elapsed().as_secs_f64());
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows.len(), 122);
    let applied = rows.iter().filter(|r| !r.ends_with(',')).count();
    assert_eq!(applied, 122, "{stderr}");
    // The configurations make a difference: the 100 distinct ones do not all cost the same.
    let distinct: std::collections::HashSet<&str> =
        rows.iter().map(|r| r.rsplit(',').next().unwrap()).collect();
    assert!(distinct.len() > 50, "{} distinct runtimes", distinct.len());
}

#[test]
fn real_sample_layout_style() {
    let Some(shared) = common::shared("real_sample_layout_style") else {
        return;
    };
    let mt =
        module_tuning(&shared.join("reference/tpugraphs_samples/module_tuning_data_layout.pb"));
    let s = styles(&mt);
    for (k, v) in &s {
        eprintln!("real sample, {k}: {}", v.shares());
    }
    let conv = &s["convolution"];
    assert_eq!(conv.full + conv.other, 0, "{conv:?}");
    assert_eq!(conv.total(), 121 * 53 * 3);
    let reshape = &s["reshape"];
    assert_eq!(reshape.two + reshape.other, 0, "{reshape:?}");
    assert!(!s.contains_key("dot"));
    // The most common convolution configuration (spec §2).
    let m = mt.module_ir().unwrap().unwrap();
    let t = NodeTable::new(&m);
    let mut combos: BTreeMap<Vec<Vec<i64>>, usize> = BTreeMap::new();
    for run in mt.runs.iter().filter(|r| !r.is_default) {
        let RunConfig::Layout(l) = &run.config else {
            continue;
        };
        for (k, node) in l.nodes.iter().enumerate() {
            let (c, id) = t.nodes[mt.config_index_to_node[k] as usize];
            if m.comp(c).instr(id).opcode == Opcode::Convolution {
                *combos.entry(node.tensors.clone()).or_default() += 1;
            }
        }
    }
    eprintln!(
        "real sample: {} distinct convolution configurations",
        combos.len()
    );
    let most = combos.iter().max_by_key(|(_, &n)| n).unwrap();
    assert_eq!(most.0, &vec![vec![4, 0], vec![0, 4], vec![4, 3]]);
    assert_eq!(*most.1, 2085);
}

/// `generate layout --pb` on the ResNet-18 sample: the proto holds prefixes in the real
/// style and reads back as the npz rows.
#[test]
fn generated_layouts_have_the_real_style() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let out = tpusim()
        .args(["generate", "layout"])
        .arg(root.join("hlo_samples/resnet18_infer_b8.hlo"))
        .arg("--out")
        .arg(dir.path())
        .args(["--configs", "200", "--pb", "--quiet"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pb = dir
        .path()
        .join("pb/layout/xla/random/train/resnet18_infer_b8.pb");
    let mt = module_tuning(&pb);
    assert_eq!(mt.runs.len(), 200);
    let s = styles(&mt);
    for (k, v) in &s {
        eprintln!("generated (random), {k}: {}", v.shares());
    }
    let conv = &s["convolution"];
    assert_eq!(conv.full + conv.other, 0, "{conv:?}");
    assert_eq!(conv.empty, 0, "{conv:?}");
    if let Some(r) = s.get("reshape") {
        assert_eq!(r.two + r.other, 0, "{r:?}");
    }
    // The npz rows carry the same lists, −1 padded.
    let npz = dir
        .path()
        .join("npz/layout/xla/random/train/resnet18_infer_b8.npz");
    let arrays = tpusim::dataset::npz::read_npz(&npz).unwrap();
    let feat = arrays["node_config_feat"].as_slice::<f32>().unwrap();
    let nc = mt.config_index_to_node.len();
    assert_eq!(feat.len(), 200 * nc * 18);
    for (j, run) in mt.runs.iter().enumerate() {
        let RunConfig::Layout(l) = &run.config else {
            panic!()
        };
        for (k, node) in l.nodes.iter().enumerate() {
            let row = &feat[(j * nc + k) * 18..(j * nc + k + 1) * 18];
            let e = tpusim::passes::LayoutEntry::from_tpugraphs_row(k, row);
            assert_eq!(
                [e.output, e.input, e.kernel],
                [node.output(), node.input(), node.kernel()].map(|t| t.to_vec()),
                "run {j} node {k}"
            );
        }
    }
}

/// `--search default` perturbs a few tensors around the default, in the same style.
#[test]
fn default_search_perturbs_in_the_real_style() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let out = tpusim()
        .args(["generate", "layout"])
        .arg(root.join("hlo_samples/resnet18_infer_b8.hlo"))
        .arg("--out")
        .arg(dir.path())
        .args(["--configs", "100", "--search", "default", "--pb", "--quiet"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mt = module_tuning(
        &dir.path()
            .join("pb/layout/xla/default/train/resnet18_infer_b8.pb"),
    );
    let s = styles(&mt);
    for (k, v) in &s {
        eprintln!("generated (default), {k}: {}", v.shares());
    }
    let conv = &s["convolution"];
    assert_eq!(conv.full + conv.other, 0, "{conv:?}");
    assert!(conv.two > 0 && conv.empty > 10 * conv.two, "{conv:?}");
    if let Some(r) = s.get("reshape") {
        assert_eq!(r.two + r.other, 0, "{r:?}");
    }
    for run in mt.runs.iter().skip(1) {
        let RunConfig::Layout(l) = &run.config else {
            panic!()
        };
        let set = l
            .nodes
            .iter()
            .flat_map(|n| &n.tensors)
            .filter(|t| !t.is_empty());
        assert!((1..=3).contains(&set.count()));
    }
}
