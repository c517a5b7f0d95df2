//! TpuGraphs evaluation metrics, identical to the official definitions
//! (spec `tpugraphs_format.md` §5; formulas and sources in `docs/metrics.md`).
//!
//! **Direction.** Everywhere in this module a *score* is a model's estimate
//! of runtime: **lower score = predicted faster**, as in all official code
//! (`argsort(preds)[:K]` picks the K predicted-fastest configs). Runtimes are
//! measured times (lower = faster).
//!
//! | function | official source |
//! |---|---|
//! | [`opa`], [`opa_counts`], [`opa_pooled`] | TF-Ranking `OPAMetric` |
//! | [`kendall_tau_b`] | `scipy.stats.kendalltau` default (τ-b) |
//! | [`top_k_slowdown`], [`tile_top_k_errors`] | `tiles/metrics.py::top_error_performance` |
//! | [`kaggle_tile_score`], [`kaggle_tile_score_for_ranking`] | Kaggle `2 − best_in_top5 / best` |
//! | [`kaggle_layout_score`], [`kaggle_layout_score_for_ranking`] | Kaggle τ of the submitted order |
//! | [`kaggle_final_score`] | mean of the five collection scores |
//!
//! Kendall's τ-b runs in O(n log n) (Knight's algorithm, the one scipy
//! uses) and reproduces scipy's floating-point operations, so results are
//! bit-identical to scipy for inputs below 2^53 pairs.

use std::cmp::Ordering;

/// Invalid metric input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricError {
    /// The two sequences differ in length.
    #[error("scores have {scores} entries but runtimes have {runtimes}")]
    LengthMismatch {
        /// Length of the scores.
        scores: usize,
        /// Length of the runtimes.
        runtimes: usize,
    },
    /// A list has no configurations.
    #[error("empty list of configurations")]
    Empty,
    /// `K` was 0.
    #[error("K must be at least 1")]
    ZeroK,
    /// A runtime is NaN, infinite, zero or negative.
    #[error("runtime {value} at index {index} is not a positive finite number")]
    BadRuntime {
        /// Position in the list.
        index: usize,
        /// Offending value.
        value: f64,
    },
    /// A ranking names a config that does not exist.
    #[error("config index {index} out of range for {len} configs")]
    IndexOutOfRange {
        /// Offending index.
        index: usize,
        /// Number of configs.
        len: usize,
    },
    /// A ranking names a config twice.
    #[error("config index {index} appears twice in the ranking")]
    DuplicateIndex {
        /// Offending index.
        index: usize,
    },
    /// A layout ranking is not a full permutation.
    #[error("ranking lists {got} of {len} configs; a full permutation is needed")]
    IncompleteRanking {
        /// Entries in the ranking.
        got: usize,
        /// Number of configs.
        len: usize,
    },
    /// No lists / collections were given to average.
    #[error("nothing to average")]
    NothingToAverage,
}

/// Result alias for metrics.
pub type Result<T, E = MetricError> = std::result::Result<T, E>;

fn check_len(scores: &[f64], runtimes: &[f64]) -> Result<()> {
    if scores.len() != runtimes.len() {
        return Err(MetricError::LengthMismatch {
            scores: scores.len(),
            runtimes: runtimes.len(),
        });
    }
    Ok(())
}

/// Partial order for finite/inf values; equal for NaN (callers remove NaN
/// first). `-0.0 == 0.0`, like NumPy's `!=`.
fn cmp_f64(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// Ascending order with NaN after every number.
fn cmp_nan_last(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (false, false) => cmp_f64(a, b),
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
    }
}

/// Config indices sorted by ascending score (predicted fastest first),
/// stable for ties (lower index first, as `tf.argsort` and `TopConfigs`
/// writers do); NaN scores go last. This is the `TopConfigs` order.
pub fn ranking_from_scores(scores: &[f64]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| {
        let sa = scores.get(a).copied().unwrap_or(f64::NAN);
        let sb = scores.get(b).copied().unwrap_or(f64::NAN);
        cmp_nan_last(sa, sb)
    });
    idx
}

// ---------------------------------------------------------------------------
// Kendall tau-b (Knight's O(n log n) algorithm, as in scipy)
// ---------------------------------------------------------------------------

/// Pair counts behind Kendall's τ (scipy's names in brackets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KendallCounts {
    /// Number of observations.
    pub n: u64,
    /// All pairs, n(n−1)/2 \[`tot`\].
    pub total: u64,
    /// Pairs tied in x (including joint ties) \[`xtie`\].
    pub x_ties: u64,
    /// Pairs tied in y (including joint ties) \[`ytie`\].
    pub y_ties: u64,
    /// Pairs tied in both \[`ntie`\].
    pub joint_ties: u64,
    /// Discordant pairs \[`dis`\].
    pub discordant: u64,
}

impl KendallCounts {
    /// Concordant pairs: tot − xtie − ytie + ntie − dis.
    pub fn concordant(&self) -> u64 {
        (self.total + self.joint_ties)
            .saturating_sub(self.x_ties + self.y_ties)
            .saturating_sub(self.discordant)
    }

    /// τ-b from the counts with scipy's exact arithmetic:
    /// `(tot − xtie − ytie + ntie − 2·dis) / sqrt(tot − xtie) / sqrt(tot − ytie)`,
    /// clipped to \[−1, 1\]; NaN when x or y is constant (or n < 2).
    pub fn tau_b(&self) -> f64 {
        if self.x_ties == self.total || self.y_ties == self.total {
            return f64::NAN;
        }
        let cmd = i128::from(self.total) - i128::from(self.x_ties) - i128::from(self.y_ties)
            + i128::from(self.joint_ties)
            - 2 * i128::from(self.discordant);
        let tau = cmd as f64
            / ((self.total - self.x_ties) as f64).sqrt()
            / ((self.total - self.y_ties) as f64).sqrt();
        tau.clamp(-1.0, 1.0)
    }
}

/// Number of pairs inside runs of equal adjacent values.
fn tie_pairs<T: Copy>(v: &[T], eq: impl Fn(T, T) -> bool) -> u64 {
    let mut ties = 0u64;
    let mut run = 1u64;
    for w in v.windows(2) {
        if eq(w[0], w[1]) {
            run += 1;
        } else {
            ties += run * (run - 1) / 2;
            run = 1;
        }
    }
    if !v.is_empty() {
        ties += run * (run - 1) / 2;
    }
    ties
}

/// Order-preserving map of a non-NaN f64 to u64 (`-0.0` and `0.0` map to
/// the same key, as NumPy compares them equal).
fn order_key(v: f64) -> u64 {
    let b = (v + 0.0).to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

/// Sorts `v` ascending (bottom-up merge sort) and returns the number of
/// strict inversions (i < j with v\[i\] > v\[j\]).
fn sort_count_inversions(v: &mut Vec<u64>) -> u64 {
    let n = v.len();
    let mut src = std::mem::take(v);
    let mut dst = vec![0u64; n];
    let mut inv = 0u64;
    let mut width = 1usize;
    while width < n {
        for (s_chunk, d_chunk) in src.chunks(2 * width).zip(dst.chunks_mut(2 * width)) {
            let mid = width.min(s_chunk.len());
            let (left, right) = s_chunk.split_at(mid);
            let (mut i, mut j, mut k) = (0usize, 0usize, 0usize);
            while i < left.len() && j < right.len() {
                let (l, r) = (left[i], right[j]);
                if r < l {
                    d_chunk[k] = r;
                    inv += (left.len() - i) as u64;
                    j += 1;
                } else {
                    d_chunk[k] = l;
                    i += 1;
                }
                k += 1;
            }
            d_chunk[k..k + left.len() - i].copy_from_slice(&left[i..]);
            k += left.len() - i;
            d_chunk[k..].copy_from_slice(&right[j..]);
        }
        std::mem::swap(&mut src, &mut dst);
        width *= 2;
    }
    *v = src;
    inv
}

/// Knight's algorithm on NaN-free data of equal length.
fn knight(x: &[f64], y: &[f64]) -> KendallCounts {
    let n = x.len().min(y.len());
    let mut pairs: Vec<(u64, u64)> = x
        .iter()
        .zip(y)
        .map(|(&a, &b)| (order_key(a), order_key(b)))
        .collect();
    pairs.sort_unstable();
    let x_ties = tie_pairs(&pairs, |a, b| a.0 == b.0);
    let joint_ties = tie_pairs(&pairs, |a, b| a == b);
    let mut ys: Vec<u64> = pairs.iter().map(|p| p.1).collect();
    let discordant = sort_count_inversions(&mut ys);
    let y_ties = tie_pairs(&ys, |a, b| a == b);
    let n64 = n as u64;
    KendallCounts {
        n: n64,
        total: n64 * n64.saturating_sub(1) / 2,
        x_ties,
        y_ties,
        joint_ties,
        discordant,
    }
}

/// Pair counts of Kendall's τ for `x` and `y` (NaN-free input expected;
/// NaN compares equal to everything).
pub fn kendall_counts(x: &[f64], y: &[f64]) -> Result<KendallCounts> {
    check_len(x, y)?;
    Ok(knight(x, y))
}

/// Kendall's τ-b exactly as `scipy.stats.kendalltau(x, y).statistic` with
/// default arguments (variant `'b'`, `nan_policy='propagate'`):
/// `τ_b = (C − D) / sqrt((C + D + T_x)(C + D + T_y))` with T_x / T_y the
/// pairs tied only in x / only in y. Returns NaN, like scipy, for empty
/// input, n = 1, a constant x or y, or any NaN. O(n log n).
///
/// For layout ranking pass `(scores, runtimes)`; the statistic is symmetric.
pub fn kendall_tau_b(x: &[f64], y: &[f64]) -> Result<f64> {
    check_len(x, y)?;
    if x.iter().chain(y).any(|v| v.is_nan()) {
        return Ok(f64::NAN);
    }
    Ok(knight(x, y).tau_b())
}

/// Reference O(n²) τ-b (for tests and cross-checks).
pub fn kendall_tau_b_naive(x: &[f64], y: &[f64]) -> Result<f64> {
    check_len(x, y)?;
    if x.iter().chain(y).any(|v| v.is_nan()) {
        return Ok(f64::NAN);
    }
    let n = x.len();
    let (mut c, mut d, mut tx, mut ty, mut txy) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for i in 0..n {
        for j in i + 1..n {
            let dx = cmp_f64(x[i], x[j]);
            let dy = cmp_f64(y[i], y[j]);
            match (dx, dy) {
                (Ordering::Equal, Ordering::Equal) => txy += 1,
                (Ordering::Equal, _) => tx += 1,
                (_, Ordering::Equal) => ty += 1,
                (a, b) if a == b => c += 1,
                _ => d += 1,
            }
        }
    }
    let counts = KendallCounts {
        n: n as u64,
        total: (n as u64) * (n as u64).saturating_sub(1) / 2,
        x_ties: tx + txy,
        y_ties: ty + txy,
        joint_ties: txy,
        discordant: d,
    };
    debug_assert_eq!(counts.concordant(), c);
    Ok(counts.tau_b())
}

// ---------------------------------------------------------------------------
// Ordered pair accuracy (TF-Ranking OPAMetric)
// ---------------------------------------------------------------------------

/// Numerator and denominator of OPA for one list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpaCounts {
    /// Pairs with y_i > y_j and s_i > s_j.
    pub correct: u64,
    /// Pairs with y_i > y_j (the list's weight in TF-Ranking).
    pub pairs: u64,
}

impl OpaCounts {
    /// correct / pairs, or 0 when there are no pairs (TF `divide_no_nan`).
    pub fn value(&self) -> f64 {
        if self.pairs == 0 {
            0.0
        } else {
            self.correct as f64 / self.pairs as f64
        }
    }
}

impl std::ops::Add for OpaCounts {
    type Output = OpaCounts;
    fn add(self, o: OpaCounts) -> OpaCounts {
        OpaCounts {
            correct: self.correct + o.correct,
            pairs: self.pairs + o.pairs,
        }
    }
}

/// OPA counts of one list with TF-Ranking semantics:
/// `Σ_i Σ_j 1[s_i > s_j]·1[y_i > y_j]` over `Σ_i Σ_j 1[y_i > y_j]`.
/// Label ties are ignored; score ties (and NaN scores) count as wrong.
/// Items whose label is not `>= 0` (negative or NaN) are invalid and
/// dropped, like `tfr.utils.is_label_valid`. O(n log n).
///
/// Labels are runtimes here (tile: normalised runtime; the layout baseline
/// feeds `runtime / 1e7` as float32), so a correct pair is one where the
/// slower config has the higher score (lower score = predicted faster).
pub fn opa_counts(scores: &[f64], labels: &[f64]) -> Result<OpaCounts> {
    check_len(scores, labels)?;
    let mut xs = Vec::with_capacity(labels.len());
    let mut ys = Vec::with_capacity(labels.len());
    let mut nan_scored: Vec<f64> = Vec::new();
    for (&s, &y) in scores.iter().zip(labels) {
        if y >= 0.0 {
            if s.is_nan() {
                nan_scored.push(y);
            } else {
                xs.push(y);
                ys.push(s);
            }
        }
    }
    let k = knight(&xs, &ys);
    let correct = k.concordant();
    let pairs = if nan_scored.is_empty() {
        k.total - k.x_ties
    } else {
        // Label ties over all valid items, NaN-scored ones included.
        let mut all: Vec<u64> = xs
            .iter()
            .chain(&nan_scored)
            .map(|&v| order_key(v))
            .collect();
        all.sort_unstable();
        let nv = all.len() as u64;
        nv * nv.saturating_sub(1) / 2 - tie_pairs(&all, |a, b| a == b)
    };
    Ok(OpaCounts { correct, pairs })
}

/// OPA of one list (see [`opa_counts`]); 0 when the list has no pair with
/// distinct labels, as TF-Ranking's `divide_no_nan`.
pub fn opa(scores: &[f64], labels: &[f64]) -> Result<f64> {
    opa_counts(scores, labels).map(|c| c.value())
}

/// OPA over many lists as Keras reports it: each list's OPA weighted by its
/// number of ordered pairs, i.e. Σ correct / Σ pairs pooled over all lists
/// (0 when no list has a pair). TF accumulates in float32, so logged values
/// can differ from this exact ratio by ~1e-7.
pub fn opa_pooled<'a, I>(lists: I) -> Result<f64>
where
    I: IntoIterator<Item = (&'a [f64], &'a [f64])>,
{
    let mut total = OpaCounts::default();
    for (s, y) in lists {
        total = total + opa_counts(s, y)?;
    }
    Ok(total.value())
}

/// Reference O(n²) OPA counts (for tests).
pub fn opa_counts_naive(scores: &[f64], labels: &[f64]) -> Result<OpaCounts> {
    check_len(scores, labels)?;
    let mut c = OpaCounts::default();
    for i in 0..labels.len() {
        for j in 0..labels.len() {
            let (yi, yj) = (labels[i], labels[j]);
            if yi >= 0.0 && yj >= 0.0 && yi > yj {
                c.pairs += 1;
                if scores[i] > scores[j] {
                    c.correct += 1;
                }
            }
        }
    }
    Ok(c)
}

// ---------------------------------------------------------------------------
// Tile metrics
// ---------------------------------------------------------------------------

/// Checks runtimes and returns the best (smallest) one.
fn best_runtime(runtimes: &[f64]) -> Result<f64> {
    if runtimes.is_empty() {
        return Err(MetricError::Empty);
    }
    let mut best = f64::INFINITY;
    for (index, &value) in runtimes.iter().enumerate() {
        if !(value.is_finite() && value > 0.0) {
            return Err(MetricError::BadRuntime { index, value });
        }
        best = best.min(value);
    }
    Ok(best)
}

/// Smallest runtime among the first `k` entries of `order`.
fn best_of(order: &[usize], k: usize, runtimes: &[f64]) -> Result<f64> {
    let mut best = f64::INFINITY;
    for &i in order.iter().take(k) {
        let y = *runtimes.get(i).ok_or(MetricError::IndexOutOfRange {
            index: i,
            len: runtimes.len(),
        })?;
        best = best.min(y);
    }
    Ok(best)
}

/// Top-K error (slowdown) of one kernel, as `top_error_performance`:
/// `(min_{i ∈ topK(s)} y_i − min_i y_i) / min_i y_i`, where topK(s) are the
/// K configs with the smallest scores (stable for ties, like `tf.argsort`;
/// all configs when K > n). 0 = the model's top-K contains the best config;
/// 0.2 = 20 % slower than the best. Runtimes must be positive and finite.
pub fn top_k_slowdown(scores: &[f64], runtimes: &[f64], k: usize) -> Result<f64> {
    check_len(scores, runtimes)?;
    if k == 0 {
        return Err(MetricError::ZeroK);
    }
    let best = best_runtime(runtimes)?;
    let order = ranking_from_scores(scores);
    let chosen = best_of(&order, k, runtimes)?;
    Ok((chosen - best) / best)
}

/// Mean top-K error over kernels (the paper's/baselines' reported value).
pub fn mean_top_k_slowdown<'a, I>(lists: I, k: usize) -> Result<f64>
where
    I: IntoIterator<Item = (&'a [f64], &'a [f64])>,
{
    let mut sum = 0.0;
    let mut n = 0usize;
    for (s, y) in lists {
        sum += top_k_slowdown(s, y, k)?;
        n += 1;
    }
    if n == 0 {
        return Err(MetricError::NothingToAverage);
    }
    Ok(sum / n as f64)
}

/// Mean tile top-K errors for K = 1, 5, 10 (`final_error` in `run_*.jsonz`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TileTopKErrors {
    /// Mean top-1 error.
    pub top1: f64,
    /// Mean top-5 error.
    pub top5: f64,
    /// Mean top-10 error.
    pub top10: f64,
}

/// Mean top-1/5/10 errors over kernels given as (scores, runtimes) pairs.
pub fn tile_top_k_errors(lists: &[(&[f64], &[f64])]) -> Result<TileTopKErrors> {
    Ok(TileTopKErrors {
        top1: mean_top_k_slowdown(lists.iter().copied(), 1)?,
        top5: mean_top_k_slowdown(lists.iter().copied(), 5)?,
        top10: mean_top_k_slowdown(lists.iter().copied(), 10)?,
    })
}

/// Number of configs a Kaggle tile submission lists.
pub const KAGGLE_TILE_TOP: usize = 5;

/// Kaggle tile score of one kernel from a submitted `TopConfigs` list (best
/// first): `2 − min_{i ∈ first 5} y_i / min_i y_i` (= 1 − top-5 slowdown;
/// 1 is perfect). Shorter lists use what they have; indices must be in
/// range and distinct.
pub fn kaggle_tile_score_for_ranking(top_configs: &[usize], runtimes: &[f64]) -> Result<f64> {
    let best = best_runtime(runtimes)?;
    let top = &top_configs[..top_configs.len().min(KAGGLE_TILE_TOP)];
    if top.is_empty() {
        return Err(MetricError::Empty);
    }
    // Only the first five count, but the whole ranking must be valid.
    check_distinct(top_configs, runtimes.len())?;
    let chosen = best_of(top, KAGGLE_TILE_TOP, runtimes)?;
    Ok(2.0 - chosen / best)
}

/// Kaggle tile score of one kernel from model scores (lower = faster): the
/// submission would list the 5 lowest scores.
pub fn kaggle_tile_score(scores: &[f64], runtimes: &[f64]) -> Result<f64> {
    check_len(scores, runtimes)?;
    let order = ranking_from_scores(scores);
    kaggle_tile_score_for_ranking(&order, runtimes)
}

fn check_distinct(idx: &[usize], len: usize) -> Result<()> {
    let mut seen = vec![false; len];
    for &i in idx {
        match seen.get_mut(i) {
            None => return Err(MetricError::IndexOutOfRange { index: i, len }),
            Some(s) if *s => return Err(MetricError::DuplicateIndex { index: i }),
            Some(s) => *s = true,
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Layout metrics
// ---------------------------------------------------------------------------

/// Kaggle layout score of one graph from a submitted ranking (full
/// permutation of config indices, best first): Kendall τ-b between each
/// config's position in the ranking and its runtime. NaN when undefined
/// (fewer than 2 configs or all runtimes equal), as scipy.
pub fn kaggle_layout_score_for_ranking(ranking: &[usize], runtimes: &[f64]) -> Result<f64> {
    let n = runtimes.len();
    if ranking.len() != n {
        return Err(MetricError::IncompleteRanking {
            got: ranking.len(),
            len: n,
        });
    }
    check_distinct(ranking, n)?;
    let mut position = vec![0.0f64; n];
    for (p, &i) in ranking.iter().enumerate() {
        if let Some(slot) = position.get_mut(i) {
            *slot = p as f64;
        }
    }
    kendall_tau_b(&position, runtimes)
}

/// Kaggle layout score of one graph from model scores (lower = faster): the
/// τ-b of the stable ascending order of the scores against the runtimes.
/// Equal to [`kendall_tau_b`]`(scores, runtimes)` (what the official
/// `layout_evaluate.py` reports) when scores have no ties; with ties the
/// submission order breaks them by index.
pub fn kaggle_layout_score(scores: &[f64], runtimes: &[f64]) -> Result<f64> {
    check_len(scores, runtimes)?;
    kaggle_layout_score_for_ranking(&ranking_from_scores(scores), runtimes)
}

/// Mean of per-graph values (collection score). NaN entries propagate like
/// `np.mean`.
pub fn mean(values: &[f64]) -> Result<f64> {
    if values.is_empty() {
        return Err(MetricError::NothingToAverage);
    }
    Ok(values.iter().sum::<f64>() / values.len() as f64)
}

/// Kaggle final score: the plain mean of the per-collection scores
/// (tile:xla, layout:xla:default, layout:xla:random, layout:nlp:default,
/// layout:nlp:random), each collection weighted equally whatever its graph
/// count.
pub fn kaggle_final_score(collection_scores: &[f64]) -> Result<f64> {
    mean(collection_scores)
}
