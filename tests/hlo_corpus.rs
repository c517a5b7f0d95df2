//! The text front end on the real corpus: every module parses, round-trips to an equal
//! IR, and XLA's own parser accepts our printed text.

mod common;

use std::path::PathBuf;
use tpusim::hlo::{parse_module, print_module, split_modules};

fn modules_of(path: &PathBuf) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).expect("corpus file is UTF-8");
    split_modules(&text)
        .into_iter()
        .enumerate()
        .map(|(i, (_, m))| (format!("{}#{i}", path.display()), m.to_string()))
        .collect()
}

fn corpus_or_samples() -> Vec<PathBuf> {
    match common::corpus_files() {
        Some(v) => v,
        None => {
            // Not a skip: the test runs on hlo_samples/ alone.
            eprintln!("the shared corpus is absent: checking hlo_samples/ only");
            common::sample_files()
        }
    }
}

#[test]
fn every_corpus_module_parses_and_round_trips() {
    let files = corpus_or_samples();
    assert!(!files.is_empty());
    let mut modules = 0;
    for f in &files {
        for (label, text) in modules_of(f) {
            let m = parse_module(&label, &text).unwrap_or_else(|e| panic!("{e}"));
            let printed = print_module(&m);
            let m2 = parse_module(&format!("{label} (printed)"), &printed)
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(m == m2, "{label}: parse(print(m)) differs from m");
            // Printing is canonical: a second round gives the same text.
            assert_eq!(
                print_module(&m2),
                printed,
                "{label}: printing is not stable"
            );
            modules += 1;
        }
    }
    if common::shared_dir().is_some() {
        // 24 JAX files + 43 XLA files, one module each after splitting.
        assert_eq!(files.len(), 67);
        assert_eq!(modules, 67);
    }
}

#[test]
fn known_module_sizes() {
    let samples = common::sample_files();
    let find = |n: &str| samples.iter().find(|p| p.ends_with(n)).cloned().expect(n);
    let text = std::fs::read_to_string(find("resnet50_train_b8.optimized.hlo")).unwrap();
    let m = parse_module("r50", &text).unwrap();
    assert_eq!(m.computations.len(), 1503);
    assert_eq!(m.instruction_count(), 15040);
    assert_eq!(m.entry().name, "main.442");
    let text = std::fs::read_to_string(find("mlp_train.hlo")).unwrap();
    let m = parse_module("mlp", &text).unwrap();
    assert_eq!(m.name, "jit__lambda");
    assert!(m.stack_frames.is_none());
    // The optimised dump carries the 2026 stack-frame section, kept verbatim.
    let text = std::fs::read_to_string(find("resnet50_train_b8.optimized.hlo")).unwrap();
    let m = parse_module("r50", &text).unwrap();
    let sf = m.stack_frames.as_deref().unwrap();
    assert!(sf.starts_with("FileNames") && sf.contains("StackFrames"));
}

#[test]
fn xla_parser_accepts_our_printed_text() {
    if !common::has(common::Need::Jax, "xla_parser_accepts_our_printed_text") {
        return;
    }
    let Some(shared) = common::shared("xla_parser_accepts_our_printed_text") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for f in corpus_or_samples() {
        for (i, (label, text)) in modules_of(&f).into_iter().enumerate() {
            let m = parse_module(&label, &text).unwrap();
            let p = dir.path().join(format!(
                "{}_{i}.hlo",
                f.file_name().unwrap().to_string_lossy()
            ));
            std::fs::write(&p, print_module(&m)).unwrap();
            paths.push(p);
        }
    }
    let stdout = common::xla_oracle(&shared, &paths);
    let ok = stdout.lines().filter(|l| l.starts_with("ok\t")).count();
    let bad: Vec<&str> = stdout.lines().filter(|l| !l.starts_with("ok\t")).collect();
    assert!(bad.is_empty(), "XLA rejected: {bad:#?}");
    assert_eq!(ok, paths.len());
}
