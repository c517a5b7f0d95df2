//! Predictors side by side (`tpusim compare`): the official metrics of runtime
//! predictions (`ID,config_index,predicted_runtime_ns`, as `tpusim predict` and the
//! learned baseline in `examples/` write them) against the runtimes of a TpuGraphs npz
//! tree, per collection and per graph, and a self-contained HTML report with the plots:
//! predicted against measured (log-log, one colour per graph), Kendall τ per graph, and
//! the mean top-K slowdown for K = 1..=50.
//!
//! Metrics (spec §5, `eval::metrics`): tile graphs get the top-1/5/10 slowdown and the
//! Kaggle score (`2 − best_in_top5/best`) on the normalised runtimes; layout graphs
//! Kendall τ-b and OPA on the runtimes. Every graph also gets τ and OPA, so the two
//! collections can be read alike. A configuration a predictor has no runtime for ranks
//! last (`+∞`).

use indexmap::IndexMap;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::csv_rows::CsvFault;
use super::metrics::{
    kaggle_layout_score, kaggle_tile_score, kendall_tau_b, opa, opa_counts, top_k_slowdown,
};
use super::score::{npz_of, npz_runtimes, ScoreError};

/// Why a comparison failed.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("{file}:{line}: {msg}")]
    Csv {
        file: String,
        line: usize,
        msg: String,
    },
    #[error("{0}")]
    Data(String),
    #[error(transparent)]
    Score(#[from] ScoreError),
}

/// Predicted runtimes by ID, one entry per configuration row (`None`: not costed).
pub type Predictions = IndexMap<String, Vec<Option<f64>>>;

/// Read `ID,config_index,predicted_runtime_ns` (header required; rows of an ID may come
/// in any order; an empty runtime = not costed).
pub fn read_predictions(path: &Path) -> Result<Predictions, CompareError> {
    let file = path.display().to_string();
    let err = |line: u64, msg: String| CompareError::Csv {
        file: file.clone(),
        line: line as usize,
        msg,
    };
    let mut rows: IndexMap<String, Vec<(usize, Option<f64>, u64)>> = IndexMap::new();
    let header = ["ID", "config_index", "predicted_runtime_ns"];
    super::csv_rows::for_each_row(path, &header, |line, rec| {
        let f = |i: usize| rec.get(i).unwrap_or("");
        let j: usize = f(1)
            .parse()
            .map_err(|_| CsvFault::at(line, format!("config_index '{}' is not an index", f(1))))?;
        let v = if f(2).is_empty() {
            None
        } else {
            let x: f64 = f(2)
                .parse()
                .map_err(|_| CsvFault::at(line, format!("'{}' is not a runtime", f(2))))?;
            if !x.is_finite() || x < 0.0 {
                return Err(CsvFault::at(
                    line,
                    format!("runtime {x} is not a finite number ≥ 0"),
                ));
            }
            Some(x)
        };
        rows.entry(f(0).to_string()).or_default().push((j, v, line));
        Ok(())
    })
    .map_err(|f| {
        if f.line == 0 {
            CompareError::Data(format!("{file}: {}", f.msg))
        } else {
            err(f.line, f.msg)
        }
    })?;
    let mut out = Predictions::new();
    for (id, mut v) in rows {
        v.sort_by_key(|x| x.0);
        for (k, w) in v.windows(2).enumerate() {
            if w[0].0 == w[1].0 {
                return Err(err(
                    w[1].2,
                    format!(
                        "{id} row {} is given twice (first on line {})",
                        w[1].0, w[0].2
                    ),
                ));
            }
            let _ = k;
        }
        let n = v.last().map_or(0, |x| x.0 + 1);
        let mut rt = vec![None; n];
        for (j, x, _) in v {
            rt[j] = x;
        }
        out.insert(id, rt);
    }
    Ok(out)
}

/// One predictor's metrics on one graph.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct GraphMetrics {
    pub tau: f64,
    pub opa: f64,
    pub top1: f64,
    pub top5: f64,
    pub top10: f64,
    /// Kaggle score: tile `2 − best_in_top5/best`, layout τ of the ranking.
    pub kaggle: f64,
}

/// One graph: its measured runtimes and every predictor's metrics.
#[derive(Debug, Clone, Serialize)]
pub struct GraphRow {
    pub id: String,
    pub collection: String,
    pub configs: usize,
    /// Per predictor, in the order given.
    pub metrics: Vec<GraphMetrics>,
    /// Raw measured runtimes (ns; tile: before normalising) and each predictor's
    /// predictions (`+∞` where missing), for the plots.
    #[serde(skip)]
    pub measured_ns: Vec<f64>,
    #[serde(skip)]
    pub truth: Vec<f64>,
    #[serde(skip)]
    pub predicted: Vec<Vec<f64>>,
}

/// One predictor's metrics over a collection.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CollectionMetrics {
    /// Mean of the per-graph τ (graphs where τ is defined).
    pub tau: f64,
    /// OPA pooled over every pair of the collection (TF-Ranking's weighting).
    pub opa: f64,
    pub top1: f64,
    pub top5: f64,
    pub top10: f64,
    /// Mean Kaggle score.
    pub kaggle: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CollectionRow {
    pub collection: String,
    pub graphs: usize,
    pub metrics: Vec<CollectionMetrics>,
}

/// The whole comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub predictors: Vec<String>,
    pub collections: Vec<CollectionRow>,
    pub graphs: Vec<GraphRow>,
    /// IDs some predictor lacks (left out of every column).
    pub left_out: Vec<String>,
}

/// The npz file of `id` under `root`: in `split`, or in the first of train, valid, test
/// that holds it.
fn find_npz(root: &Path, split: Option<&str>, id: &str) -> Option<(String, PathBuf, bool)> {
    let splits: Vec<&str> = match split {
        Some(s) => vec![s],
        None => vec!["train", "valid", "test"],
    };
    splits
        .into_iter()
        .filter_map(|s| npz_of(root, s, id))
        .find(|(_, p, _)| p.is_file())
}

fn mean_finite(v: impl Iterator<Item = f64>) -> f64 {
    let (mut s, mut n) = (0.0, 0usize);
    for x in v.filter(|x| x.is_finite()) {
        s += x;
        n += 1;
    }
    if n == 0 {
        f64::NAN
    } else {
        s / n as f64
    }
}

/// Compare predictors (`(name, predictions)`) on the graphs they all predict.
pub fn compare(
    root: &Path,
    split: Option<&str>,
    predictors: &[(String, Predictions)],
) -> Result<Comparison, CompareError> {
    let Some((_, first)) = predictors.first() else {
        return Err(CompareError::Data("no predictors".into()));
    };
    let mut graphs = Vec::new();
    let mut left_out = Vec::new();
    for id in first.keys() {
        if predictors.iter().any(|(_, p)| !p.contains_key(id)) {
            left_out.push(id.clone());
            continue;
        }
        let (collection, npz, tile) = find_npz(root, split, id).ok_or_else(|| {
            CompareError::Data(format!(
                "{}: no npz file for ID '{id}'{}",
                root.display(),
                split
                    .map(|s| format!(" in split '{s}'"))
                    .unwrap_or_default()
            ))
        })?;
        let truth = npz_runtimes(&npz, tile)?;
        let measured_ns = if tile {
            npz_runtimes(&npz, false)?
        } else {
            truth.clone()
        };
        let n = truth.len();
        let mut metrics = Vec::new();
        let mut predicted = Vec::new();
        for (name, p) in predictors {
            let rows = &p[id];
            if rows.len() != n {
                return Err(CompareError::Data(format!(
                    "{name}: {id} has {} rows; {} holds {n} configurations",
                    rows.len(),
                    npz.display()
                )));
            }
            let s: Vec<f64> = rows.iter().map(|r| r.unwrap_or(f64::INFINITY)).collect();
            let m =
                |e: super::metrics::MetricError| CompareError::Data(format!("{name}: {id}: {e}"));
            let tau = if truth.iter().any(|&y| y != truth[0]) {
                kendall_tau_b(&s, &truth).map_err(m)?
            } else {
                f64::NAN
            };
            let gm = GraphMetrics {
                tau,
                opa: opa(&s, &truth).map_err(m)?,
                top1: top_k_slowdown(&s, &truth, 1).map_err(m)?,
                top5: top_k_slowdown(&s, &truth, 5).map_err(m)?,
                top10: top_k_slowdown(&s, &truth, 10).map_err(m)?,
                kaggle: if tile {
                    kaggle_tile_score(&s, &truth).map_err(m)?
                } else {
                    kaggle_layout_score(&s, &truth).map_err(m)?
                },
            };
            metrics.push(gm);
            predicted.push(s);
        }
        graphs.push(GraphRow {
            id: id.clone(),
            collection,
            configs: n,
            metrics,
            measured_ns,
            truth,
            predicted,
        });
    }
    if graphs.is_empty() {
        return Err(CompareError::Data(
            "no graph is predicted by every predictor".into(),
        ));
    }
    let mut by: IndexMap<String, Vec<&GraphRow>> = IndexMap::new();
    for g in &graphs {
        by.entry(g.collection.clone()).or_default().push(g);
    }
    by.sort_keys();
    let collections = by
        .iter()
        .map(|(c, gs)| {
            let metrics = (0..predictors.len())
                .map(|k| {
                    let (mut num, mut den) = (0.0, 0.0);
                    for g in gs {
                        if let Ok(o) = opa_counts(&g.predicted[k], &g.truth) {
                            num += o.correct as f64;
                            den += o.pairs as f64;
                        }
                    }
                    CollectionMetrics {
                        tau: mean_finite(gs.iter().map(|g| g.metrics[k].tau)),
                        opa: if den > 0.0 { num / den } else { f64::NAN },
                        top1: mean_finite(gs.iter().map(|g| g.metrics[k].top1)),
                        top5: mean_finite(gs.iter().map(|g| g.metrics[k].top5)),
                        top10: mean_finite(gs.iter().map(|g| g.metrics[k].top10)),
                        kaggle: mean_finite(gs.iter().map(|g| g.metrics[k].kaggle)),
                    }
                })
                .collect();
            CollectionRow {
                collection: c.clone(),
                graphs: gs.len(),
                metrics,
            }
        })
        .collect();
    Ok(Comparison {
        predictors: predictors.iter().map(|(n, _)| n.clone()).collect(),
        collections,
        graphs,
        left_out,
    })
}

/// Mean top-K slowdown over `graphs` for K = 1..=kmax, per predictor.
pub fn slowdown_curves(graphs: &[&GraphRow], predictors: usize, kmax: usize) -> Vec<Vec<f64>> {
    (0..predictors)
        .map(|p| {
            (1..=kmax)
                .map(|k| {
                    mean_finite(
                        graphs
                            .iter()
                            .filter_map(|g| top_k_slowdown(&g.predicted[p], &g.truth, k).ok()),
                    )
                })
                .collect()
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Text and HTML
// ---------------------------------------------------------------------------

fn f4(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.4}")
    }
}

/// The metrics a collection is judged by: tile top-K and Kaggle, layout τ and OPA.
/// A metric's name and how to read it.
type Column = (&'static str, fn(&CollectionMetrics) -> f64);

fn columns(collection: &str) -> &'static [Column] {
    if collection.starts_with("tile") {
        &[
            ("top-1 slowdown", |m| m.top1),
            ("top-5 slowdown", |m| m.top5),
            ("top-10 slowdown", |m| m.top10),
            ("Kaggle score", |m| m.kaggle),
            ("Kendall τ", |m| m.tau),
            ("OPA", |m| m.opa),
        ]
    } else {
        &[
            ("Kendall τ (Kaggle)", |m| m.tau),
            ("OPA", |m| m.opa),
            ("top-1 slowdown", |m| m.top1),
            ("top-10 slowdown", |m| m.top10),
        ]
    }
}

impl Comparison {
    /// The table `tpusim compare` prints: per collection, one line per metric, one
    /// column per predictor.
    pub fn to_text(&self) -> String {
        let w = self
            .predictors
            .iter()
            .map(|p| p.chars().count())
            .max()
            .unwrap_or(0)
            .max(10);
        let mut t = String::new();
        let _ = write!(t, "{:<34}", "collection / metric");
        for p in &self.predictors {
            let _ = write!(t, "  {p:>w$}");
        }
        t.push('\n');
        for c in &self.collections {
            let _ = writeln!(t, "{} ({} graphs)", c.collection, c.graphs);
            for (name, get) in columns(&c.collection) {
                let _ = write!(t, "  {name:<32}");
                for m in &c.metrics {
                    let _ = write!(t, "  {:>w$}", f4(get(m)));
                }
                t.push('\n');
            }
        }
        if !self.left_out.is_empty() {
            let _ = writeln!(
                t,
                "{} IDs left out (not predicted by every predictor)",
                self.left_out.len()
            );
        }
        t
    }

    /// One self-contained HTML page: the tables and the three plots (inline SVG).
    pub fn to_html(&self, title: &str) -> String {
        let esc = crate::report::html::escape;
        let mut h = String::new();
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>{}</style></head><body>\n",
            esc(title),
            CSS
        );
        let _ = writeln!(h, "<h1>{}</h1>", esc(title));
        let _ = writeln!(
            h,
            "<p>{} graphs, {} predictors. Lower slowdown is better; higher τ, OPA and Kaggle score are better. Metrics as <code>tpusim score</code> computes them (docs/metrics.md).</p>",
            self.graphs.len(),
            self.predictors.len()
        );
        h.push_str("<h2>Per collection</h2>\n");
        for c in &self.collections {
            let _ = write!(
                h,
                "<table class=\"m\"><caption>{} — {} graphs</caption><thead><tr><th>metric</th>",
                esc(&c.collection),
                c.graphs
            );
            for p in &self.predictors {
                let _ = write!(h, "<th>{}</th>", esc(p));
            }
            h.push_str("</tr></thead><tbody>\n");
            for (name, get) in columns(&c.collection) {
                let _ = write!(h, "<tr><td>{name}</td>");
                let vals: Vec<f64> = c.metrics.iter().map(get).collect();
                let lower_better = name.contains("slowdown");
                let best = vals.iter().copied().filter(|x| x.is_finite()).fold(
                    None,
                    |b: Option<f64>, x| {
                        Some(match b {
                            None => x,
                            Some(b) if lower_better => b.min(x),
                            Some(b) => b.max(x),
                        })
                    },
                );
                for v in vals {
                    let cls = if Some(v) == best && self.predictors.len() > 1 {
                        " class=\"best\""
                    } else {
                        ""
                    };
                    let _ = write!(h, "<td{cls}>{}</td>", f4(v));
                }
                h.push_str("</tr>\n");
            }
            h.push_str("</tbody></table>\n");
        }

        h.push_str("<h2>Predicted against measured</h2>\n<p>Every configuration of every graph, log-log, one colour per graph (tile: the raw runtime, before normalising). A predictor that ranks well draws each graph's points as a rising line; its offset from the diagonal is a per-graph scale the metrics ignore.</p>\n<div class=\"row\">");
        for p in 0..self.predictors.len() {
            h.push_str(&self.scatter_svg(p));
        }
        h.push_str("</div>\n<h2>Kendall τ per graph</h2>\n");
        h.push_str(&self.tau_svg());
        h.push_str("<h2>Top-K slowdown</h2>\n<p>Mean over graphs of (best runtime among the K predicted fastest − best runtime) / best runtime.</p>\n<div class=\"row\">");
        for c in &self.collections {
            let gs: Vec<&GraphRow> = self
                .graphs
                .iter()
                .filter(|g| g.collection == c.collection)
                .collect();
            h.push_str(&self.topk_svg(&c.collection, &gs));
        }
        h.push_str("</div>\n<h2>Per graph</h2>\n<table class=\"m\"><thead><tr><th>graph</th><th>configs</th>");
        for p in &self.predictors {
            let _ = write!(h, "<th>{} τ</th><th>{} top-5</th>", esc(p), esc(p));
        }
        h.push_str("</tr></thead><tbody>\n");
        for g in &self.graphs {
            let _ = write!(
                h,
                "<tr><td class=\"id\">{}</td><td>{}</td>",
                esc(&g.id),
                g.configs
            );
            for m in &g.metrics {
                let _ = write!(h, "<td>{}</td><td>{}</td>", f4(m.tau), f4(m.top5));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</tbody></table>\n</body></html>\n");
        h
    }

    fn scatter_svg(&self, p: usize) -> String {
        let (w, ht, l, b) = (460.0, 400.0, 60.0, 46.0);
        let pts: Vec<(usize, f64, f64)> = self
            .graphs
            .iter()
            .enumerate()
            .flat_map(|(gi, g)| {
                g.measured_ns
                    .iter()
                    .zip(&g.predicted[p])
                    .filter(|(y, x)| **y > 0.0 && x.is_finite() && **x > 0.0)
                    .map(move |(&y, &x)| (gi, y, x))
            })
            .collect();
        let lo = pts
            .iter()
            .map(|&(_, y, x)| y.min(x))
            .fold(f64::INFINITY, f64::min)
            .max(1.0)
            .log10()
            .floor();
        let hi = pts
            .iter()
            .map(|&(_, y, x)| y.max(x))
            .fold(1.0, f64::max)
            .log10()
            .ceil()
            .max(lo + 1.0);
        let sx = |v: f64| l + (v.log10() - lo) / (hi - lo) * (w - l - 12.0);
        let sy = |v: f64| ht - b - (v.log10() - lo) / (hi - lo) * (ht - b - 28.0);
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{ht}\" viewBox=\"0 0 {w} {ht}\" class=\"plot\"><text x=\"{}\" y=\"18\" text-anchor=\"middle\" class=\"t\">{}</text>",
            w / 2.0,
            crate::report::html::escape(&self.predictors[p])
        );
        for e in lo as i64..=hi as i64 {
            let v = 10f64.powi(e as i32);
            let _ = write!(
                s,
                "<line x1=\"{x:.1}\" y1=\"28\" x2=\"{x:.1}\" y2=\"{yb:.1}\" class=\"g\"/><line x1=\"{l}\" y1=\"{y:.1}\" x2=\"{xr:.1}\" y2=\"{y:.1}\" class=\"g\"/><text x=\"{x:.1}\" y=\"{ty:.1}\" text-anchor=\"middle\">1e{e}</text><text x=\"{tx:.1}\" y=\"{y2:.1}\" text-anchor=\"end\">1e{e}</text>",
                x = sx(v),
                yb = ht - b,
                y = sy(v),
                xr = w - 12.0,
                ty = ht - b + 16.0,
                tx = l - 4.0,
                y2 = sy(v) + 4.0
            );
        }
        let _ = write!(
            s,
            "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" class=\"d\"/>",
            sx(10f64.powf(lo)),
            sy(10f64.powf(lo)),
            sx(10f64.powf(hi)),
            sy(10f64.powf(hi))
        );
        // At most 4000 points, every k-th (deterministic).
        let step = pts.len().div_ceil(4000).max(1);
        for &(gi, y, x) in pts.iter().step_by(step) {
            let _ = write!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.2\" fill=\"{}\"/>",
                sx(y),
                sy(x),
                color(gi)
            );
        }
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">measured runtime (ns)</text><text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">predicted runtime (ns)</text></svg>",
            (w + l) / 2.0,
            ht - 8.0,
            (ht - b) / 2.0 + 14.0
        );
        s
    }

    fn tau_svg(&self) -> String {
        let n = self.graphs.len();
        let (l, b, ht) = (60.0, 30.0, 300.0);
        let w = (l + 20.0 + n as f64 * 12.0).clamp(600.0, 1800.0);
        let dx = (w - l - 20.0) / n.max(1) as f64;
        let sy = |v: f64| 20.0 + (1.0 - v) / 2.0 * (ht - b - 20.0);
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{ht}\" viewBox=\"0 0 {w:.0} {ht}\" class=\"plot\">"
        );
        for v in [-1.0, -0.5, 0.0, 0.5, 1.0] {
            let _ = write!(
                s,
                "<line x1=\"{l}\" y1=\"{y:.1}\" x2=\"{x2:.1}\" y2=\"{y:.1}\" class=\"g\"/><text x=\"{tx}\" y=\"{ty:.1}\" text-anchor=\"end\">{v}</text>",
                y = sy(v),
                x2 = w - 10.0,
                tx = l - 4.0,
                ty = sy(v) + 4.0
            );
        }
        for (gi, g) in self.graphs.iter().enumerate() {
            let x = l + (gi as f64 + 0.5) * dx;
            for (p, m) in g.metrics.iter().enumerate() {
                if m.tau.is_finite() {
                    let _ = write!(
                        s,
                        "<circle cx=\"{x:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{}\"><title>{}: {} τ = {:.3}</title></circle>",
                        sy(m.tau),
                        series(p),
                        crate::report::html::escape(&g.id),
                        crate::report::html::escape(&self.predictors[p]),
                        m.tau
                    );
                }
            }
        }
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">graphs (in the order of the table below)</text><text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">Kendall τ</text>",
            (w + l) / 2.0,
            ht - 8.0,
            (ht - b) / 2.0
        );
        s.push_str(&self.legend(l + 10.0, sy(-0.55)));
        s.push_str("</svg>");
        s
    }

    fn topk_svg(&self, collection: &str, gs: &[&GraphRow]) -> String {
        let kmax = gs.iter().map(|g| g.configs).max().unwrap_or(1).clamp(1, 50);
        let curves = slowdown_curves(gs, self.predictors.len(), kmax);
        let (w, ht, l, b) = (460.0, 320.0, 60.0, 40.0);
        let ymax = curves
            .iter()
            .flatten()
            .copied()
            .filter(|x| x.is_finite())
            .fold(0.0, f64::max)
            .max(1e-3)
            * 1.1;
        let sx = |k: usize| l + (k as f64 - 1.0) / ((kmax as f64 - 1.0).max(1.0)) * (w - l - 14.0);
        let sy = |v: f64| ht - b - v / ymax * (ht - b - 30.0);
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{ht}\" viewBox=\"0 0 {w} {ht}\" class=\"plot\"><text x=\"{}\" y=\"18\" text-anchor=\"middle\" class=\"t\">{} ({} graphs)</text>",
            w / 2.0,
            crate::report::html::escape(collection),
            gs.len()
        );
        for i in 0..=4 {
            let v = ymax * i as f64 / 4.0;
            let _ = write!(
                s,
                "<line x1=\"{l}\" y1=\"{y:.1}\" x2=\"{x2:.1}\" y2=\"{y:.1}\" class=\"g\"/><text x=\"{tx}\" y=\"{ty:.1}\" text-anchor=\"end\">{v:.3}</text>",
                y = sy(v),
                x2 = w - 14.0,
                tx = l - 4.0,
                ty = sy(v) + 4.0
            );
        }
        for k in [1, 5, 10, 20, 50].into_iter().filter(|&k| k <= kmax) {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{k}</text>",
                sx(k),
                ht - b + 16.0
            );
        }
        for (p, c) in curves.iter().enumerate() {
            let pts: Vec<String> = c
                .iter()
                .enumerate()
                .filter(|(_, v)| v.is_finite())
                .map(|(i, &v)| format!("{:.1},{:.1}", sx(i + 1), sy(v)))
                .collect();
            let _ = write!(
                s,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>",
                pts.join(" "),
                series(p)
            );
        }
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">K</text><text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">mean top-K slowdown</text>",
            (w + l) / 2.0,
            ht - 6.0,
            (ht - b) / 2.0 + 10.0
        );
        s.push_str(&self.legend(w - 190.0, 36.0));
        s.push_str("</svg>");
        s
    }

    fn legend(&self, x: f64, y: f64) -> String {
        let mut s = String::new();
        for (p, name) in self.predictors.iter().enumerate() {
            let yy = y + p as f64 * 16.0;
            let _ = write!(
                s,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                yy - 9.0,
                series(p),
                x + 14.0,
                yy,
                crate::report::html::escape(name)
            );
        }
        s
    }
}

/// A colour per graph (golden-angle hues).
fn color(i: usize) -> String {
    let h = (i as f64 * 137.508) % 360.0;
    format!("hsl({h:.0},70%,45%)")
}

/// A colour per predictor.
fn series(p: usize) -> &'static str {
    [
        "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
    ][p % 6]
}

const CSS: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1900px}\
table.m{border-collapse:collapse;margin:10px 0 18px}table.m td,table.m th{border:1px solid #ccc;padding:3px 8px;text-align:right}\
table.m td.id{text-align:left;font-family:monospace;font-size:12px}caption{text-align:left;font-weight:600;padding:4px 0}\
td.best{background:#e3f4e1;font-weight:600}.row{display:flex;flex-wrap:wrap;gap:12px}\
svg.plot{border:1px solid #ddd;background:#fff;font-size:11px}svg .g{stroke:#e6e6e6}svg .d{stroke:#999;stroke-dasharray:4 3}svg .t{font-size:13px;font-weight:600}";
