//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `$TPUSIM_SHARED` if it names a folder, else `../shared` beside the repository, if
/// present. The one place the tests look for it.
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

/// What some tests need beyond the clone. A test that needs one calls [`has`] (or
/// [`shared`]) and returns early when it is absent, printing why; `.ci/needs` finds
/// those tests by these names (`Need::…`, `common::shared(`) and lists, before the
/// suite runs, which of them will skip here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// `../shared` (or `$TPUSIM_SHARED`): the HLO corpus, specs, tools, references.
    Shared,
    Python3,
    Numpy,
    Scipy,
    /// `jaxlib` (XLA's own parser, as a judge).
    Jax,
    /// Headless Chromium (Debian's `chromium`), to render the HTML report.
    Chromium,
    /// PyTorch and PyTorch Geometric (the learned baseline of `examples/graphsage`).
    Torch,
}

impl Need {
    pub fn available(self) -> bool {
        match self {
            Need::Shared => shared_dir().is_some(),
            Need::Python3 => python_has("pass"),
            Need::Numpy => python_has("import numpy"),
            Need::Scipy => python_has("import scipy.stats, numpy"),
            Need::Jax => python_has("from jaxlib import _hlo"),
            Need::Chromium => chromium().is_some(),
            Need::Torch => python_has("import torch, torch_geometric, numpy"),
        }
    }

    pub fn what(self) -> &'static str {
        match self {
            Need::Shared => "../shared beside the checkout (or $TPUSIM_SHARED)",
            Need::Python3 => "python3",
            Need::Numpy => "python3 with numpy",
            Need::Scipy => "python3 with scipy",
            Need::Jax => "python3 with jax (jaxlib)",
            Need::Chromium => "chromium (headless; Debian's `chromium` package)",
            Need::Torch => "python3 with torch, torch_geometric and numpy",
        }
    }
}

/// Whether `need` is here; if not, prints `skipped: TEST: needs …` on stderr.
pub fn has(need: Need, test: &str) -> bool {
    let ok = need.available();
    if !ok {
        eprintln!("skipped: {test}: needs {}", need.what());
    }
    ok
}

/// [`shared_dir`], or `None` after printing why `test` skips.
pub fn shared(test: &str) -> Option<PathBuf> {
    if has(Need::Shared, test) {
        shared_dir()
    } else {
        None
    }
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

/// Every file below `dir` (in it and in its folders, at any depth) whose name ends with
/// `suffix`, sorted; none for a folder that is not there.
pub fn files_below(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
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

/// Runs `cmd`, which must succeed (else the test fails with its stderr); its stdout.
pub fn run_ok(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().expect("the command starts");
    assert!(
        out.status.success(),
        "{:?} failed:\n{}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `hlo_samples/NAME`.
pub fn sample_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("hlo_samples")
        .join(name)
}

/// The module of `hlo_samples/NAME` (text).
pub fn load_sample(name: &str) -> tpusim::ir::Module {
    let p = sample_path(name);
    let text = std::fs::read_to_string(&p).unwrap();
    tpusim::hlo::parse_module(&p.display().to_string(), &text).unwrap()
}

/// The Chromium binary (`chromium`, else `chromium-browser`), if one runs here.
pub fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|c| {
        std::process::Command::new(c)
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    })
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

/// XLA's own parser (`tools/xla_oracle.py` of `shared`) on `paths`: one line per file,
/// `ok\t…` or `err\t…`, in order. Needs [`Need::Jax`].
#[allow(dead_code)]
pub fn xla_oracle(shared: &Path, paths: &[PathBuf]) -> String {
    let out = std::process::Command::new("python3")
        .arg(shared.join("tools/xla_oracle.py"))
        .args(paths)
        .output()
        .expect("run xla_oracle.py");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
