//! Hostile input and faults (issue 20): each case builds its reproducer here and checks
//! that tpusim neither crashes nor prints a nonsense number nor accepts it silently, but
//! fails with one clear error line naming the file (and line) that is wrong.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tpusim::dataset::npz::{read_npz, summarize_npz, write_npz, Compression, NpyArray};

fn tpusim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(args)
        .output()
        .expect("tpusim starts")
}

/// Runs tpusim, which must fail (exit 1, no crash) with `want` in its stderr; the stderr.
fn fails(args: &[&str], want: &str) -> String {
    let out = tpusim(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: wanted '{want}' in:\n{err}");
    assert!(
        !err.contains("panicked") && !err.contains("ZipWriter"),
        "{err}"
    );
    err
}

fn ok(args: &[&str]) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tpusim"));
    c.args(args);
    common::run_ok(&mut c)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn write(dir: &Path, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A chain of `n` computations, each calling the next by `kind`.
fn deep_module(n: usize, kind: &str) -> String {
    let mut t = String::from("HloModule deep\n\ncond {\n  p = f32[] parameter(0)\n  ROOT c = pred[] constant(true)\n}\n\n");
    t.push_str("c0 {\n  p = f32[] parameter(0)\n  ROOT r = f32[] negate(p)\n}\n\n");
    for i in 1..n {
        let call = match kind {
            "call" => format!("call(p), to_apply=c{}", i - 1),
            "fusion" => format!("fusion(p), kind=kLoop, calls=c{}", i - 1),
            _ => format!("while(p), condition=cond, body=c{}", i - 1),
        };
        t.push_str(&format!(
            "c{i} {{\n  p = f32[] parameter(0)\n  ROOT r = f32[] {call}\n}}\n\n"
        ));
    }
    t.push_str(&format!(
        "ENTRY e {{\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=c{}\n}}\n",
        n - 1
    ));
    t
}

/// Case 1: computations nested 12,000 deep are refused at the call past depth 64 by every
/// command (analyze used to overflow its stack), 63 deep are fine.
#[test]
fn deep_nesting_is_a_located_error() {
    let d = tempfile::tempdir().unwrap();
    for kind in ["call", "fusion", "while"] {
        let f = write(d.path(), &format!("{kind}.hlo"), deep_module(12_000, kind));
        // `c64` (the 65th computation of the chain, line 330) is the first too deep.
        let want = format!("{kind}.hlo:330:3: error: computations nest more than 64 deep");
        for cmd in ["analyze", "parse", "verify", "estimate", "print"] {
            fails(&[cmd, s(&f)], &want);
        }
    }
    let f = write(d.path(), "ok.hlo", deep_module(63, "call"));
    assert!(ok(&["analyze", s(&f)]).contains("flops"));
}

/// Case 2: a shape whose size overflows (or exceeds any TPU) is an error at its line; no
/// NaN, inf or saturated number comes out, and generate writes nothing.
#[test]
fn oversized_shapes_are_errors_at_their_line() {
    let d = tempfile::tempdir().unwrap();
    for (name, dims) in [
        ("huge", "9223372036854775807"),
        ("square", "100000000000,100000000000"),
        ("tib", "1099511627776,2"),
    ] {
        let f = write(
            d.path(),
            &format!("{name}.hlo"),
            format!("HloModule m\n\nENTRY e {{\n  p = f32[{dims}] parameter(0)\n  ROOT n = f32[{dims}] negate(p)\n}}\n"),
        );
        let want = format!("{name}.hlo:4:3: error: shape f32[{dims}]");
        fails(&["estimate", s(&f)], &want);
        fails(&["analyze", s(&f), "--json"], &want);
        let out = d.path().join(format!("out_{name}"));
        // Every command prints the located error as it is, `error:` once.
        for args in [
            vec!["generate", "tile", s(&f), "--out", s(&out)],
            vec!["generate", "layout", s(&f), "--out", s(&out)],
        ] {
            let e = fails(&args, &want);
            assert!(e.starts_with(s(&f)), "{args:?}: {e}");
            assert_eq!(e.matches("error:").count(), 1, "{args:?}: {e}");
        }
        assert!(!out.join("npz").exists());
        let csv = d.path().join(format!("{name}.csv"));
        let e = fails(&["predict", s(&f), "--out", s(&csv)], &want);
        assert_eq!(e.matches("error:").count(), 1, "{e}");
    }
    // The largest array allowed (2^40 elements of 1 byte... of f32: 2^38) is costed with
    // finite numbers.
    let f = write(
        d.path(),
        "max.hlo",
        "HloModule m\n\nENTRY e {\n  p = f32[262144,1048576] parameter(0)\n  ROOT n = f32[262144,1048576] negate(p)\n}\n",
    );
    let v: serde_json::Value = serde_json::from_str(&ok(&["estimate", s(&f), "--json"])).unwrap();
    let t = v["total_ns"].as_f64().unwrap();
    assert!(t.is_finite() && t > 1e8, "{t}");
}

/// A missing input is named, with `error:` once, by every command that reads modules.
#[test]
fn a_missing_input_is_named_once() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("absent.hlo");
    let want = format!("{}: error: ", s(&f));
    let out = d.path().join("out");
    let csv = d.path().join("p.csv");
    for args in [
        vec!["estimate", s(&f)],
        vec!["analyze", s(&f)],
        vec!["print", s(&f)],
        vec!["generate", "tile", s(&f), "--out", s(&out)],
        vec!["predict", s(&f), "--out", s(&csv)],
    ] {
        let e = fails(&args, &want);
        assert_eq!(e.matches("error:").count(), 1, "{args:?}: {e}");
    }
}

/// Case 3: the `.pb` reader applies the text parser's checks: negative dimensions and
/// self-recursive computations are refused.
#[test]
fn proto_reader_applies_the_shared_module_checks() {
    use prost::Message;
    let text = "HloModule m\n\nf {\n  a = f32[8] parameter(0)\n  ROOT n = f32[8] negate(a)\n}\n\nENTRY e {\n  p = f32[8] parameter(0)\n  ROOT c = f32[8] call(p), to_apply=f\n}\n";
    let m = tpusim::hlo::parse_module("m.hlo", text).unwrap();
    let good = tpusim::proto::module_to_proto(&m);
    assert!(tpusim::proto::modules_from_binary(&good.encode_to_vec()).is_ok());
    let mut neg = good.clone();
    neg.computations[0].instructions[0]
        .shape
        .as_mut()
        .unwrap()
        .dimensions = vec![-1000];
    let e = tpusim::proto::modules_from_binary(&neg.encode_to_vec()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "computation `f`, instruction `a`: dimension 0 is negative (-1000)"
    );
    let mut rec = good.clone();
    let f_id = rec.computations[0].id;
    let n = &mut rec.computations[0].instructions[1];
    n.opcode = "call".into();
    n.called_computation_ids = vec![f_id];
    let e = tpusim::proto::modules_from_binary(&rec.encode_to_vec()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "computation `f`, instruction `n`: computation 'f' calls itself"
    );
    // Found by the long campaign: a module name text cannot hold ("jit__,ambda") was
    // accepted, and its printed text did not parse.
    let mut bad_name = good.clone();
    bad_name.name = "jit__,ambda".into();
    let e = tpusim::proto::modules_from_binary(&bad_name.encode_to_vec()).unwrap_err();
    assert!(
        e.to_string()
            .contains(r#"module name "jit__,ambda" is not an HLO name"#),
        "{e}"
    );
    // The binary front end: the same errors with the file named.
    let d = tempfile::tempdir().unwrap();
    let f = write(d.path(), "neg.pb", neg.encode_to_vec());
    fails(
        &["print", s(&f)],
        "neg.pb: error: computation `f`, instruction `a`: dimension 0 is negative",
    );
}

/// Found by the long campaign: a parameter (or module) whose name starts with a digit,
/// as a `.pb` may give, was printed bare in the signature, which does not parse; it is
/// printed `%0_0_.1` there, and the text round-trips.
#[test]
fn digit_first_names_print_as_text_that_parses() {
    let text = "HloModule %0mod\n\nENTRY %main (%0_0_.1: f32[4]) -> f32[4] {\n  %0_0_.1 = f32[4]{0} parameter(0)\n  ROOT %n = f32[4]{0} negate(%0_0_.1)\n}\n";
    let m = tpusim::hlo::parse_module("d.hlo", text).unwrap();
    assert_eq!(m.name, "0mod");
    let printed = tpusim::hlo::print_module(&m);
    assert!(printed.starts_with("HloModule %0mod"), "{printed}");
    assert!(
        printed.contains("ENTRY %main (%0_0_.1: f32[4]) -> f32[4]"),
        "{printed}"
    );
    let again = tpusim::hlo::parse_module("d2.hlo", &printed).unwrap();
    assert_eq!(tpusim::hlo::print_module(&again), printed);
}

/// A stored zip holding one member `name` with `data`, written by hand.
fn zip_one(name: &str, data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let o =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    w.start_file(name, o).unwrap();
    w.write_all(data).unwrap();
    w.finish().unwrap().into_inner()
}

fn npy_header(dict: &str) -> Vec<u8> {
    let mut h = dict.to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend_from_slice(&(h.len() as u16).to_le_bytes());
    v.extend_from_slice(h.as_bytes());
    v
}

/// Case 4: an npz header whose shape × item size wraps past 2^64 (or promises more
/// than the member holds) is not believed.
#[test]
fn npz_header_arithmetic_is_checked() {
    let d = tempfile::tempdir().unwrap();
    let wrap =
        npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (576460752303423588, 24), }");
    let f = write(d.path(), "wrap.npz", zip_one("config_feat.npy", &wrap));
    let e = summarize_npz(&f).unwrap_err().to_string();
    assert!(e.contains("needs more than 2^64 bytes"), "{e}");
    let big = npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 24), }");
    let f = write(d.path(), "big.npz", zip_one("config_feat.npy", &big));
    let e = summarize_npz(&f).unwrap_err().to_string();
    assert!(
        e.contains("truncated: header promises 96000000 data bytes"),
        "{e}"
    );
    fails(
        &["inspect", s(&f)],
        "big.npz: member 'config_feat.npy': truncated",
    );
}

/// A generated tile and layout tree of mlp_train in `dir` (split: everything in train).
fn tree(dir: &Path) -> PathBuf {
    let m = common::sample_path("mlp_train.hlo");
    let out = dir.join("out");
    for c in ["tile", "layout"] {
        ok(&[
            "generate",
            c,
            s(&m),
            "--out",
            s(&out),
            "--configs",
            "10",
            "--quiet",
            "--split",
            "100/0/0",
        ]);
    }
    out
}

/// Every ID of the tree with its true ranking (fastest first), as CSV rows.
fn true_rows(npz: &Path) -> Vec<String> {
    let mut rows = Vec::new();
    for id in tpusim::eval::score::split_ids(npz, "train") {
        let (_, path, tile) = tpusim::eval::score::npz_of(npz, "train", &id).unwrap();
        let y = tpusim::eval::score::npz_runtimes(&path, tile).unwrap();
        let mut idx: Vec<usize> = (0..y.len()).collect();
        idx.sort_by(|&a, &b| y[a].total_cmp(&y[b]));
        let list: Vec<String> = idx.iter().map(|i| i.to_string()).collect();
        rows.push(format!("{id},{}", list.join(";")));
    }
    rows
}

fn score(npz: &Path, csv: &Path, extra: &[&str]) -> Output {
    let mut a = vec![
        "score",
        "--data",
        s(npz),
        "--split",
        "train",
        "--predictions",
        s(csv),
        "--json",
    ];
    a.extend_from_slice(extra);
    tpusim(&a)
}

/// Cases 5, 6 and 9: score validates the npz files it reads and the whole CSV.
#[test]
fn score_validates_npz_files_and_prediction_csvs() {
    let d = tempfile::tempdir().unwrap();
    let out = tree(d.path());
    let npz = out.join("npz");
    let rows = true_rows(&npz);
    assert_eq!(rows.len(), 8, "{rows:?}");
    let csv = |name: &str, rows: &[String], bom: bool| {
        let mut t = if bom {
            "\u{feff}".to_string()
        } else {
            String::new()
        };
        t.push_str("ID,TopConfigs\n");
        for r in rows {
            t.push_str(r);
            t.push('\n');
        }
        write(d.path(), name, t)
    };
    // The true ranking scores 1; with a byte-order mark too (the header is a header).
    let best = csv("best.csv", &rows, false);
    let o = score(&npz, &best, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["final_score"].as_f64().unwrap() > 0.9, "{v}");
    let bom = csv("bom.csv", &rows, true);
    assert_eq!(score(&npz, &bom, &[]).stdout, o.stdout);

    let tile_row = rows.iter().position(|r| r.starts_with("tile:")).unwrap();
    let edit = |f: &dyn Fn(&str) -> String| -> Vec<String> {
        let mut v = rows.clone();
        v[tile_row] = f(&v[tile_row]);
        v
    };
    let (id, list) = rows[tile_row].split_once(',').unwrap();
    let idx: Vec<&str> = list.split(';').collect();
    assert!(idx.len() >= 6);
    // Index 999 or a duplicate at position 6 (past the five that are scored).
    let bad = csv(
        "999.csv",
        &edit(&|_| format!("{id},{};999", idx[..5].join(";"))),
        false,
    );
    fails(
        &[
            "score",
            "--data",
            s(&npz),
            "--split",
            "train",
            "--predictions",
            s(&bad),
        ],
        &format!(
            "{}:{}: config index 999 out of range",
            s(&bad),
            tile_row + 2
        ),
    );
    let dup = csv(
        "dup6.csv",
        &edit(&|_| format!("{id},{};{}", idx[..5].join(";"), idx[0])),
        false,
    );
    fails(
        &[
            "score",
            "--data",
            s(&npz),
            "--split",
            "train",
            "--predictions",
            s(&dup),
        ],
        &format!(
            "{}:{}: config index {} appears twice in the ranking",
            s(&dup),
            tile_row + 2,
            idx[0]
        ),
    );
    // An ID twice; half the IDs missing (accepted only with --allow-missing).
    let mut twice = rows.clone();
    twice.push(rows[0].clone());
    let f = csv("twice.csv", &twice, false);
    fails(
        &[
            "score",
            "--data",
            s(&npz),
            "--split",
            "train",
            "--predictions",
            s(&f),
        ],
        &format!(
            "{}:10: ID '{}' is given twice (first on line 2)",
            s(&f),
            rows[0].split(',').next().unwrap()
        ),
    );
    let half = csv("half.csv", &rows[..4], false);
    fails(
        &[
            "score",
            "--data",
            s(&npz),
            "--split",
            "train",
            "--predictions",
            s(&half),
        ],
        "ranks no configuration of 4 of the 8 graphs of split 'train'",
    );
    assert!(score(&npz, &half, &["--allow-missing"]).status.success());
    // No header.
    let f = write(d.path(), "nohead.csv", rows.join("\n"));
    fails(
        &[
            "score",
            "--data",
            s(&npz),
            "--split",
            "train",
            "--predictions",
            s(&f),
        ],
        ":1: expected the header 'ID,TopConfigs'",
    );

    // A layout runtime of -1 (case 5) is blamed on the npz file, not the CSV (case 9).
    let layout_id = rows.iter().find(|r| r.starts_with("layout:")).unwrap();
    let (_, lpath, _) =
        tpusim::eval::score::npz_of(&npz, "train", layout_id.split(',').next().unwrap()).unwrap();
    let mut arrays = read_npz(&lpath).unwrap();
    let rt = arrays["config_runtime"].as_slice::<i64>().unwrap().to_vec();
    for bad in [-1i64, 0, i64::MIN] {
        let mut v = rt.clone();
        v[3] = bad;
        arrays.insert(
            "config_runtime".into(),
            NpyArray::from_vec(vec![v.len()], v).unwrap(),
        );
        let list: Vec<(&str, &NpyArray)> = arrays.iter().map(|(k, a)| (k.as_str(), a)).collect();
        write_npz(&lpath, &list, Compression::Stored).unwrap();
        let e = fails(
            &[
                "score",
                "--data",
                s(&npz),
                "--split",
                "train",
                "--predictions",
                s(&best),
            ],
            &format!(
                "{}: breaks the TpuGraphs schema: config_runtime must be positive",
                lpath.display()
            ),
        );
        assert!(!e.contains("best.csv"), "{e}");
    }
    arrays.insert(
        "config_runtime".into(),
        NpyArray::from_vec(vec![rt.len()], rt).unwrap(),
    );
    let list: Vec<(&str, &NpyArray)> = arrays.iter().map(|(k, a)| (k.as_str(), a)).collect();
    write_npz(&lpath, &list, Compression::Stored).unwrap();
    assert!(score(&npz, &best, &[]).status.success());
    // A CRC error in a member score does not otherwise need (a tile's config_feat).
    let tile_path = tpusim::eval::score::npz_of(&npz, "train", id).unwrap().1;
    let mut bytes = std::fs::read(&tile_path).unwrap();
    let at = bytes
        .windows(15)
        .position(|w| w == b"config_feat.npy")
        .unwrap();
    bytes[at + 15 + 128 + 40] ^= 0x55;
    std::fs::write(&tile_path, bytes).unwrap();
    fails(
        &[
            "score",
            "--data",
            s(&npz),
            "--split",
            "train",
            "--predictions",
            s(&best),
            "--allow-missing",
        ],
        &format!("{}: member 'config_feat.npy'", tile_path.display()),
    );
}

/// Case 7: contradictions and out-of-range values in configs and targets are errors;
/// unknown extensions are refused.
#[test]
fn configs_and_targets_are_checked() {
    let d = tempfile::tempdir().unwrap();
    let m = common::sample_path("mlp_train.hlo");
    let c = write(
        d.path(),
        "c.toml",
        "[fusion]\noverrides = [{ producer = \"constant.5\", consumer = \"max.2\", fuse = false }, { producer = \"constant.5\", consumer = \"max.2\", fuse = true }]\n",
    );
    fails(
        &["estimate", s(&m), "--config", s(&c)],
        "fusion override 'constant.5' (#1) -> 'max.2' (#2) is given twice",
    );
    let y = write(d.path(), "c.yaml", "{}");
    fails(
        &["estimate", s(&m), "--config", s(&y)],
        "c.yaml: a configuration file must end in .json or .toml",
    );
    // A configuration that does not parse is named once, with where it goes wrong.
    let j = write(d.path(), "c.json", "{\"layouts\": []}");
    let e = fails(
        &["estimate", s(&m), "--config", s(&j)],
        &format!(
            "error: cannot read compilation config {}: unknown field `layouts`",
            s(&j)
        ),
    );
    assert_eq!(e.matches("c.json").count(), 1, "{e}");
    for (kv, want) in [
        (
            "vmem_limit_bytes = 1",
            "invalid target field `vmem_limit_bytes`: must lie in [1048576, 4294967296], got 1",
        ),
        (
            "clock_hz = 1e-300",
            "invalid target field `clock_hz`: must lie in [100000000, 10000000000], got 1e-300",
        ),
        (
            "grid_step_overhead_ns = 1e300",
            "`grid_step_overhead_ns`: must lie in [0, 1000000000], got 1e300",
        ),
        (
            "peak_bf16_flops = 1e200",
            "`peak_bf16_flops`: must lie in [100000000000, 1e17], got 1e200",
        ),
    ] {
        let t = write(d.path(), "t.toml", format!("preset = \"v3\"\n{kv}\n"));
        fails(
            &["estimate", s(&m), "--tpu", s(&t)],
            &format!(
                "t.toml: invalid target field {}",
                want.trim_start_matches("invalid target field ")
            ),
        );
    }
    let t = write(d.path(), "t.yaml", "preset = \"v3\"\n");
    fails(
        &["estimate", s(&m), "--tpu", s(&t)],
        "t.yaml: a target file must end in .json or .toml",
    );
}

/// Case 8: a corrupted binary proto says it is binary and where decoding failed.
#[test]
fn corrupted_proto_is_named_as_such() {
    let d = tempfile::tempdir().unwrap();
    let mut b = std::fs::read(common::sample_path("mlp_train.hlo.pb")).unwrap();
    b[0] = 0xff;
    b[1] = 0xff;
    let f = write(d.path(), "flip.pb", b);
    let e = fails(
        &["parse", s(&f)],
        "flip.pb: error: binary data, not HLO text: not a valid xla.HloModuleProto",
    );
    assert!(e.contains("at byte"), "{e}");
    assert!(!e.contains("UTF-8"), "{e}");
}

/// Cases 10, 11 and 12: output trees: errors name the path; temporary files of dead runs
/// go; a second writer with other options is refused.
#[test]
fn output_tree_faults() {
    let d = tempfile::tempdir().unwrap();
    let m = common::sample_path("mlp_train.hlo");
    // An --out that cannot be a folder: one line, the path and the cause.
    let file = write(d.path(), "file", "x");
    let e = fails(
        &[
            "generate",
            "tile",
            s(&m),
            "--out",
            s(&file.join("out")),
            "--quiet",
        ],
        &format!(
            "{}/out/.tpusim-generate: create folder: Not a directory",
            s(&file)
        ),
    );
    assert_eq!(e.lines().count(), 1, "{e}");
    // Leftovers of a killed run are removed by the next run.
    let out = d.path().join("out");
    ok(&[
        "generate",
        "tile",
        s(&m),
        "--out",
        s(&out),
        "--configs",
        "5",
        "--quiet",
    ]);
    let train = out.join("npz/tile/xla/train");
    let stale = [
        train.join(".mlp_train_0000000000000000.npz.4242.0.tmp"),
        out.join("manifest/tile/.mlp_train.json.4242.Xy12ab.tmp"),
    ];
    for f in &stale {
        std::fs::write(f, vec![0u8; 1000]).unwrap();
    }
    let o = tpusim(&[
        "generate",
        "tile",
        s(&m),
        "--out",
        s(&out),
        "--configs",
        "5",
    ]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout)
        .contains("removed 2 temporary file(s) left by interrupted runs"));
    assert!(stale.iter().all(|f| !f.exists()));
    // While a run with another seed holds the tree, a second writer is refused; one
    // with the same options (a shard) may share it.
    let opts = |seed: &str| {
        let o = tpusim(&[
            "generate",
            "tile",
            s(&m),
            "--out",
            s(&out),
            "--configs",
            "5",
            "--seed",
            seed,
            "--quiet",
        ]);
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let meta = out.join(".tpusim-generate/tile.json");
    let theirs: serde_json::Value = serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    let held = tpusim::dataset::outdir::claim(&out, "tile", &theirs, &[]).unwrap();
    let (code, err) = opts("7");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("another tpusim generate is writing collection 'tile' of this tree with other options (seed: 0 there, 7 here)"), "{err}");
    let (code, err) = opts("0");
    assert_eq!(code, Some(0), "{err}");
    drop(held);
    assert_eq!(opts("7").0, Some(0));
}

/// Case 13: endless inputs are refused at a documented limit, not read until memory
/// runs out.
#[test]
fn endless_inputs_are_refused() {
    if !Path::new("/dev/zero").exists() {
        eprintln!("skipped: endless_inputs_are_refused: no /dev/zero");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let m = common::sample_path("mlp_train.hlo");
    let z = d.path().join("zero.toml");
    std::os::unix::fs::symlink("/dev/zero", &z).unwrap();
    fails(
        &["estimate", s(&m), "--config", s(&z)],
        "larger than 64 MiB, the most tpusim reads of this kind of input",
    );
    fails(&["estimate", s(&m), "--tpu", s(&z)], "larger than 64 MiB");
    let zc = d.path().join("zero.csv");
    std::os::unix::fs::symlink("/dev/zero", &zc).unwrap();
    fails(
        &["score", "--data", s(d.path()), "--predictions", s(&zc)],
        "zero.csv",
    );
    // A module file of zeros is refused at its first byte (not after 2 GiB).
    let zm = d.path().join("zero.hlo");
    std::os::unix::fs::symlink("/dev/zero", &zm).unwrap();
    for cmd in ["parse", "estimate", "inspect"] {
        fails(
            &[cmd, s(&zm)],
            "neither HLO text nor a protobuf message (it starts with the byte 0x00)",
        );
    }
    fails(
        &[
            "estimate",
            s(&zm),
            "--runs",
            "--out",
            s(&d.path().join("r.csv")),
        ],
        "zero.hlo",
    );
}
