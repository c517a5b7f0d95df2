//! Metrics against values computed offline with scipy 1.17.1 / numpy 2.4.6
//! (scripts reproduced in docs/metrics.md), plus a live scipy comparison
//! on random data when python3 + scipy are installed.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use tpusim::eval::metrics::*;

/// 64-bit LCG shared with the Python scripts that computed the expected
/// values (state = state·6364136223846793005 + 1442695040888963407; output
/// = state >> 11).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }
    fn unif(&mut self) -> f64 {
        self.next() as f64 / 2f64.powi(53)
    }
    fn int(&mut self, m: u64) -> f64 {
        (self.next() % m) as f64
    }
}

fn ints(seed: u64, n: usize, m: u64) -> (Vec<f64>, Vec<f64>) {
    let mut r = Lcg(seed);
    let x = (0..n).map(|_| r.int(m)).collect();
    let y = (0..n).map(|_| r.int(m)).collect();
    (x, y)
}

fn f(v: &[i32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

fn assert_close(got: f64, want: f64, tol: f64, what: &str) {
    if want.is_nan() {
        assert!(got.is_nan(), "{what}: expected NaN, got {got}");
    } else {
        assert!(
            (got - want).abs() <= tol,
            "{what}: got {got:.17}, want {want:.17}"
        );
    }
}

#[test]
fn kendall_matches_scipy_hardcoded() {
    // (x, y, scipy.stats.kendalltau(x, y).statistic)
    let cases: Vec<(&str, Vec<f64>, Vec<f64>, f64)> = vec![
        (
            "scipy doc",
            f(&[12, 2, 1, 12, 2]),
            f(&[1, 4, 7, 1, 0]),
            -0.4714045207910316,
        ),
        (
            "ties in y",
            f(&[1, 2, 3, 4, 5]),
            f(&[5, 6, 7, 8, 7]),
            0.7378647873726218,
        ),
        (
            "ties in both",
            f(&[1, 1, 2, 2, 3, 3, 3]),
            f(&[1, 2, 1, 2, 3, 3, 1]),
            0.375,
        ),
        ("reversed", f(&[1, 2, 3, 4]), f(&[4, 3, 2, 1]), -1.0),
        ("perfect", f(&[1, 2, 3]), f(&[10, 20, 30]), 1.0),
        (
            "signed zeros tie",
            vec![0.0, -0.0, 1.0, 2.0],
            vec![3.0, 1.0, 2.0, 2.0],
            0.0,
        ),
        ("constant x", f(&[1, 1, 1]), f(&[1, 2, 3]), f64::NAN),
        ("n = 1", f(&[1]), f(&[2]), f64::NAN),
        ("empty", vec![], vec![], f64::NAN),
    ];
    for (name, x, y, want) in &cases {
        let got = kendall_tau_b(x, y).unwrap();
        assert_close(got, *want, 1e-15, name);
        let naive = kendall_tau_b_naive(x, y).unwrap();
        assert_close(naive, *want, 1e-15, name);
        // Symmetric in its arguments.
        assert_close(kendall_tau_b(y, x).unwrap(), *want, 1e-15, name);
    }
    // Seeded integer data (many ties) and continuous data.
    let lcg_cases = [
        (1u64, 50usize, 5u64, 0.03155265723979266),
        (2, 200, 1000, -0.035707102315788206),
        (3, 1000, 3, 0.028581905859462083),
        (4, 37, 2, 0.021093908175476482),
    ];
    for (seed, n, m, want) in lcg_cases {
        let (x, y) = ints(seed, n, m);
        let got = kendall_tau_b(&x, &y).unwrap();
        assert_eq!(got, want, "lcg seed {seed}: bit-identical to scipy");
        assert_close(kendall_tau_b_naive(&x, &y).unwrap(), want, 1e-14, "naive");
    }
    for (seed, n, want) in [
        (5u64, 100usize, 0.029090909090909094),
        (6, 1000, -0.020184184184184186),
    ] {
        let mut r = Lcg(seed);
        let x: Vec<f64> = (0..n).map(|_| r.unif()).collect();
        let y: Vec<f64> = (0..n).map(|_| r.unif()).collect();
        assert_eq!(kendall_tau_b(&x, &y).unwrap(), want, "uniform seed {seed}");
    }
}

#[test]
fn kendall_nan_and_errors() {
    assert!(kendall_tau_b(&[1.0, f64::NAN, 3.0], &[1.0, 2.0, 3.0])
        .unwrap()
        .is_nan());
    assert_eq!(
        kendall_tau_b(&[1.0, 2.0], &[1.0]),
        Err(MetricError::LengthMismatch {
            scores: 2,
            runtimes: 1
        })
    );
    let c = kendall_counts(&f(&[1, 1, 2, 2, 3, 3, 3]), &f(&[1, 2, 1, 2, 3, 3, 1])).unwrap();
    // 21 pairs; x ties 1+1+3 = 5; y ties (1:3 -> 3, 2:2 -> 1, 3:2 -> 1) = 5; joint (3,3) = 1.
    assert_eq!((c.total, c.x_ties, c.y_ties, c.joint_ties), (21, 5, 5, 1));
    assert_eq!(c.concordant() as i64 - c.discordant as i64, 6); // tau = 6/sqrt(16*16)
}

#[test]
fn opa_matches_tf_ranking() {
    // TF-Ranking OPAMetric docstring: y_true=[[0,1,2]], y_pred=[[3,1,2]] -> 0.33333334.
    assert_close(
        opa(&[3.0, 1.0, 2.0], &[0.0, 1.0, 2.0]).unwrap(),
        1.0 / 3.0,
        1e-15,
        "tf doc 1",
    );
    // Ragged docstring: [[0,1],[1,2,0]] vs [[2,1],[2,5,4]] -> 0.5 (pooled).
    let lists: [(&[f64], &[f64]); 2] = [
        (&[2.0, 1.0], &[0.0, 1.0]),
        (&[2.0, 5.0, 4.0], &[1.0, 2.0, 0.0]),
    ];
    assert_eq!(opa_pooled(lists).unwrap(), 0.5);
    // A plain mean of the per-list values would give 1/3: pooling matters.
    assert_eq!(opa(&[2.0, 1.0], &[0.0, 1.0]).unwrap(), 0.0);
    assert_close(
        opa(&[2.0, 5.0, 4.0], &[1.0, 2.0, 0.0]).unwrap(),
        2.0 / 3.0,
        1e-15,
        "list 2",
    );

    // Counts computed with the TF formula in numpy (expected2.py).
    let cases: Vec<(&str, Vec<f64>, Vec<f64>, OpaCounts)> = vec![
        (
            "score and label ties",
            f(&[1, 1, 2, 3, 3]),
            f(&[1, 2, 2, 3, 4]),
            OpaCounts {
                correct: 7,
                pairs: 9,
            },
        ),
        (
            "invalid labels dropped",
            vec![5.0, 1.0, 2.0, 3.0, 0.5],
            vec![-1.0, 1.0, 2.0, 3.0, -0.5],
            OpaCounts {
                correct: 3,
                pairs: 3,
            },
        ),
        (
            "nan score is wrong",
            vec![f64::NAN, 1.0, 2.0, 3.0],
            f(&[4, 1, 2, 3]),
            OpaCounts {
                correct: 3,
                pairs: 6,
            },
        ),
    ];
    for (name, s, y, want) in cases {
        assert_eq!(opa_counts(&s, &y).unwrap(), want, "{name}");
        assert_eq!(opa_counts_naive(&s, &y).unwrap(), want, "{name} naive");
    }
    for (seed, n, m, want, value) in [
        (
            7u64,
            300usize,
            10u64,
            OpaCounts {
                correct: 18905,
                pairs: 40361,
            },
            0.46839771066128194,
        ),
        (
            8,
            1000,
            1000,
            OpaCounts {
                correct: 244889,
                pairs: 499019,
            },
            0.49074083351535713,
        ),
    ] {
        let (s, y) = ints(seed, n, m);
        assert_eq!(opa_counts(&s, &y).unwrap(), want);
        assert_eq!(opa(&s, &y).unwrap(), value);
    }
    // No ordered pair: divide_no_nan gives 0.
    assert_eq!(opa(&[1.0, 2.0], &[3.0, 3.0]).unwrap(), 0.0);
    assert_eq!(opa_pooled(std::iter::empty()).unwrap(), 0.0);
}

#[test]
fn opa_fast_equals_naive_on_random_lists() {
    let mut r = Lcg(42);
    for trial in 0..300 {
        let n = (r.next() % 60) as usize;
        let m = 1 + r.next() % 8;
        let s: Vec<f64> = (0..n).map(|_| r.int(m)).collect();
        let y: Vec<f64> = (0..n).map(|_| r.int(m) - 1.0).collect(); // some invalid (-1)
        assert_eq!(
            opa_counts(&s, &y).unwrap(),
            opa_counts_naive(&s, &y).unwrap(),
            "trial {trial}"
        );
        let kt = kendall_tau_b(&s, &y).unwrap();
        let kn = kendall_tau_b_naive(&s, &y).unwrap();
        assert!(
            kt == kn || (kt.is_nan() && kn.is_nan()),
            "trial {trial}: {kt} vs {kn}"
        );
    }
}

#[test]
fn tile_metrics_match_numpy() {
    let s = [0.5, 0.1, 0.9, 0.3, 0.3, 0.7, 0.2, 0.8, 0.6, 0.4, 0.05, 0.95];
    let y = [
        120., 300., 100., 250., 180., 110., 400., 130., 150., 210., 500., 105.,
    ];
    for (k, want) in [(1, 4.0), (5, 0.8), (10, 0.1), (20, 0.0)] {
        assert_close(
            top_k_slowdown(&s, &y, k).unwrap(),
            want,
            1e-15,
            &format!("top{k}"),
        );
    }
    assert_eq!(kaggle_tile_score(&s, &y).unwrap(), 0.19999999999999996);
    // Kaggle score = 1 - top-5 slowdown.
    assert_close(
        kaggle_tile_score(&s, &y).unwrap(),
        1.0 - top_k_slowdown(&s, &y, 5).unwrap(),
        1e-15,
        "1 - slowdown",
    );
    // Explicit TopConfigs list: best config (index 2, 100 ns) listed 3rd.
    assert_eq!(
        kaggle_tile_score_for_ranking(&[0, 5, 2, 7], &y).unwrap(),
        1.0
    );
    assert_close(
        kaggle_tile_score_for_ranking(&[10, 6, 0], &y).unwrap(),
        2.0 - 120.0 / 100.0,
        1e-15,
        "list",
    );
    // Only the first five entries count.
    assert_close(
        kaggle_tile_score_for_ranking(&[10, 6, 1, 3, 9, 2], &y).unwrap(),
        2.0 - 210.0 / 100.0,
        1e-15,
        "first five",
    );

    // Seeded kernels with tied integer scores (stable tie order).
    for (seed, n, want, want_kaggle) in [
        (9u64, 40usize, [2.1166086173809346, 0.0, 0.0], 1.0),
        (10, 3, [0.8944536365535024, 0.0, 0.0], 1.0),
    ] {
        let mut r = Lcg(seed);
        let s: Vec<f64> = (0..n).map(|_| r.int(7)).collect();
        let y: Vec<f64> = (0..n).map(|_| 1.0 + r.unif() * 10.0).collect();
        for (k, w) in [1, 5, 10].into_iter().zip(want) {
            assert_eq!(top_k_slowdown(&s, &y, k).unwrap(), w, "seed {seed} top{k}");
        }
        assert_eq!(kaggle_tile_score(&s, &y).unwrap(), want_kaggle);
    }

    let lists: [(&[f64], &[f64]); 2] = [(&[1.0, 2.0], &[2.0, 1.0]), (&[1.0, 2.0], &[1.0, 2.0])];
    let e = tile_top_k_errors(&lists).unwrap();
    assert_eq!((e.top1, e.top5, e.top10), (0.5, 0.0, 0.0));
}

#[test]
fn tile_metric_errors() {
    assert_eq!(top_k_slowdown(&[1.0], &[1.0], 0), Err(MetricError::ZeroK));
    assert_eq!(top_k_slowdown(&[], &[], 1), Err(MetricError::Empty));
    assert_eq!(
        top_k_slowdown(&[1.0, 2.0], &[1.0, 0.0], 1),
        Err(MetricError::BadRuntime {
            index: 1,
            value: 0.0
        })
    );
    assert_eq!(
        kaggle_tile_score_for_ranking(&[0, 0], &[1.0, 2.0]),
        Err(MetricError::DuplicateIndex { index: 0 })
    );
    assert_eq!(
        kaggle_tile_score_for_ranking(&[7], &[1.0, 2.0]),
        Err(MetricError::IndexOutOfRange { index: 7, len: 2 })
    );
    assert_eq!(
        mean_top_k_slowdown(std::iter::empty(), 1),
        Err(MetricError::NothingToAverage)
    );
}

#[test]
fn layout_and_final_scores() {
    // Ranking [3,0,4,1,2] -> positions [1,3,4,0,2]; scipy tau vs runtimes = 0.6.
    let y = [5.0, 9.0, 7.0, 1.0, 3.0];
    assert_close(
        kaggle_layout_score_for_ranking(&[3, 0, 4, 1, 2], &y).unwrap(),
        0.6,
        1e-15,
        "layout",
    );
    // From scores without ties it equals tau(scores, runtimes).
    let s = [0.2, 0.9, 0.5, -1.0, 0.1];
    assert_eq!(
        kaggle_layout_score(&s, &y).unwrap(),
        kendall_tau_b(&s, &y).unwrap()
    );
    // Perfect ranking: scipy gives 10/sqrt(10)/sqrt(10) = 0.9999999999999999 too.
    assert_eq!(
        kaggle_layout_score_for_ranking(&[3, 4, 0, 2, 1], &y).unwrap(),
        0.9999999999999999
    );
    assert_eq!(
        kaggle_layout_score_for_ranking(&[3, 4, 0], &y),
        Err(MetricError::IncompleteRanking { got: 3, len: 5 })
    );
    assert_eq!(kaggle_final_score(&[0.8, 0.4, 0.2, 0.6, 0.5]).unwrap(), 0.5);
    assert_eq!(kaggle_final_score(&[]), Err(MetricError::NothingToAverage));
    assert_eq!(
        ranking_from_scores(&[0.3, f64::NAN, 0.1, 0.3]),
        vec![2, 0, 3, 1]
    );
}

#[test]
fn kendall_matches_live_scipy_on_random_data() {
    if !common::has(
        common::Need::Scipy,
        "kendall_matches_live_scipy_on_random_data",
    ) {
        return;
    }
    let mut r = Lcg(20240611);
    let mut cases: Vec<(Vec<f64>, Vec<f64>)> = Vec::new();
    for i in 0..60 {
        let n = [2usize, 3, 10, 100, 1000, 5000][i % 6];
        let (x, y): (Vec<f64>, Vec<f64>) = match i % 4 {
            0 => (0..n).map(|_| (r.unif(), r.unif())).unzip(),
            1 => (0..n).map(|_| (r.int(3), r.int(5))).unzip(),
            2 => {
                // Correlated: y = x + noise, runtimes-like magnitudes.
                (0..n)
                    .map(|_| {
                        let x = r.unif() * 1e6;
                        (x, (x + r.unif() * 3e5).round())
                    })
                    .unzip()
            }
            _ => (0..n).map(|_| (-r.int(50), r.int(20) * 0.25)).unzip(),
        };
        cases.push((x, y));
    }
    let json = serde_json::to_string(&cases).unwrap();
    let script = "import sys, json, scipy.stats as st\n\
                  for x, y in json.load(sys.stdin):\n    \
                  print(repr(float(st.kendalltau(x, y).statistic)))";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "python failed");
    let text = String::from_utf8(out.stdout).unwrap();
    let want: Vec<f64> = text
        .lines()
        .map(|l| l.trim().parse::<f64>().unwrap())
        .collect();
    assert_eq!(want.len(), cases.len());
    let mut exact = 0;
    for (i, ((x, y), w)) in cases.iter().zip(&want).enumerate() {
        let got = kendall_tau_b(x, y).unwrap();
        assert_close(got, *w, 1e-12, &format!("case {i} (n = {})", x.len()));
        if got == *w || (got.is_nan() && w.is_nan()) {
            exact += 1;
        }
    }
    println!(
        "kendall tau-b vs scipy: {exact}/{} bit-identical, all within 1e-12",
        cases.len()
    );
    assert_eq!(exact, cases.len(), "expected bit-identical results");
}
