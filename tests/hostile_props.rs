//! Property tests over every reader of hostile input: the binary protos (`.pb`), HLO
//! text, npz files, compilation configs, TPU targets and prediction CSVs. Each case
//! mutates a real input (bit flips, overwrites, truncation, insertions, duplicated
//! spans) or builds one from random fields, and asserts: no panic, and either `Ok`
//! (whose result is sane: it prints and parses again, its numbers are finite) or an
//! error that says where (the file, and for text the line).
//!
//! `PROPTEST_CASES` sets the cases per property (default 48, a few seconds in all); a
//! longer campaign: `PROPTEST_CASES=5000 cargo test --release --test hostile_props`.

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;

use proptest::prelude::*;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// One edit of a byte string.
#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Duplicate(usize, usize),
    Delete(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let interesting = prop::sample::select(
        b"{}()[],=:%\"/*\n -0123456789x?<>\x00\x08\x0a\x12\x1a\x22\xff\x80".to_vec(),
    );
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Edit::Flip(i, 1 << b)),
        (any::<usize>(), prop_oneof![interesting, any::<u8>()]).prop_map(|(i, b)| Edit::Set(i, b)),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..12))
            .prop_map(|(i, v)| Edit::Insert(i, v)),
        (any::<usize>(), 1usize..200).prop_map(|(i, n)| Edit::Duplicate(i, n)),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| Edit::Delete(i, n)),
    ]
}

fn apply(base: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut b = base.to_vec();
    for e in edits {
        let len = b.len().max(1);
        match e {
            Edit::Flip(i, m) => {
                if let Some(x) = b.get_mut(i % len) {
                    *x ^= m;
                }
            }
            Edit::Set(i, v) => {
                if let Some(x) = b.get_mut(i % len) {
                    *x = *v;
                }
            }
            Edit::Truncate(i) => b.truncate(i % len),
            Edit::Insert(i, v) => {
                let at = (i % len).min(b.len());
                b.splice(at..at, v.iter().copied());
            }
            Edit::Duplicate(i, n) => {
                let at = (i % len).min(b.len());
                let end = (at + n).min(b.len());
                let span = b[at..end].to_vec();
                b.splice(end..end, span);
            }
            Edit::Delete(i, n) => {
                let at = (i % len).min(b.len());
                let end = (at + n).min(b.len());
                b.drain(at..end);
            }
        }
    }
    b
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec(edit(), 1..6)
}

/// A small generated tree (mlp_train: tile and layout, npz and `.pb`), made once.
fn tree() -> &'static PathBuf {
    static T: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &T.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        for c in ["tile", "layout"] {
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tpusim"));
            cmd.args(["generate", c])
                .arg(common::sample_path("mlp_train.hlo"))
                .arg("--out")
                .arg(&out)
                .args(["--configs", "8", "--pb", "--quiet", "--split", "100/0/0"]);
            common::run_ok(&mut cmd);
        }
        (d, out)
    })
    .1
}

fn first_file(dir: PathBuf, ext: &str) -> Vec<u8> {
    let f = common::files_with_suffix(&dir, ext)
        .into_iter()
        .next()
        .expect("a generated file");
    std::fs::read(f).unwrap()
}

fn text_sample() -> &'static [u8] {
    static T: OnceLock<Vec<u8>> = OnceLock::new();
    T.get_or_init(|| std::fs::read(common::sample_path("mlp_train.hlo")).unwrap())
}

fn module_pb() -> &'static [u8] {
    static T: OnceLock<Vec<u8>> = OnceLock::new();
    T.get_or_init(|| std::fs::read(common::sample_path("mlp_train.hlo.pb")).unwrap())
}

fn tuning_pb() -> &'static [u8] {
    static T: OnceLock<Vec<u8>> = OnceLock::new();
    T.get_or_init(|| first_file(tree().join("pb/layout/xla/random/train"), ".pb"))
}

fn tile_npz() -> &'static [u8] {
    static T: OnceLock<Vec<u8>> = OnceLock::new();
    T.get_or_init(|| first_file(tree().join("npz/tile/xla/train"), ".npz"))
}

fn layout_npz() -> &'static [u8] {
    static T: OnceLock<Vec<u8>> = OnceLock::new();
    T.get_or_init(|| first_file(tree().join("npz/layout/xla/random/train"), ".npz"))
}

/// What every module that reads without error must also do: print as text that parses
/// to the same module, and cost to finite numbers.
fn sane_module(m: &tpusim::ir::Module) -> Result<(), TestCaseError> {
    let text = tpusim::hlo::print_module(m);
    let again = tpusim::hlo::parse_module("printed.hlo", &text);
    prop_assert!(
        again.is_ok(),
        "printed text does not parse: {:?}",
        again.err()
    );
    let c = tpusim::analysis::analyze_module(m);
    prop_assert!(
        c.flops.is_finite() && c.bytes_accessed.is_finite() && c.transcendentals.is_finite(),
        "{c:?}"
    );
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// HLO text: parse errors are `fuzz.hlo:LINE:COL: …` (or name the file).
    #[test]
    fn hlo_text(e in edits()) {
        let bytes = apply(text_sample(), &e);
        let text = String::from_utf8_lossy(&bytes);
        match tpusim::hlo::parse_module("fuzz.hlo", &text) {
            Ok(m) => sane_module(&m)?,
            Err(err) => prop_assert!(err.to_string().starts_with("fuzz.hlo"), "{err}"),
        }
    }

    /// `HloModuleProto` bytes, and the `ModuleTuningData` files `generate --pb` writes.
    #[test]
    fn binary_protos(e in edits(), tuning in any::<bool>()) {
        let base = if tuning { tuning_pb() } else { module_pb() };
        let bytes = apply(base, &e);
        match tpusim::proto::modules_from_binary(&bytes) {
            Ok(mods) => for m in &mods { sane_module(m)?; },
            Err(err) => prop_assert!(!err.to_string().is_empty()),
        }
        let _ = tpusim::proto::inspect_bytes(&bytes);
        let _ = tpusim::proto::read_tuning(&bytes);
    }

    /// npz files (ours, tile and layout): `summarize` (what inspect and score run) gives
    /// a summary or an error naming the file; a summary without violations has finite,
    /// positive runtimes.
    #[test]
    fn npz_files(e in edits(), layout in any::<bool>()) {
        let base = if layout { layout_npz() } else { tile_npz() };
        let bytes = apply(base, &e);
        let r = tpusim::dataset::npz::NpzReader::from_reader(std::io::Cursor::new(bytes), "fuzz.npz")
            .and_then(|mut r| r.summarize());
        match r {
            Ok(s) => if s.is_valid() {
                let lo = s.runtime_min.unwrap_or(1.0);
                let hi = s.runtime_max.unwrap_or(1.0);
                prop_assert!(lo > 0.0 && hi.is_finite(), "{s}");
            },
            Err(err) => prop_assert!(err.to_string().starts_with("fuzz.npz"), "{err}"),
        }
    }

    /// Compilation configs (TOML), mutated from a valid one: Ok configs compile or fail
    /// with an error; none panics.
    #[test]
    fn compilation_configs(e in edits(), json in any::<bool>()) {
        let base: &[u8] = if json {
            br#"{"fusion": {"policy": "aggressive", "overrides": [{"producer": "constant.5", "consumer": "max.2", "fuse": false}]}, "layout": [{"node": 2, "output": [1, 0]}], "tile": [{"kernel": 0, "output_bounds": [1, 2]}]}"#
        } else {
            b"[fusion]\npolicy = \"xla\"\noverrides = [{ producer = \"constant.5\", consumer = \"max.2\", fuse = true }]\n\n[[layout]]\nnode = \"dot_general.5\"\noutput = [0, 1]\n\n[[tile]]\nkernel = 1\noutput_bounds = [1, 8]\n"
        };
        let bytes = apply(base, &e);
        let text = String::from_utf8_lossy(&bytes);
        let cfg = if json {
            tpusim::passes::CompilationConfig::from_json_str(&text)
        } else {
            tpusim::passes::CompilationConfig::from_toml_str(&text)
        };
        if let Ok(cfg) = cfg {
            static M: OnceLock<tpusim::ir::Module> = OnceLock::new();
            let m = M.get_or_init(|| {
                tpusim::hlo::parse_module("mlp.hlo", std::str::from_utf8(text_sample()).unwrap()).unwrap()
            });
            let _ = tpusim::passes::compile(m, &cfg);
        }
    }

    /// TPU targets with random field values: a target that validates has every field in
    /// its range, and estimates a kernel to a finite time.
    #[test]
    fn tpu_targets(field in 0usize..21, value in prop_oneof![
        any::<f64>(), -1e3f64..1e3, 0f64..1e12, Just(0.0), Just(1e300), Just(-0.0)
    ]) {
        let (name, _, _) = tpusim::tpu::target::FIELD_RANGES[field];
        let is_int = matches!(name, "cores_per_chip" | "mxus_per_core" | "mxu_size" | "sublanes" | "lanes" | "alus_per_lane" | "hbm_capacity_bytes" | "vmem_bytes" | "vmem_limit_bytes");
        let v = if is_int { format!("{}", value.abs().min(1e18).trunc() as u64) } else if value.is_finite() { format!("{value:e}") } else { "nan".into() };
        let text = format!("preset = \"v3\"\n{name} = {v}\n");
        if let Ok(t) = tpusim::tpu::TpuTarget::from_toml_str(&text) {
            for &(f, lo, hi) in tpusim::tpu::target::FIELD_RANGES {
                let x: f64 = serde_json::to_value(&t).unwrap()[f].as_f64().unwrap();
                prop_assert!(x >= lo && x <= hi, "{f} = {x}");
            }
            static M: OnceLock<tpusim::ir::Module> = OnceLock::new();
            let m = M.get_or_init(|| {
                tpusim::hlo::parse_module("mlp.hlo", std::str::from_utf8(text_sample()).unwrap()).unwrap()
            });
            if let Ok(c) = tpusim::passes::compile(m, &Default::default()) {
                if let Ok(e) = tpusim::kernels::estimate_program(&c.module, &t, &Default::default()) {
                    prop_assert!(e.total_ns.is_finite() && e.total_ns > 0.0, "{}", e.total_ns);
                }
            }
        }
    }

    /// Prediction CSVs, mutated from a valid one: errors name the file.
    #[test]
    fn prediction_csvs(e in edits()) {
        let base = b"ID,TopConfigs\ntile:xla:a_0123456789abcdef,0;1;2;3;4;5\nlayout:xla:random:a,2;0;1\n\"tile:xla:q\",\"1;0\"\n";
        let bytes = apply(base, &e);
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("fuzz.csv");
        std::fs::write(&f, &bytes).unwrap();
        match tpusim::eval::score::read_submission(&f) {
            Ok(r) => {
                let mut ids: Vec<&str> = r.iter().map(|x| x.id.as_str()).collect();
                let n = ids.len();
                ids.sort_unstable();
                ids.dedup();
                prop_assert_eq!(ids.len(), n, "duplicate IDs accepted");
                let _ = tpusim::eval::score::score_rankings(&tree().join("npz"), "train", &r);
            }
            Err(err) => prop_assert!(err.to_string().starts_with(f.to_str().unwrap()), "{err}"),
        }
    }
}
