//! `analysis::compiled_for` on real files: which inputs it calls CPU- or GPU-compiled,
//! and that plain HLO never is (the shipped samples always; the shared corpus when
//! `../shared` is present). The `tpusim` warning it drives is checked at the end.

mod common;

use std::path::Path;

use tpusim::analysis::{compiled_for, Backend};
use tpusim::hlo::{parse_module, split_modules};

/// The backend of every module of a file (`--split-modules` style for the XLA tests).
fn backends(path: &Path) -> Vec<Option<Backend>> {
    let text = std::fs::read_to_string(path).expect("readable");
    let name = path.display().to_string();
    split_modules(&text)
        .into_iter()
        .map(|(_, part)| {
            let m = parse_module(&name, part).unwrap_or_else(|e| panic!("{name}: {e}"));
            compiled_for(&m).map(|c| c.backend)
        })
        .collect()
}

fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn shipped_samples_only_the_optimized_one_is_cpu_compiled() {
    let mut got = Vec::new();
    for p in common::sample_files() {
        got.push((file_name(&p), backends(&p)));
    }
    let want: Vec<(String, Vec<Option<Backend>>)> = [
        ("bert_base_infer_b8s128.hlo", None),
        ("mlp_train.hlo", None),
        ("resnet18_infer_b8.hlo", None),
        ("resnet50_train_b8.hlo", None),
        ("resnet50_train_b8.optimized.hlo", Some(Backend::Cpu)),
    ]
    .into_iter()
    .map(|(n, b)| (n.to_string(), vec![b]))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn optimized_sample_evidence() {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("hlo_samples/resnet50_train_b8.optimized.hlo");
    let m = parse_module("s", &std::fs::read_to_string(p).unwrap()).unwrap();
    let c = compiled_for(&m).expect("CPU-compiled");
    let marks: Vec<(&str, usize)> = c.marks.iter().map(|m| (m.what, m.count)).collect();
    assert_eq!(
        marks,
        [
            ("__ynn_fusion fusions", 445),
            ("instructions with outer_dimension_partitions", 1027),
        ]
    );
    assert!(c.scheduled);
}

#[test]
fn jax_corpus_optimized_files_are_cpu_compiled_and_the_others_not() {
    let Some(shared) =
        common::shared("jax_corpus_optimized_files_are_cpu_compiled_and_the_others_not")
    else {
        return;
    };
    let files = common::files_with_suffix(&shared.join("hlo_corpus/jax"), ".hlo");
    assert!(files.len() >= 24, "{} files", files.len());
    for p in files {
        let want = file_name(&p)
            .ends_with(".optimized.hlo")
            .then_some(Backend::Cpu);
        assert_eq!(backends(&p), vec![want], "{}", p.display());
    }
}

#[test]
fn xla_corpus_only_the_triton_tests_are_gpu_compiled() {
    let Some(shared) = common::shared("xla_corpus_only_the_triton_tests_are_gpu_compiled") else {
        return;
    };
    let mut flagged = Vec::new();
    for p in common::files_with_suffix(&shared.join("hlo_corpus/xla"), ".hlo") {
        for b in backends(&p).into_iter().flatten() {
            flagged.push((file_name(&p), b));
        }
    }
    assert_eq!(
        flagged,
        [
            (
                "service__gpu__tests__triton_naming.hlo".to_string(),
                Backend::Gpu
            ),
            (
                "tools__multihost_hlo_runner__data__multiple_gemm_fusions.hlo".to_string(),
                Backend::Gpu
            ),
        ]
    );
}

#[test]
fn tpusim_warns_on_the_optimized_sample_only() {
    let bin = env!("CARGO_BIN_EXE_tpusim");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = |file: &str| {
        let out = std::process::Command::new(bin)
            .current_dir(dir)
            .args(["parse", file])
            .output()
            .expect("tpusim runs");
        assert!(out.status.success(), "{file}");
        String::from_utf8(out.stderr).unwrap()
    };
    assert_eq!(run("hlo_samples/resnet50_train_b8.hlo"), "");
    assert_eq!(
        run("hlo_samples/resnet50_train_b8.optimized.hlo"),
        "warning: hlo_samples/resnet50_train_b8.optimized.hlo: looks compiled for XLA:CPU \
         (445 __ynn_fusion fusions such as ynn_fusion.444, 1027 instructions with \
         outer_dimension_partitions such as wrapped_iota, is_scheduled=true); TPU estimates \
         from it are meaningless: feed the unoptimized HLO (see docs/jax.md)\n"
    );
}
