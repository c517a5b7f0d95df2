//! Criterion benches for the ranking metrics: Kendall τ-b on 1,000 and
//! 100,000 configs, OPA on 1,000 configs (figures in docs/metrics.md).

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use tpusim::eval::metrics::{kendall_tau_b, opa};

/// Deterministic runtimes-like data: scores correlated with runtimes, with
/// some ties (runtimes rounded to 1 µs).
fn data(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut s = seed;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut scores = Vec::with_capacity(n);
    let mut runtimes = Vec::with_capacity(n);
    for _ in 0..n {
        let r = 1e6 + next() * 1e7;
        runtimes.push((r / 1000.0).round() * 1000.0);
        scores.push(r + next() * 3e6);
    }
    (scores, runtimes)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("kendall_tau_b");
    for n in [1_000usize, 100_000] {
        let (s, y) = data(n, 7);
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| kendall_tau_b(black_box(&s), black_box(&y)))
        });
    }
    g.finish();
    let (s, y) = data(1_000, 8);
    c.bench_function("opa/1000", |b| b.iter(|| opa(black_box(&s), black_box(&y))));
}

criterion_group!(benches, bench);
criterion_main!(benches);

/// The allocator of the `tpusim` binary, so that benches measure what it does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
