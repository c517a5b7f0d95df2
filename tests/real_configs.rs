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

/// `generate layout --pb --quiet ARGS` on the ResNet-18 sample, into a new folder.
fn generate_layout(args: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    common::run_ok(
        tpusim()
            .args(["generate", "layout"])
            .arg(common::sample_path("resnet18_infer_b8.hlo"))
            .arg("--out")
            .arg(dir.path())
            .args(args)
            .args(["--pb", "--quiet"]),
    );
    dir
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
    let dir = generate_layout(&["--configs", "200"]);
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
    let dir = generate_layout(&["--configs", "100", "--search", "default"]);
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

// ---- Tile configurations (spec §3): bounds count tiles of the physical tiled shape of
// the kernel's iteration-space tensor.

fn sample_tiles_pb(shared: &Path) -> std::path::PathBuf {
    shared.join("reference/tpugraphs_samples/op_tuning_data.pb")
}

/// The one kernel of a tile-sample module, as the cost model sees it.
fn kernel_desc(mt: &ModuleTuning) -> Option<tpusim::tpu::KernelDesc> {
    let m = mt.module_ir().unwrap().unwrap();
    let c = tpusim::passes::compile(&m, &tpusim::passes::CompilationConfig::default()).unwrap();
    let p = tpusim::kernels::LoweredProgram::new(&c.module).unwrap();
    let root = c
        .module
        .entry()
        .instr(c.module.entry().root)
        .name
        .to_string();
    p.kernels
        .iter()
        .find(|k| k.lowered.desc().name == root)
        .map(|k| k.lowered.desc().clone())
}

/// Every run's bounds have the rank of the tensor they tile and lie within its extents
/// in tiles.
fn assert_bounds_fit(desc: &tpusim::tpu::KernelDesc, t: &tpusim::proto::TileConfig, what: &str) {
    use tpusim::tpu::{bounds_tensor, tile_extents};
    let within = |b: &[i64], e: &[i64]| {
        b.len() == e.len() && b.iter().zip(e).all(|(&b, &e)| 1 <= b && b <= e)
    };
    if !t.output_bounds.is_empty() {
        let ext = tile_extents(bounds_tensor(desc).0);
        assert!(
            within(&t.output_bounds, &ext),
            "{what}: output_bounds {:?} of extents {ext:?}",
            t.output_bounds
        );
    }
    if !t.kernel_bounds.is_empty() {
        let k = &desc.inputs[desc
            .kernel_operand
            .expect("kernel_bounds need a kernel operand")];
        let ext = tile_extents(&k.tensor);
        assert!(
            within(&t.kernel_bounds, &ext),
            "{what}: kernel_bounds {:?} of extents {ext:?}",
            t.kernel_bounds
        );
    }
    assert!(
        t.input_bounds.is_empty() && t.iteration_bounds.is_empty(),
        "{what}"
    );
}

/// `tpusim estimate` predicts all 876 runs of the two real samples (122 layout, 754
/// tile), none refused; and every tile run's bounds fit the iteration-space tensor.
#[test]
fn every_run_of_both_real_samples_is_predicted() {
    let Some(shared) = common::shared("every_run_of_both_real_samples_is_predicted") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("F.csv");
    let stdout = common::run_ok(
        tpusim()
            .arg("estimate")
            .arg(shared.join("reference/tpugraphs_samples/module_tuning_data_layout.pb"))
            .arg(sample_tiles_pb(&shared))
            .args(["--runs", "--quiet", "--out"])
            .arg(&csv),
    );
    assert_eq!(
        stdout.trim(),
        format!(
            "876 runs written to {} (0 could not be applied)",
            csv.display()
        )
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows.len(), 876);
    // Every run costs time. The three reshape kernels (#12–#14) change the tiled bytes
    // (f32[32,6400]{T(8,128)} → f32[32,5,5,256]{T(8,128)} re-tiles the minor dim; #12
    // also converts f32 → bf16), so they are copies, not bitcasts.
    for r in &rows {
        let ns: u64 = r.rsplit(',').next().unwrap().parse().unwrap();
        assert!(ns > 0, "{r}");
    }
    let Tuning::Set(set) = read_tuning_file(&sample_tiles_pb(&shared)).unwrap() else {
        panic!("the tile sample is a TuningData set");
    };
    let mut runs = 0;
    for mt in &set.modules {
        let Some(desc) = kernel_desc(mt) else {
            continue;
        };
        for (j, r) in mt.runs.iter().enumerate() {
            if let RunConfig::Tile(Some(t)) = &r.config {
                assert_bounds_fit(&desc, t, &format!("{} run {j}", desc.name));
                runs += 1;
            }
        }
    }
    // All 754 runs, the 7 of the three reshape kernels (empty bounds) included.
    assert_eq!(runs, 754);
}

/// What `generate tile` writes from the sample's 12 non-reshape kernels has the real
/// semantics: every row's bounds have the iteration-space rank and lie within its tile
/// extents; and tpusim's own default tile, chosen by the model, is printed beside the
/// sample's `is_default` configuration (compared blind: the model is not fitted to it).
#[test]
fn generated_tile_rows_have_the_real_bounds() {
    let Some(shared) = common::shared("generated_tile_rows_have_the_real_bounds") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let stdout = common::run_ok(
        tpusim()
            .arg("generate")
            .arg("tile")
            .arg(sample_tiles_pb(&shared))
            .args(["--configs", "40", "--pb", "--quiet", "--out"])
            .arg(dir.path()),
    );
    assert!(
        stdout.starts_with("15 modules, 12 files written"),
        "{stdout}"
    );
    let mut pbs = Vec::new();
    for split in ["train", "valid", "test"] {
        pbs.extend(common::files_with_suffix(
            &dir.path().join("pb/tile/xla").join(split),
            ".pb",
        ));
    }
    assert_eq!(pbs.len(), 12);
    let mut rows = 0;
    for pb in &pbs {
        let mt = module_tuning(pb);
        let desc = kernel_desc(&mt).unwrap();
        for (j, r) in mt.runs.iter().enumerate() {
            let RunConfig::Tile(Some(t)) = &r.config else {
                panic!("{} run {j}: no tile", pb.display())
            };
            assert_bounds_fit(&desc, t, &format!("{} run {j}", pb.display()));
            rows += 1;
        }
    }
    assert!(rows > 200, "{rows} rows");
    // Tile style: runs per kernel, and how often a bound is a whole dim.
    let style = |mts: &[(tpusim::tpu::KernelDesc, ModuleTuning)]| {
        let (mut per, mut bounds, mut full, mut div) = (Vec::new(), 0, 0, 0);
        for (desc, mt) in mts {
            per.push(mt.runs.len());
            let ext = tpusim::tpu::tile_extents(tpusim::tpu::bounds_tensor(desc).0);
            for r in &mt.runs {
                if let RunConfig::Tile(Some(t)) = &r.config {
                    for (&b, &e) in t.output_bounds.iter().zip(ext.iter()) {
                        bounds += 1;
                        full += usize::from(b == e);
                        div += usize::from(e % b == 0);
                    }
                }
            }
        }
        per.sort_unstable();
        format!(
            "runs per kernel {}..{} (median {}); output bounds: {} % whole dims, {} % divide their extent",
            per[0],
            per[per.len() - 1],
            per[per.len() / 2],
            100 * full / bounds.max(1),
            100 * div / bounds.max(1)
        )
    };
    let ours: Vec<_> = pbs
        .iter()
        .map(|pb| {
            let mt = module_tuning(pb);
            (kernel_desc(&mt).unwrap(), mt)
        })
        .collect();
    eprintln!("ours (--configs 40): {}", style(&ours));
    // The default tiles, side by side.
    let Tuning::Set(set) = read_tuning_file(&sample_tiles_pb(&shared)).unwrap() else {
        panic!("the tile sample is a TuningData set");
    };
    let real: Vec<_> = set
        .modules
        .iter()
        .filter_map(|mt| {
            let d = kernel_desc(mt)?;
            let tiled = mt.runs.iter().any(
                |r| matches!(&r.config, RunConfig::Tile(Some(t)) if !t.output_bounds.is_empty()),
            );
            tiled.then(|| (d, mt.clone()))
        })
        .collect();
    eprintln!("real sample: {}", style(&real));
    let target = tpusim::tpu::TpuTarget::v3();
    let (mut kernels, mut same) = (0, 0);
    eprintln!(
        "{:<12} {:<34} {:<34}",
        "kernel", "sample default (out / kernel)", "tpusim default (out / kernel)"
    );
    for mt in &set.modules {
        let Some(desc) = kernel_desc(mt) else {
            continue;
        };
        let Some(RunConfig::Tile(Some(theirs))) =
            mt.runs.iter().find(|r| r.is_default).map(|r| &r.config)
        else {
            continue;
        };
        if theirs.output_bounds.is_empty() {
            continue; // the reshape kernels: empty configs only
        }
        let ours = tpusim::tpu::default_tile(&desc, &target);
        kernels += 1;
        let agree = ours.output_bounds == theirs.output_bounds
            && ours.kernel_bounds == theirs.kernel_bounds;
        same += usize::from(agree);
        eprintln!(
            "{:<12} {:<34} {:<34} {}",
            desc.name,
            format!("{:?} / {:?}", theirs.output_bounds, theirs.kernel_bounds),
            format!("{:?} / {:?}", ours.output_bounds, ours.kernel_bounds),
            if agree { "same" } else { "" }
        );
        assert_eq!(
            ours.output_bounds.len(),
            theirs.output_bounds.len(),
            "{}",
            desc.name
        );
        assert_eq!(
            ours.kernel_bounds.len(),
            theirs.kernel_bounds.len(),
            "{}",
            desc.name
        );
    }
    eprintln!("{same} of {kernels} default tiles agree exactly");
    assert_eq!(kernels, 12);
}

/// `inspect` of the real samples prints their configurations in the real terms: tile
/// bounds as per-dim tile counts with the default's, layouts as prefix shares.
#[test]
fn inspect_shows_the_real_configurations() {
    let Some(shared) = common::shared("inspect_shows_the_real_configurations") else {
        return;
    };
    let tiles = common::run_ok(tpusim().arg("inspect").arg(sample_tiles_pb(&shared)));
    let fusion232: Vec<&str> = tiles
        .lines()
        .skip_while(|l| !l.starts_with("module 0 `fusion.232`"))
        .take(9)
        .collect();
    assert_eq!(
        &fusion232[3..8],
        [
            "  tile configs (tiles of the iteration-space tensor, major → minor):",
            "    default: output [2,26,4,2] kernel [] input []",
            "    output_bounds: 4 dims: 1..26 × 1..26 × 1..4 × 1..2",
            "    kernel_bounds: not set",
            "    input_bounds:  not set",
        ]
    );
    let layout = common::run_ok(
        tpusim()
            .arg("inspect")
            .arg(shared.join("reference/tpugraphs_samples/module_tuning_data_layout.pb")),
    );
    assert!(
        layout.contains(
            "  layout configs (minor_to_major prefixes; empty = the compiler's choice):\n    \
         default: 167 of 177 tensors set\n    \
         tensors over all runs: 5.4 % empty, prefixes 2-dim 89.8 %, 4.8 % whole permutations\n"
        ),
        "{layout}"
    );
}
