//! `tpusim predict`: the analytical model on TpuGraphs files. From an npz file alone (the
//! module rebuilt from its features) it must rank configurations as it does from the
//! original HLO (the `.pb` twin `generate --pb` writes): Kendall τ ≥ 0.9 per file and
//! runtimes within 10 %. It must run on every npz and `.pb` it is given — files with the
//! public release's dtypes, and graphs of random features — without a panic.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use tpusim::dataset::graph::encode_graph;
use tpusim::dataset::npz::NpzWriter;
use tpusim::eval::metrics::kendall_tau_b;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tpusim"))
}

/// `ID,config_index,predicted_runtime_ns` rows by ID (empty cells = None).
fn read_rows(p: &Path) -> HashMap<String, Vec<Option<f64>>> {
    let text = std::fs::read_to_string(p).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("ID,config_index,predicted_runtime_ns"));
    let mut out: HashMap<String, Vec<Option<f64>>> = HashMap::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f.len(), 3, "{l}");
        let v = out.entry(f[0].to_string()).or_default();
        assert_eq!(
            f[1].parse::<usize>().unwrap(),
            v.len(),
            "rows in order: {l}"
        );
        v.push(f[2].parse::<f64>().ok());
    }
    out
}

#[test]
fn npz_alone_ranks_like_the_original_hlo() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for m in [
        "mlp_train.hlo",
        "resnet18_infer_b8.hlo",
        "bert_base_infer_b8s128.hlo",
        "resnet50_train_b8.hlo",
    ] {
        let s = common::sample_path(m);
        for coll in ["tile", "layout"] {
            common::run_ok(
                bin()
                    .args(["generate", coll])
                    .arg(&s)
                    .arg("--out")
                    .arg(&out)
                    .args(["--pb", "--configs", "16", "--quiet"]),
            );
        }
    }
    let from_npz = dir.path().join("npz.csv");
    let from_pb = dir.path().join("pb.csv");
    common::run_ok(
        bin()
            .arg("predict")
            .arg(out.join("npz"))
            .arg("--out")
            .arg(&from_npz)
            .arg("--quiet"),
    );
    common::run_ok(
        bin()
            .arg("predict")
            .arg(out.join("pb"))
            .arg("--out")
            .arg(&from_pb)
            .arg("--quiet"),
    );
    let a = read_rows(&from_npz);
    let b = read_rows(&from_pb);
    assert_eq!(a.len(), b.len(), "one ID per file, the same IDs");
    assert!(a.len() >= 300, "{} files", a.len());
    let (mut exact, mut layout, mut tile) = (0, 0, 0);
    for (id, y) in &b {
        let x = a
            .get(id)
            .unwrap_or_else(|| panic!("{id} missing from the npz predictions"));
        assert_eq!(x.len(), y.len(), "{id}: rows");
        let x: Vec<f64> = x.iter().map(|v| v.expect("every npz row costed")).collect();
        let y: Vec<f64> = y.iter().map(|v| v.expect("every pb row costed")).collect();
        let worst = x
            .iter()
            .zip(&y)
            .map(|(p, q)| (p - q).abs() / q)
            .fold(0.0, f64::max);
        assert!(worst <= 0.10, "{id}: a runtime {:.1} % off", worst * 100.0);
        if y.iter().any(|&v| v != y[0]) {
            let tau = kendall_tau_b(&x, &y).unwrap();
            assert!(tau >= 0.9, "{id}: Kendall τ {tau}");
        }
        exact += usize::from(worst == 0.0);
        if id.starts_with("layout:") {
            layout += 1;
        } else if id.starts_with("tile:xla:") {
            tile += 1;
        }
    }
    assert_eq!(layout, 4, "one layout file per model");
    assert!(tile > 50);
    // Most files rebuild to the very module: the same runtime to the nanosecond.
    assert!(exact * 10 >= b.len() * 9, "{exact} of {} exact", b.len());
}

/// A small kernel and a small program, written with the release's dtypes: node_opcode
/// uint8, edge_index int64, node_config_ids int64, node_splits int64 of shape (1, k),
/// runtimes int64, features float32.
const KERNEL: &str = r#"
HloModule k, entry_computation_layout={(f32[8,16,16,32]{3,2,1,0}, f32[3,3,32,64]{3,2,1,0})->f32[8,16,16,64]{3,2,1,0}}

fused {
  p0 = f32[8,16,16,32]{3,2,1,0} parameter(0)
  p1 = f32[3,3,32,64]{3,2,1,0} parameter(1)
  c = f32[8,16,16,64]{3,2,1,0} convolution(p0, p1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  z = f32[] constant(0)
  b = f32[8,16,16,64]{3,2,1,0} broadcast(z), dimensions={}
  ROOT m = f32[8,16,16,64]{3,2,1,0} maximum(c, b)
}

ENTRY e {
  a = f32[8,16,16,32]{3,2,1,0} parameter(0)
  w = f32[3,3,32,64]{3,2,1,0} parameter(1)
  ROOT f = f32[8,16,16,64]{3,2,1,0} fusion(a, w), kind=kOutput, calls=fused
}
"#;

const PROGRAM: &str = r#"
HloModule p, entry_computation_layout={(f32[64,128]{1,0}, f32[128,256]{1,0}, f32[256,32]{1,0})->f32[32,64]{1,0}}

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY e {
  a = f32[64,128]{1,0} parameter(0)
  w = f32[128,256]{1,0} parameter(1)
  v = f32[256,32]{1,0} parameter(2)
  d = f32[64,256]{1,0} dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[] constant(0)
  r = f32[64]{0} reduce(d, z), dimensions={1}, to_apply=add
  rb = f32[64,256]{1,0} broadcast(r), dimensions={0}
  s = f32[64,256]{1,0} subtract(d, rb)
  e2 = f32[64,32]{1,0} dot(s, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[32,64]{1,0} transpose(e2), dimensions={1,0}
}
"#;

fn write_graph(w: &mut NpzWriter, text: &str) -> (usize, Vec<i64>) {
    let m = tpusim::hlo::parse_module("t", text).unwrap();
    let g = encode_graph(&m).unwrap();
    let n = g.num_nodes();
    w.add_slice("node_opcode", &[n], &g.node_opcode).unwrap();
    w.add_slice("node_feat", &[n, 140], &g.node_feat).unwrap();
    let e: Vec<i64> = g.edge_index.iter().flatten().copied().collect();
    w.add_slice("edge_index", &[g.edge_index.len(), 2], &e)
        .unwrap();
    let dots: Vec<i64> = (0..n)
        .filter(|&k| g.node_opcode[k] == 34)
        .map(|k| k as i64)
        .collect();
    (n, dots)
}

#[test]
fn release_dtype_files_and_random_graphs_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let tile = dir.path().join("npz/tile/xla/test/kernel.npz");
    let layout = dir.path().join("npz/layout/xla/random/test/program.npz");
    std::fs::create_dir_all(tile.parent().unwrap()).unwrap();
    std::fs::create_dir_all(layout.parent().unwrap()).unwrap();

    let mut w = NpzWriter::create(&tile).unwrap();
    write_graph(&mut w, KERNEL);
    // Three tiles of the conv kernel: the default (empty) and two output tilings.
    let mut cf = vec![0f32; 3 * 24];
    for (j, ob) in [[0f32; 4], [1.0, 1.0, 2.0, 1.0], [2.0, 2.0, 1.0, 1.0]]
        .iter()
        .enumerate()
    {
        if ob[0] > 0.0 {
            cf[j * 24 + 8..j * 24 + 12].copy_from_slice(ob);
            cf[j * 24 + 14] = ob.iter().sum();
            cf[j * 24 + 15] = ob.iter().product();
        }
    }
    w.add_slice("config_feat", &[3, 24], &cf).unwrap();
    w.add_slice("config_runtime", &[3], &[100i64, 120, 90])
        .unwrap();
    w.add_slice("config_runtime_normalizers", &[3], &[100i64, 100, 100])
        .unwrap();
    w.finish().unwrap();

    let mut w = NpzWriter::create(&layout).unwrap();
    let (n, ids) = write_graph(&mut w, PROGRAM);
    assert_eq!(ids.len(), 2, "the two dots are configurable");
    w.add_slice("node_config_ids", &[ids.len()], &ids).unwrap();
    let nc = ids.len();
    let mut f = vec![-1f32; 4 * nc * 18];
    // Row 1: the first dot's output column-major; row 2: every input transposed.
    f[18..20].copy_from_slice(&[0.0, 1.0]);
    for k in 0..nc {
        f[2 * nc * 18 + k * 18 + 6..2 * nc * 18 + k * 18 + 8].copy_from_slice(&[0.0, 1.0]);
    }
    w.add_slice("node_config_feat", &[4, nc, 18], &f).unwrap();
    w.add_slice("node_splits", &[1, 2], &[0i64, n as i64])
        .unwrap();
    w.add_slice("config_runtime", &[4], &[10i64, 11, 12, 13])
        .unwrap();
    w.finish().unwrap();

    let csv = dir.path().join("p.csv");
    let out = bin()
        .arg("predict")
        .arg(dir.path().join("npz"))
        .arg("--out")
        .arg(&csv)
        .arg("--quiet")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && stdout.starts_with("2 files, 7 configurations predicted (0 could not be costed)"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = read_rows(&csv);
    let t = &rows["tile:xla:kernel"];
    let l = &rows["layout:xla:random:program"];
    assert_eq!((t.len(), l.len()), (3, 4));
    for v in t.iter().chain(l) {
        assert!(v.is_some_and(|x| x > 0.0), "{rows:?}");
    }
    assert_ne!(t[1], t[2], "different tiles cost differently");
    assert_ne!(l[0], l[2], "a transposed operand layout costs differently");
    // The rebuilt module is costed like the original one: the kernel's default tile
    // against `estimate` of the module itself.
    let est = common::run_ok(
        bin()
            .arg("estimate")
            .arg("--json")
            .arg(write_text(&dir, "k.hlo", KERNEL)),
    );
    let total = serde_json::from_str::<serde_json::Value>(&est).unwrap()["total_ns"]
        .as_f64()
        .unwrap();
    assert_eq!(
        t[0].unwrap(),
        total.round(),
        "default tile = estimate of the kernel"
    );
    let est = common::run_ok(
        bin()
            .arg("estimate")
            .arg("--json")
            .arg(write_text(&dir, "p.hlo", PROGRAM)),
    );
    let total = serde_json::from_str::<serde_json::Value>(&est).unwrap()["total_ns"]
        .as_f64()
        .unwrap();
    assert_eq!(
        l[0].unwrap(),
        total.round(),
        "default layout = estimate of the program"
    );

    // `--kaggle`: every configuration, predicted fastest first.
    let kag = dir.path().join("k.csv");
    common::run_ok(
        bin()
            .arg("predict")
            .arg(&tile)
            .arg("--kaggle")
            .arg("--out")
            .arg(&kag)
            .arg("--quiet"),
    );
    let text = std::fs::read_to_string(&kag).unwrap();
    let mut order: Vec<usize> = (0..3).collect();
    order.sort_by(|&a, &b| t[a].unwrap().total_cmp(&t[b].unwrap()));
    let want = format!(
        "ID,TopConfigs\ntile:xla:kernel,{}\n",
        order
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(";")
    );
    assert_eq!(text, want);

    // Random graphs (random opcodes, features and edges): a module or a clear error,
    // never a panic; and the command says which file failed.
    let mut rng = common::SplitMix(7);
    let mut built = 0;
    for case in 0..300 {
        let n = 1 + rng.below(24);
        let ops: Vec<u8> = (0..n).map(|_| rng.below(122) as u8).collect();
        let mut feat = vec![0f32; n * 140];
        for v in feat.iter_mut() {
            *v = match rng.below(4) {
                0 => 0.0,
                1 => 1.0,
                2 => rng.below(9) as f32,
                _ => (rng.below(3000) as f32) - 100.0,
            };
        }
        let mut edges = Vec::new();
        for _ in 0..rng.below(3 * n) {
            edges.push([rng.below(n) as i64, rng.below(n) as i64]);
        }
        let g = tpusim::dataset::rebuild::GraphArrays {
            node_opcode: ops,
            node_feat: feat,
            edge_index: edges,
        };
        if let Ok(r) = tpusim::dataset::rebuild::rebuild_module(&g, &format!("case {case}")) {
            built += 1;
            assert!(tpusim::ir::check::check_module(&r.module).is_ok());
        }
    }
    assert!(built > 0, "some random graphs rebuild");
    let junk = dir.path().join("junk.npz");
    let mut w = NpzWriter::create(&junk).unwrap();
    w.add_slice("node_opcode", &[2], &[26u8, 63]).unwrap();
    w.add_slice("node_feat", &[2, 140], &[5f32; 280]).unwrap();
    w.add_slice("edge_index", &[1, 2], &[0i64, 9]).unwrap();
    w.finish().unwrap();
    let out = bin()
        .arg("predict")
        .arg(&junk)
        .arg("--out")
        .arg(&csv)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("junk.npz")
            && err.contains("edge_index[0] = [0, 9] names a node outside 0..2"),
        "{err}"
    );
}

fn write_text(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}
