//! Thousands of randomly truncated and byte-mutated modules: the parser returns Ok or
//! Err, never panics. Seeded, so failures reproduce.

mod common;

use tpusim::hlo::{parse_module, print_module};

const INTERESTING: &[u8] = b"{}()[],=:%\"/*\n -0123456789xT_<>?";

#[test]
fn truncated_and_mutated_modules_never_panic() {
    let mut inputs: Vec<String> = Vec::new();
    for f in common::sample_files() {
        let t = std::fs::read_to_string(&f).unwrap();
        if t.len() < 100_000 {
            inputs.push(t);
        }
    }
    if let Some(files) = common::corpus_files() {
        for f in files {
            let t = std::fs::read_to_string(&f).unwrap();
            if t.len() < 40_000 {
                inputs.push(t);
            }
        }
    }
    assert!(!inputs.is_empty());
    let mut rng = common::SplitMix(0x5EED);
    let (mut ok, mut err) = (0, 0);
    for round in 0..4000 {
        let src = &inputs[round % inputs.len()];
        let mut bytes = src.as_bytes().to_vec();
        match rng.below(3) {
            0 => bytes.truncate(rng.below(bytes.len())),
            1 => {
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(bytes.len());
                    bytes[i] = INTERESTING[rng.below(INTERESTING.len())];
                }
            }
            _ => {
                let i = rng.below(bytes.len());
                let j = (i + rng.below(64)).min(bytes.len());
                bytes.drain(i..j);
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        match parse_module("fuzz.hlo", &text) {
            Ok(m) => {
                ok += 1;
                // Whatever parses must also print and re-parse.
                let printed = print_module(&m);
                assert!(
                    parse_module("fuzz-printed.hlo", &printed).is_ok(),
                    "round {round}"
                );
            }
            Err(e) => {
                err += 1;
                assert!(e.to_string().starts_with("fuzz.hlo"), "{e}");
            }
        }
    }
    assert!(
        err > 1000,
        "mutations should mostly break the module ({ok} ok, {err} err)"
    );
}
