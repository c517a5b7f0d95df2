//! Executable documentation: every shell command of README.md, docs/tutorial.md and
//! docs/jax.md runs, in order, as a user in a fresh clone would run it, and the output a
//! document shows is compared with what the command prints.
//!
//! The rules, for whoever edits those documents:
//!
//! * A fenced block tagged `sh` (or `bash`, `shell`): every line is a command (`\` at
//!   the end of a line continues it; blank lines and `#` lines are skipped). It must
//!   succeed; its output is not compared.
//! * A block tagged `console`: lines `$ COMMAND`, each followed by the output it prints
//!   (stdout and stderr as a terminal shows them, interleaved). The command must
//!   succeed and print exactly that, line by line (trailing spaces ignored), except:
//!   `[..]` inside a line matches any text, and a line `...` any number of lines.
//!   Keep those for what really varies (timings).
//! * A block whose tag is followed by `file=NAME` (e.g. `toml file=cfg.toml`) is a
//!   file the text asks the reader to save: the harness writes it there.
//! * Every other block (`python`, `toml`, `text`, untagged) is never run; a `$ ` line
//!   in an untagged block is an error, so examples cannot silently stop being checked.
//!
//! Commands run under `bash -o pipefail` in a temporary directory holding a copy of
//! `hlo_samples/` and nothing else (no `../shared`), with `tpusim` on the `PATH` as the
//! binary under test and `cargo run --release --` rewritten to `tpusim`. Two commands
//! are skipped, by exact text: the README's `cargo test --release`, the test suite itself
//! (running it from inside the suite would recurse), and its `pip install ./python`, which
//! `.ci/run` runs in a fresh virtualenv before `python/tests/test_readme.py` runs the
//! README's Python example.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Commands that are not run, with the reason (printed when skipped).
const SKIPPED: &[(&str, &str)] = &[
    (
        "cargo test --release",
        "the test suite itself: running it from inside the suite would recurse",
    ),
    (
        "pip install ./python",
        "the Python package: .ci/run installs it so in a fresh virtualenv, and \
         python/tests/test_readme.py runs the README's Python example",
    ),
];

/// One thing a document asks for, at a line of it.
#[derive(Debug, PartialEq)]
enum Step {
    /// Run; must succeed; with `Some(lines)`, must print exactly those lines.
    Run {
        line: usize,
        cmd: String,
        expect: Option<Vec<String>>,
    },
    /// Save a file.
    File {
        line: usize,
        name: String,
        text: String,
    },
}

/// A document that breaks the rules above, at a line of it.
#[derive(Debug)]
struct DocError {
    line: usize,
    msg: &'static str,
}

impl std::fmt::Display for DocError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.msg)
    }
}

/// The steps of a markdown document, in order.
fn steps(md: &str) -> Result<Vec<Step>, DocError> {
    let lines: Vec<&str> = md.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(info) = lines[i].strip_prefix("```") else {
            i += 1;
            continue;
        };
        let open = i + 1; // 1-based line of the fence
        let end = (i + 1..lines.len())
            .find(|&j| lines[j].trim_end() == "```")
            .ok_or(DocError {
                line: open,
                msg: "unclosed code block",
            })?;
        let body = &lines[i + 1..end];
        let mut words = info.split_whitespace();
        let lang = words.next().unwrap_or("");
        let file = words.find_map(|w| w.strip_prefix("file="));
        if let Some(name) = file {
            let mut text = body.join("\n");
            text.push('\n');
            out.push(Step::File {
                line: open,
                name: name.to_string(),
                text,
            });
        } else {
            match lang {
                "sh" | "bash" | "shell" => {
                    let mut k = 0;
                    while k < body.len() {
                        let line = open + 1 + k;
                        let mut cmd = body[k].trim().to_string();
                        while cmd.ends_with('\\') && k + 1 < body.len() {
                            cmd.pop();
                            cmd.truncate(cmd.trim_end().len());
                            k += 1;
                            cmd.push(' ');
                            cmd.push_str(body[k].trim());
                        }
                        k += 1;
                        if !cmd.is_empty() && !cmd.starts_with('#') {
                            out.push(Step::Run {
                                line,
                                cmd,
                                expect: None,
                            });
                        }
                    }
                }
                "console" => {
                    let mut k = 0;
                    while k < body.len() {
                        let Some(cmd) = body[k].strip_prefix("$ ") else {
                            return Err(DocError {
                                line: open + 1 + k,
                                msg: "console output before any `$ ` command",
                            });
                        };
                        let line = open + 1 + k;
                        k += 1;
                        let mut expect = Vec::new();
                        while k < body.len() && !body[k].starts_with("$ ") {
                            expect.push(body[k].to_string());
                            k += 1;
                        }
                        out.push(Step::Run {
                            line,
                            cmd: cmd.trim().to_string(),
                            expect: Some(expect),
                        });
                    }
                }
                "" => {
                    if let Some(k) = body.iter().position(|l| l.starts_with("$ ")) {
                        return Err(DocError {
                            line: open + 1 + k,
                            msg: "a `$ ` command in an untagged block: tag it `console` \
                                  (run and compared) or `text` (never run)",
                        });
                    }
                }
                _ => {}
            }
        }
        i = end + 1;
    }
    Ok(out)
}

/// Whether one line matches one expected line (`[..]` = any text).
fn line_matches(expected: &str, actual: &str) -> bool {
    let (expected, actual) = (expected.trim_end(), actual.trim_end());
    let parts: Vec<&str> = expected.split("[..]").collect();
    if parts.len() == 1 {
        return expected == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || actual.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &actual[first.len()..];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(at) => rest = &rest[at + mid.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Whether the output matches the expected lines (`...` = any number of lines).
fn output_matches(expected: &[String], actual: &[&str]) -> bool {
    // ok[i][j]: expected[i..] matches actual[j..].
    let (n, m) = (expected.len(), actual.len());
    let mut ok = vec![vec![false; m + 1]; n + 1];
    ok[n][m] = true;
    for i in (0..n).rev() {
        for j in (0..=m).rev() {
            ok[i][j] = if expected[i].trim() == "..." {
                ok[i + 1][j] || (j < m && ok[i][j + 1])
            } else {
                j < m && line_matches(&expected[i], actual[j]) && ok[i + 1][j + 1]
            };
        }
    }
    ok[0][0]
}

/// A fresh "clone": `ROOT/clone` with a copy of `hlo_samples/`, and `ROOT/bin/tpusim`.
struct Clone {
    _root: tempfile::TempDir,
    dir: PathBuf,
    bin: PathBuf,
}

fn fresh_clone() -> Clone {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("clone");
    let bin = root.path().join("bin");
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("hlo_samples");
    std::fs::create_dir_all(dir.join("hlo_samples")).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    for e in std::fs::read_dir(samples).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join("hlo_samples").join(p.file_name().unwrap())).unwrap();
    }
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tpusim"), bin.join("tpusim")).unwrap();
    assert!(!dir.join("../shared").exists());
    Clone {
        _root: root,
        dir,
        bin,
    }
}

/// Run every step of `doc` (relative to the repository) in a fresh clone; panic with
/// every failure (file, line, command, expected and actual output).
fn run_doc(doc: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(doc);
    let md = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{doc}: {e}"));
    let steps = steps(&md).unwrap_or_else(|e| panic!("{doc}: {e}"));
    assert!(
        steps.iter().any(|s| matches!(s, Step::Run { .. })),
        "{doc}: no commands"
    );
    let clone = fresh_clone();
    let path_var = format!(
        "{}:{}",
        clone.bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut failures = Vec::new();
    for step in &steps {
        let (line, cmd, expect) = match step {
            Step::File { line, name, text } => {
                std::fs::write(clone.dir.join(name), text)
                    .unwrap_or_else(|e| panic!("{doc}:{line}: writing {name}: {e}"));
                continue;
            }
            Step::Run { line, cmd, expect } => (line, cmd, expect),
        };
        if let Some((_, why)) = SKIPPED.iter().find(|(c, _)| c == cmd) {
            println!("{doc}:{line}: skipped `{cmd}`: {why}");
            continue;
        }
        let shell = match cmd.strip_prefix("cargo run --release --") {
            Some(rest) => format!("tpusim{rest}"),
            None => cmd.clone(),
        };
        let t = Instant::now();
        let out = Command::new("bash")
            .args(["-o", "pipefail", "-c", &format!("{{ {shell}\n}} 2>&1")])
            .current_dir(&clone.dir)
            .env("PATH", &path_var)
            .env_remove("TPUSIM_SHARED")
            .output()
            .expect("bash runs");
        println!("{doc}:{line}: {:.2} s `{cmd}`", t.elapsed().as_secs_f64());
        let actual = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        let actual_lines: Vec<&str> = actual.lines().collect();
        let matched = expect
            .as_ref()
            .is_none_or(|e| output_matches(e, &actual_lines));
        if !out.status.success() || !matched {
            let mut f = format!("{doc}:{line}: `{cmd}`: ");
            if !out.status.success() {
                f.push_str(&format!("failed ({})", out.status));
            } else {
                f.push_str("output differs");
            }
            if let Some(e) = expect {
                f.push_str(&format!("\n--- expected\n{}", e.join("\n")));
            }
            f.push_str(&format!("\n--- actual\n{actual}"));
            failures.push(f);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of the commands of {doc} failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn readme_runs_as_written() {
    run_doc("README.md");
}

#[test]
fn tutorial_runs_as_written() {
    run_doc("docs/tutorial.md");
}

#[test]
fn jax_page_runs_as_written() {
    run_doc("docs/jax.md");
}

#[test]
fn the_harness_reads_blocks_and_elisions() {
    let md = "text\n```sh\ntpusim a \\\n  --b\n# no\n\ntpusim c\n```\n```console\n$ x\none\n...\n$ y\n```\n```toml file=c.toml\nk = 1\n```\n```python\n$ not run\n```\n";
    let got = steps(md).unwrap();
    let run = |line, cmd: &str, expect: Option<&[&str]>| Step::Run {
        line,
        cmd: cmd.into(),
        expect: expect.map(|e| e.iter().map(|s| s.to_string()).collect()),
    };
    assert_eq!(
        got,
        [
            run(3, "tpusim a --b", None),
            run(7, "tpusim c", None),
            run(10, "x", Some(&["one", "..."])),
            run(13, "y", Some(&[])),
            Step::File {
                line: 15,
                name: "c.toml".into(),
                text: "k = 1\n".into()
            },
        ]
    );
    assert!(steps("```\n$ tpusim x\n```\n")
        .unwrap_err()
        .to_string()
        .starts_with("line 2: a `$ ` command in an untagged block"));

    assert!(line_matches("a [..] s ([..]/s)", "a 0.04 s (71156/s)"));
    assert!(!line_matches("a [..] s", "a 0.04 ms"));
    assert!(line_matches("x  ", "x"));
    assert!(!line_matches("0.5968", "0.5969"));
    let e = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(output_matches(
        &e(&["a", "...", "z"]),
        &["a", "b", "c", "z"]
    ));
    assert!(output_matches(&e(&["a", "...", "z"]), &["a", "z"]));
    assert!(!output_matches(&e(&["a", "...", "z"]), &["a", "b"]));
    assert!(!output_matches(&e(&["a"]), &["a", "b"]));
    assert!(output_matches(&e(&[]), &[]));
}
