//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `../shared` beside the repository (or `$TPUSIM_SHARED`), if present.
pub fn shared_dir() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("TPUSIM_SHARED") {
        let p = PathBuf::from(p);
        if p.is_dir() {
            return Some(p);
        }
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    p.is_dir().then_some(p)
}

/// Files in `dir` whose names end with `suffix`, sorted.
pub fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_string_lossy().ends_with(suffix))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The HLO text corpus: every `jax/*.hlo` and `xla/*.hlo` file.
pub fn corpus_files() -> Option<Vec<PathBuf>> {
    let s = shared_dir()?;
    let mut v = files_with_suffix(&s.join("hlo_corpus/jax"), ".hlo");
    v.extend(files_with_suffix(&s.join("hlo_corpus/xla"), ".hlo"));
    Some(v)
}

/// `hlo_samples/` shipped with the project.
pub fn sample_files() -> Vec<PathBuf> {
    files_with_suffix(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("hlo_samples"),
        ".hlo",
    )
}

/// Whether `python3 -c CODE` runs successfully.
pub fn python_has(code: &str) -> bool {
    std::process::Command::new("python3")
        .args(["-c", code])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// A small seeded generator (SplitMix64) for the mutation tests.
pub struct SplitMix(pub u64);
impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}
