//! `scripts/pgo-build`: its training workload and its byte-for-byte check, run with the
//! binary under test (the PGO builds themselves take minutes and LLVM's tools, and are
//! not run here), so that the script keeps up with the command line.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::files_below;

fn script(args: &[&str]) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    Command::new("bash")
        .arg(root.join("scripts/pgo-build"))
        .args(args)
        .output()
        .expect("bash runs the script")
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tpusim")
}

#[test]
fn the_training_workload_writes_its_collections() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("train");
    let o = script(&["--workload", bin(), out.to_str().unwrap()]);
    assert!(
        o.status.success(),
        "the workload failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // four modules of random layouts, one of default-search layouts, and one tile file
    // per kernel of ResNet-18 inference (36) and BERT-base inference (22)
    let random = files_below(&out.join("npz/layout/xla/random"), ".npz");
    let names: Vec<String> = random
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(
        names,
        [
            "bert_base_infer_b8s128.npz",
            "mlp_train.npz",
            "resnet18_infer_b8.npz",
            "resnet50_train_b8.npz"
        ]
    );
    assert_eq!(
        files_below(&out.join("default/npz/layout/xla/default"), ".npz").len(),
        1
    );
    assert_eq!(files_below(&out.join("npz/tile/xla"), ".npz").len(), 58);
}

#[test]
fn the_check_passes_equal_binaries_and_stops_a_different_one() {
    let tmp = tempfile::tempdir().unwrap();
    let check = tmp.path().join("check");
    let check = check.to_str().unwrap();

    let same = script(&["--compare", bin(), bin(), check]);
    assert!(
        same.status.success(),
        "equal binaries refused:\n{}",
        String::from_utf8_lossy(&same.stderr)
    );
    assert!(String::from_utf8_lossy(&same.stdout).contains("the same files as"));
    assert!(!Path::new(check).exists(), "the compared files are removed");

    // a "binary" that samples other configurations writes other files
    let other = tmp.path().join("other-seed");
    std::fs::write(
        &other,
        format!("#!/bin/sh\nexec '{}' \"$@\" --seed 7\n", bin()),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let differ = script(&["--compare", bin(), other.to_str().unwrap(), check]);
    assert!(!differ.status.success(), "different files passed the check");
    assert!(String::from_utf8_lossy(&differ.stderr).contains("write different files"));
    assert!(
        Path::new(check).join("b/npz").exists(),
        "the differing files are kept"
    );
}
