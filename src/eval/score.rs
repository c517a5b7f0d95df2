//! Scoring a Kaggle-style submission (`ID,TopConfigs`) against the runtimes stored in a
//! TpuGraphs npz tree, with the official per-collection metrics and the final score.

use indexmap::IndexMap;
use serde::Serialize;
use std::path::{Path, PathBuf};

use super::csv_rows::CsvFault;
use super::metrics::{
    kaggle_final_score, kaggle_layout_score_for_ranking, kaggle_tile_score_for_ranking,
};
use crate::dataset::npz::{NpyArray, NpzReader};

/// Scores of one collection.
#[derive(Debug, Clone, Serialize)]
pub struct CollectionScore {
    /// `tile:xla`, `layout:xla:default`, ...
    pub collection: String,
    pub graphs: usize,
    /// Mean Kaggle score (tile: 2 − best_in_top5/best; layout: Kendall τ-b).
    pub score: f64,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct ScoreReport {
    pub collections: Vec<CollectionScore>,
    /// Mean of the collection scores (Kaggle's final score).
    pub final_score: f64,
}

/// Why scoring failed.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    #[error("{file}:{line}: {msg}")]
    Csv {
        file: String,
        line: usize,
        msg: String,
    },
    #[error("{0}")]
    Data(String),
}

/// The runtimes of an npz file (tile: divided by the normalisers), after the file passed
/// the checks `tpusim inspect` makes (every member readable, CRCs, the TpuGraphs schema):
/// a broken file is an error that names it, never a score.
fn runtimes(path: &Path, tile: bool) -> Result<Vec<f64>, ScoreError> {
    let err = |e: String| ScoreError::Data(format!("{}: {e}", path.display()));
    // (the reader's errors name the file themselves)
    let mut r = NpzReader::open(path).map_err(|e| ScoreError::Data(e.to_string()))?;
    let summary = r.summarize().map_err(|e| ScoreError::Data(e.to_string()))?;
    if !summary.is_valid() {
        return Err(err(format!(
            "breaks the TpuGraphs schema: {}",
            summary.violations.join("; ")
        )));
    }
    let to_f64 = |a: &NpyArray| -> Option<Vec<f64>> {
        a.as_slice::<i64>()
            .map(|v| v.iter().map(|&x| x as f64).collect())
            .or_else(|| {
                a.as_slice::<i32>()
                    .map(|v| v.iter().map(|&x| x as f64).collect())
            })
            .or_else(|| a.as_slice::<f64>().map(|v| v.to_vec()))
            .or_else(|| {
                a.as_slice::<f32>()
                    .map(|v| v.iter().map(|&x| x as f64).collect())
            })
    };
    let positive = |name: &str, v: &[f64]| -> Result<(), ScoreError> {
        match v.iter().position(|&x| !(x.is_finite() && x > 0.0)) {
            Some(i) => Err(err(format!(
                "{name}[{i}] = {} is not a positive finite number",
                v[i]
            ))),
            None => Ok(()),
        }
    };
    let rt = r.read("config_runtime").map_err(|e| err(e.to_string()))?;
    let mut y = to_f64(&rt).ok_or_else(|| err("config_runtime has an unsupported dtype".into()))?;
    positive("config_runtime", &y)?;
    if tile {
        let n = r
            .read("config_runtime_normalizers")
            .map_err(|e| err(e.to_string()))?;
        let n = to_f64(&n).ok_or_else(|| err("normalizers have an unsupported dtype".into()))?;
        if n.len() != y.len() {
            return Err(err("config_runtime and normalizers differ in length".into()));
        }
        positive("config_runtime_normalizers", &n)?;
        for (a, b) in y.iter_mut().zip(n) {
            *a /= b;
        }
        positive("config_runtime / config_runtime_normalizers", &y)?;
    }
    Ok(y)
}

/// One line of a submission: a TpuGraphs ID and its ranking of configuration indices.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranking {
    /// `tile:xla:STEM` or `layout:SOURCE:SEARCH:STEM`.
    pub id: String,
    /// Configuration indices, best first.
    pub top: Vec<usize>,
    /// Where it came from (`file:line`), for errors.
    pub origin: String,
}

/// The collection of an ID, the npz file under `root` that holds its runtimes, and
/// whether it is a tile file.
pub fn npz_of(root: &Path, split: &str, id: &str) -> Option<(String, PathBuf, bool)> {
    let parts: Vec<&str> = id.split(':').collect();
    match parts.as_slice() {
        ["tile", "xla", stem] => Some((
            "tile:xla".into(),
            root.join("tile/xla")
                .join(split)
                .join(format!("{stem}.npz")),
            true,
        )),
        ["layout", src, search, stem] => Some((
            format!("layout:{src}:{search}"),
            root.join("layout")
                .join(src)
                .join(search)
                .join(split)
                .join(format!("{stem}.npz")),
            false,
        )),
        _ => None,
    }
}

/// The IDs of every npz file of `split` under `root`, sorted.
pub fn split_ids(root: &Path, split: &str) -> Vec<String> {
    let stems = |dir: PathBuf| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "npz"))
                    .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let mut ids: Vec<String> = stems(root.join("tile/xla").join(split))
        .into_iter()
        .map(|s| format!("tile:xla:{s}"))
        .collect();
    for src in ["nlp", "xla"] {
        for search in ["default", "random"] {
            let dir = root.join("layout").join(src).join(search).join(split);
            ids.extend(
                stems(dir)
                    .into_iter()
                    .map(|s| format!("layout:{src}:{search}:{s}")),
            );
        }
    }
    ids
}

/// The runtimes of an npz file, as the metrics read them (tile: normalised).
pub fn npz_runtimes(path: &Path, tile: bool) -> Result<Vec<f64>, ScoreError> {
    runtimes(path, tile)
}

/// Read a Kaggle-style submission: a CSV file (read with the `csv` crate, streamed, at
/// most [`crate::limits::CSV_FILE_BYTES`]) whose first row is the header `ID,TopConfigs`
/// (a UTF-8 byte-order mark before it is allowed), then one row per ID. Errors name the
/// CSV line: a missing header, a row without two fields, a ranking that is not
/// `;`-separated indices, an ID given twice.
pub fn read_submission(predictions: &Path) -> Result<Vec<Ranking>, ScoreError> {
    let file = predictions.display().to_string();
    let mut out = Vec::new();
    let mut seen: std::collections::HashMap<String, u64> = Default::default();
    super::csv_rows::for_each_row(predictions, &["ID", "TopConfigs"], |line, rec| {
        let id = rec.get(0).unwrap_or("");
        let top: Vec<usize> = rec
            .get(1)
            .unwrap_or("")
            .split(';')
            .filter(|t| !t.trim().is_empty())
            .map(|t| t.trim().parse::<usize>())
            .collect::<Result<_, _>>()
            .map_err(|_| CsvFault::at(line, "TopConfigs must be ';'-separated config indices"))?;
        if let Some(first) = seen.insert(id.to_string(), line) {
            return Err(CsvFault::at(
                line,
                format!("ID '{id}' is given twice (first on line {first})"),
            ));
        }
        out.push(Ranking {
            id: id.to_string(),
            top,
            origin: format!("{file}:{line}"),
        });
        Ok(())
    })
    .map_err(|f| csv_fault(&file, f))?;
    if out.is_empty() {
        return Err(ScoreError::Data(format!("{file}: no predictions")));
    }
    Ok(out)
}

/// A refused prediction CSV as a [`ScoreError`] naming the file (and the line).
pub(crate) fn csv_fault(file: &str, f: CsvFault) -> ScoreError {
    if f.line == 0 {
        ScoreError::Data(format!("{file}: {}", f.msg))
    } else {
        ScoreError::Csv {
            file: file.to_string(),
            line: f.line as usize,
            msg: f.msg,
        }
    }
}

/// The IDs of `split` under `root` (every npz file, [`split_ids`]) that `rankings` do
/// not rank, as an error naming `file` (how many, and the first few); `Ok` when every
/// file has its row.
pub fn check_complete(
    root: &Path,
    split: &str,
    rankings: &[Ranking],
    file: &str,
) -> Result<(), ScoreError> {
    let given: std::collections::HashSet<&str> = rankings.iter().map(|r| r.id.as_str()).collect();
    let all = split_ids(root, split);
    let missing: Vec<&String> = all
        .iter()
        .filter(|id| !given.contains(id.as_str()))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = missing.iter().take(3).map(|s| s.as_str()).collect();
    Err(ScoreError::Data(format!(
        "{file}: ranks no configuration of {} of the {} graphs of split '{split}' \
         (e.g. {}){}; give --allow-missing to score only the rows it has",
        missing.len(),
        all.len(),
        shown.join(", "),
        if missing.len() > 3 { ", ..." } else { "" },
    )))
}

/// Score rankings against the npz files under `root` (the folder holding `tile/` and
/// `layout/`), split `split`, with the official per-collection metrics.
pub fn score_rankings(
    root: &Path,
    split: &str,
    rankings: &[Ranking],
) -> Result<ScoreReport, ScoreError> {
    let mut per: IndexMap<String, Vec<f64>> = IndexMap::new();
    for r in rankings {
        let at = |msg: String| ScoreError::Data(format!("{}: {msg}", r.origin));
        let (collection, path, tile) =
            npz_of(root, split, &r.id).ok_or_else(|| at(format!("unknown ID '{}'", r.id)))?;
        let y = runtimes(&path, tile)?;
        let s = if tile {
            kaggle_tile_score_for_ranking(&r.top, &y)
        } else {
            kaggle_layout_score_for_ranking(&r.top, &y)
        }
        .map_err(|e| at(e.to_string()))?;
        per.entry(collection).or_default().push(s);
    }
    if per.is_empty() {
        return Err(ScoreError::Data("no predictions".into()));
    }
    let collections: Vec<CollectionScore> = per
        .into_iter()
        .map(|(collection, v)| CollectionScore {
            collection,
            graphs: v.len(),
            score: v.iter().sum::<f64>() / v.len() as f64,
        })
        .collect();
    let scores: Vec<f64> = collections.iter().map(|c| c.score).collect();
    let final_score = kaggle_final_score(&scores).map_err(|e| ScoreError::Data(e.to_string()))?;
    Ok(ScoreReport {
        collections,
        final_score,
    })
}

/// Score `predictions` (CSV with header `ID,TopConfigs`) against the npz files under
/// `root` (the folder holding `tile/` and `layout/`), split `split`.
pub fn score_submission(
    root: &Path,
    split: &str,
    predictions: &Path,
) -> Result<ScoreReport, ScoreError> {
    score_rankings(root, split, &read_submission(predictions)?)
}
