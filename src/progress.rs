//! Progress of long jobs on stderr (generation, replays, sweeps, scoring).
//!
//! On a terminal it is an `indicatif` bar. When stderr is not a terminal (a log file, a
//! CI job, a batch scheduler), a bar would draw nothing useful, so a plain line is
//! printed now and then instead (every [`LINE_INTERVAL`] by default, or
//! `$TPUSIM_PROGRESS_SECS` seconds):
//!
//! ```text
//! progress: layout configs 12288/20000 (61%), 2034/s, ETA 4s
//! ```
//!
//! and, if any such line was printed, one last line when the job is done. `--quiet`
//! turns both off. The counters are atomic, so rayon workers tick one `Progress`.
//!
//! This is the command line's display: library code reports through small interfaces
//! (`dataset::generate::GenProgress`, which [`Progress`] implements) and knows nothing
//! of it.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Time between two progress lines when stderr is not a terminal.
pub const LINE_INTERVAL: Duration = Duration::from_secs(10);

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// Nothing (`--quiet`).
    Hidden,
    /// An animated bar (stderr is a terminal).
    Bar,
    /// A line every so often (stderr is not a terminal).
    Lines(Duration),
}

impl ProgressMode {
    /// What a command shows on stderr: nothing when `quiet`, a bar on a terminal, lines
    /// otherwise (their interval from `$TPUSIM_PROGRESS_SECS`, default
    /// [`LINE_INTERVAL`]).
    pub fn for_stderr(quiet: bool) -> Self {
        if quiet {
            ProgressMode::Hidden
        } else if std::io::stderr().is_terminal() {
            ProgressMode::Bar
        } else {
            let every = std::env::var("TPUSIM_PROGRESS_SECS")
                .ok()
                .and_then(|s| s.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(Duration::from_secs_f64)
                .unwrap_or(LINE_INTERVAL);
            ProgressMode::Lines(every)
        }
    }
}

struct Lines {
    every: Duration,
    start: Instant,
    last: Mutex<Instant>,
    printed: AtomicBool,
}

/// A progress counter: `pos` of `len` items.
pub struct Progress {
    what: String,
    bar: Option<ProgressBar>,
    lines: Option<Lines>,
    pos: AtomicU64,
    len: AtomicU64,
}

impl Progress {
    pub fn new(mode: ProgressMode, len: u64, what: &str) -> Self {
        let bar = (mode == ProgressMode::Bar).then(|| {
            let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} {msg} [{bar:30}] {pos}/{len} {per_sec} ETA {eta}",
            ) {
                pb.set_style(style.progress_chars("=> "));
            }
            pb.set_message(what.to_string());
            pb
        });
        let lines = match mode {
            ProgressMode::Lines(every) => {
                let now = Instant::now();
                Some(Lines {
                    every,
                    start: now,
                    last: Mutex::new(now),
                    printed: AtomicBool::new(false),
                })
            }
            _ => None,
        };
        Progress {
            what: what.to_string(),
            bar,
            lines,
            pos: AtomicU64::new(0),
            len: AtomicU64::new(len),
        }
    }

    /// A counter that shows nothing.
    pub fn hidden() -> Self {
        Progress::new(ProgressMode::Hidden, 0, "")
    }

    pub fn position(&self) -> u64 {
        self.pos.load(Ordering::Relaxed)
    }

    pub fn length(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }

    /// `n` more items done.
    pub fn inc(&self, n: u64) {
        self.pos.fetch_add(n, Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.inc(n);
        }
        self.maybe_line();
    }

    /// `n` more items to do.
    pub fn inc_length(&self, n: u64) {
        self.len.fetch_add(n, Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.inc_length(n);
        }
    }

    /// `n` fewer items to do than announced (a sampler that ran dry).
    pub fn dec_length(&self, n: u64) {
        let _ = self
            .len
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                Some(l.saturating_sub(n))
            });
        if let Some(b) = &self.bar {
            b.set_length(self.length());
        }
    }

    pub fn set_length(&self, len: u64) {
        self.len.store(len, Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.set_length(len);
        }
    }

    /// Run `f` (which prints) without the bar drawing over it.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(b) => b.suspend(f),
            None => f(),
        }
    }

    /// The job is over: the bar is cleared; in line mode a last line is printed if any
    /// line was.
    pub fn finish_and_clear(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        if let Some(l) = &self.lines {
            if l.printed.load(Ordering::Relaxed) {
                eprintln!(
                    "progress: {} {}/{} done in {:.1} s",
                    self.what,
                    self.position(),
                    self.length().max(self.position()),
                    l.start.elapsed().as_secs_f64()
                );
            }
        }
    }

    fn maybe_line(&self) {
        let Some(l) = &self.lines else {
            return;
        };
        let now = Instant::now();
        let Ok(mut last) = l.last.try_lock() else {
            return; // another worker is printing
        };
        if now.duration_since(*last) < l.every {
            return;
        }
        *last = now;
        l.printed.store(true, Ordering::Relaxed);
        eprintln!("progress: {}", self.line(now.duration_since(l.start)));
    }

    /// `layout configs 12288/20000 (61%), 2034/s, ETA 4s`.
    fn line(&self, elapsed: Duration) -> String {
        let (pos, len) = (self.position(), self.length());
        let secs = elapsed.as_secs_f64();
        let rate = if secs > 0.0 { pos as f64 / secs } else { 0.0 };
        let mut s = format!("{} {pos}", self.what);
        if len >= pos && len > 0 {
            s.push_str(&format!("/{len} ({}%)", pos * 100 / len));
        }
        s.push_str(&format!(", {rate:.0}/s"));
        if len > pos && rate > 0.0 {
            s.push_str(&format!(", ETA {:.0}s", (len - pos) as f64 / rate));
        }
        s
    }
}

/// Generation reports to the counter (and so to the bar or the lines).
impl crate::dataset::generate::GenProgress for Progress {
    fn grow(&self, n: u64) {
        self.inc_length(n);
    }
    fn shrink(&self, n: u64) {
        self.dec_length(n);
    }
    fn advance(&self, n: u64) {
        self.inc(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_counts_rate_and_eta() {
        let p = Progress::new(ProgressMode::Hidden, 200, "layout configs");
        p.inc(50);
        assert_eq!(
            p.line(Duration::from_secs(5)),
            "layout configs 50/200 (25%), 10/s, ETA 15s"
        );
        p.dec_length(100);
        p.inc(50);
        assert_eq!(
            p.line(Duration::from_secs(10)),
            "layout configs 100/100 (100%), 10/s"
        );
        // A length not known yet: no fraction, no ETA.
        let q = Progress::new(ProgressMode::Hidden, 0, "runs");
        q.inc(7);
        assert_eq!(q.line(Duration::from_secs(7)), "runs 7, 1/s");
    }
}
