//! Pins the output of the compiler passes on the shared JAX corpus: for the default and a
//! few random layout configurations of every model, a text snapshot
//! (`tests/snapshots/passes_pinned__MODEL-CONFIG.snap`, compared with `insta`) of the
//! counters (kernels, copies, bitcasts, fusions, input and output instructions), a
//! checksum of the kernel list (JSON) and of the printed compiled module (the module
//! text is too large to keep: ResNet-50 training compiles to ~18K instructions), and
//! one line per kernel. Any change to what the passes produce fails here, and the diff
//! of the kernel lines shows which kernels changed. After an intended change of
//! behaviour (or of the HLO printer) run the test with `TPUSIM_REPIN=1` to rewrite the
//! snapshots, and review them with `git diff`.

mod common;

use tpusim::hlo::{parse_module, print_module};
use tpusim::passes::{CompilationConfig, PreparedModule};

/// 64-bit FNV-1a (stable across platforms and Rust versions).
fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

const MODELS: &[&str] = &[
    "bert_base_infer_b8s128",
    "bert_bf16_infer_b16s128",
    "bert_small_train_b8s128",
    "effnet_b0_infer_b8",
    "effnet_b0_train_b4",
    "lstm_train",
    "misc_ops",
    "mlp_train",
    "resnet18_bf16_infer_b16",
    "resnet18_infer_b8",
    "resnet50_infer_b4",
    "resnet50_train_b8",
];
const SEEDS: &[u64] = &[0, 1, 7];

/// The snapshot of one compilation: the counters, the two checksums, and one line per
/// kernel (index, name, kind, hero opcode, output shapes with their layouts, fused
/// instruction count, parameter count, tile bounds and call site when set).
fn snapshot(c: &tpusim::passes::CompiledModule, printed: &str) -> String {
    use std::fmt::Write;
    let st = &c.stats;
    let mut s = String::new();
    let _ = writeln!(s, "kernels: {}", c.kernels.len());
    let _ = writeln!(s, "copies inserted: {}", st.copies_inserted);
    let _ = writeln!(s, "bitcasts: {}", st.bitcasts);
    let _ = writeln!(s, "fusions: {}", st.fusions);
    let _ = writeln!(s, "input instructions: {}", st.input_instructions);
    let _ = writeln!(s, "output instructions: {}", st.output_instructions);
    let _ = writeln!(
        s,
        "kernels JSON FNV-1a: 0x{:016x}",
        fnv(c.kernels_json().as_bytes())
    );
    let _ = writeln!(
        s,
        "printed module FNV-1a: 0x{:016x}",
        fnv(printed.as_bytes())
    );
    for n in &c.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s.push_str(concat!(
        "--- kernels: index name kind hero -> outputs i=instructions p=parameters",
        " [tile] [in ROLE of INSTRUCTION xTRIPS]\n"
    ));
    for k in &c.kernels {
        let outs: Vec<String> = k.outputs.iter().map(|o| o.text()).collect();
        let _ = write!(
            s,
            "{} {} {} {} -> {} i={} p={}",
            k.index,
            k.name,
            k.kind.name(),
            k.hero,
            outs.join(" "),
            k.instruction_count,
            k.parameters.len()
        );
        if let Some(t) = &k.tile {
            let _ = write!(
                s,
                " tile out={:?} kernel={:?} in={:?}",
                t.output_bounds, t.kernel_bounds, t.input_bounds
            );
        }
        if let Some(cs) = &k.call_site {
            let _ = write!(s, " in {} of {}", cs.role, cs.instruction);
            if let Some(n) = cs.trip_count {
                let _ = write!(s, " x{n}");
            }
        }
        s.push('\n');
    }
    s
}

#[test]
fn compiled_outputs_are_pinned() {
    let Some(dir) = common::shared("compiled_outputs_are_pinned") else {
        return;
    };
    // A mismatch fails whatever the environment says (INSTA_UPDATE=always or
    // INSTA_FORCE_PASS would otherwise let it pass), and a plain `cargo test` writes no
    // `.snap.new` files; TPUSIM_REPIN=1 rewrites the snapshots in place instead (after an
    // intended change: review them with `git diff`). The workspace root is given so
    // that insta need not run `cargo metadata`.
    let repin = std::env::var_os("TPUSIM_REPIN").is_some();
    std::env::set_var("INSTA_UPDATE", if repin { "always" } else { "no" });
    std::env::remove_var("INSTA_FORCE_PASS");
    std::env::set_var("INSTA_WORKSPACE_ROOT", env!("CARGO_MANIFEST_DIR"));
    let mut failed: Vec<String> = Vec::new();
    for &name in MODELS {
        let path = dir.join("hlo_corpus/jax").join(format!("{name}.hlo"));
        let text = std::fs::read_to_string(&path).unwrap();
        let m = parse_module(&path.display().to_string(), &text).unwrap();
        let p = PreparedModule::new(&m).unwrap();
        let configs = std::iter::once((None, CompilationConfig::default())).chain(
            SEEDS
                .iter()
                .map(|&s| (Some(s), CompilationConfig::random_layouts(&m, s))),
        );
        for (seed, cfg) in configs {
            let c = p.compile(&cfg).unwrap();
            let k = p.compile_bodies(&cfg).unwrap();
            assert_eq!(k.kernels, c.kernels, "{name} {seed:?}: compile_bodies");
            assert_eq!(k.stats, c.stats, "{name} {seed:?}: compile_bodies stats");
            let one_shot = tpusim::passes::compile(&m, &cfg).unwrap();
            assert_eq!(one_shot.kernels, c.kernels, "{name} {seed:?}: compile");
            let printed = print_module(&c.module);
            assert_eq!(printed, print_module(&one_shot.module), "{name} {seed:?}");
            let config = match seed {
                None => "default".to_string(),
                Some(s) => format!("random_layouts({s})"),
            };
            let snap_name = match seed {
                None => format!("{name}-default"),
                Some(s) => format!("{name}-seed{s}"),
            };
            let body = snapshot(&c, &printed);
            // Every snapshot is compared (each mismatch prints its diff) before failing.
            let compared = std::panic::catch_unwind(|| {
                insta::with_settings!({
                    description => format!("{name}, {config}"),
                    omit_expression => true,
                }, {
                    insta::assert_snapshot!(snap_name.as_str(), body);
                });
            });
            if compared.is_err() {
                failed.push(snap_name);
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} snapshot(s) differ (diffs above): {}",
        failed.len(),
        failed.join(", ")
    );
}
