//! Sensitivity of the kernel model to tiling, padding, layout and data movement.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use tpusim::tpu::{
    default_tile, enumerate_tiles, estimate, explain, sample_tiles, tile_sizes, Bottleneck,
    Conv2dShape, KernelDesc, ModelError, MxuPrecision, OpCounts, TileConfig, TpuTarget,
};

// ---- allocation counter (per thread, so parallel tests do not interfere) ----
struct Counting;
thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;
fn allocs() -> usize {
    ALLOCS.with(|c| c.get())
}

fn mm(m: i64, k: i64, n: i64) -> KernelDesc {
    KernelDesc::matmul("mm", 1, m, k, n, 16, 16, MxuPrecision::Bf16).unwrap()
}

/// The tile config of a Pallas-style matmul block (bm × bk × bn elements): tile counts
/// over the output and the right-hand side (`TileConfig`).
fn blocks(d: &KernelDesc, bm: i64, bk: i64, bn: i64) -> TileConfig {
    TileConfig::from_sizes(d, &[bm, bn, bk])
}

#[test]
fn bigger_tiles_cut_refetch_until_vmem_runs_out() {
    let t = TpuTarget::v3();
    let d = mm(8192, 8192, 8192);
    let mut prev_bytes = f64::INFINITY;
    let mut prev_time = f64::INFINITY;
    for s in [128, 256, 512, 1024] {
        let e = estimate(&d, &blocks(&d, s, 512, s), &t).unwrap();
        // spec §5.2: s_in·(M·K·N/bn + K·N·M/bm) + s_out·M·N
        let expect = 2.0 * (8192f64.powi(3) / s as f64 * 2.0) + 2.0 * 8192f64.powi(2);
        assert!(
            (e.hbm_bytes - expect).abs() / expect < 1e-9,
            "s={s}: {} vs {expect}",
            e.hbm_bytes
        );
        assert!(e.hbm_bytes < prev_bytes);
        assert!(
            e.total_ns < prev_time,
            "s={s}: {} ns not faster",
            e.total_ns
        );
        prev_bytes = e.hbm_bytes;
        prev_time = e.total_ns;
    }
    match estimate(&d, &blocks(&d, 2048, 512, 2048), &t) {
        Err(ModelError::Infeasible { needed, available }) => {
            // 2·(2048·512·2)·2 + 2·2048²·2 + 2048²·4 = 40 MiB
            assert_eq!(needed, 40 << 20);
            assert_eq!(available, 16 << 20);
        }
        other => panic!("expected Infeasible, got {other:?}"),
    }
    assert!(explain(&d, &blocks(&d, 2048, 512, 2048), &t).contains("INFEASIBLE"));
}

#[test]
fn full_k_block_reads_lhs_once() {
    // bk = K with N fastest: the LHS block is reused across j (copy skipped).
    let t = TpuTarget::v5e();
    let d = mm(4096, 1024, 4096);
    let e = estimate(&d, &blocks(&d, 512, 1024, 512), &t).unwrap();
    let expect = 2.0 * (4096.0 * 1024.0 + 1024.0 * 4096.0 * 8.0) + 2.0 * 4096.0 * 4096.0;
    assert!(
        (e.hbm_bytes - expect).abs() < 1.0,
        "{} vs {expect}",
        e.hbm_bytes
    );
}

#[test]
fn k_200_is_padded_to_256() {
    let t = TpuTarget::v3();
    let d = mm(1024, 200, 1024);
    let e = estimate(&d, &TileConfig::default(), &t).unwrap();
    assert_eq!(e.padded_flops, 2.0 * 1024.0 * 1024.0 * 256.0);
    assert!((e.mxu_utilization - 200.0 / 256.0).abs() < 1e-12);
    // N = K = 200: 61 % (spec §5.1)
    let d2 = mm(1024, 200, 200);
    let e2 = estimate(&d2, &TileConfig::default(), &t).unwrap();
    assert!(
        (e2.mxu_utilization - 0.6103515625).abs() < 1e-9,
        "{}",
        e2.mxu_utilization
    );
    // same MXU time as a K = 256 dot
    let e256 = estimate(&mm(1024, 256, 1024), &TileConfig::default(), &t).unwrap();
    assert!((e.mxu_ns - e256.mxu_ns).abs() < 1e-6);
    let text = explain(&d, &TileConfig::default(), &t);
    assert!(text.contains("MXU utilisation 78.1%"), "{text}");
}

#[test]
fn small_minor_dim_costs_more_than_lane_multiple() {
    let t = TpuTarget::v3();
    let ops = OpCounts::cheap(2.0);
    // same 393216 f32 elements: 3 channels minor vs 128 minor
    let narrow = KernelDesc::elementwise("narrow", &[131072, 3], 32, 2, ops).unwrap();
    let wide = KernelDesc::elementwise("wide", &[3072, 128], 32, 2, ops).unwrap();
    let en = estimate(&narrow, &default_tile(&narrow, &t), &t).unwrap();
    let ew = estimate(&wide, &default_tile(&wide, &t), &t).unwrap();
    assert_eq!(ew.hbm_bytes, ew.min_bytes);
    assert!(
        en.hbm_bytes / en.min_bytes > 42.0,
        "padding 3→128 lanes: {}",
        en.hbm_bytes / en.min_bytes
    );
    assert!(
        en.total_ns > 10.0 * ew.total_ns,
        "{} vs {}",
        en.total_ns,
        ew.total_ns
    );
    // convolution with 3 input channels wastes most of the MXU
    let conv = |c_in| {
        KernelDesc::conv2d(
            "conv",
            Conv2dShape {
                n: 8,
                h: 224,
                w: 224,
                c_in,
                c_out: 64,
                kh: 3,
                kw: 3,
                stride: 1,
                pad: 1,
            },
            16,
            16,
            MxuPrecision::Bf16,
        )
        .unwrap()
    };
    let c3 = conv(3);
    let c128 = conv(128);
    let e3 = estimate(&c3, &default_tile(&c3, &t), &t).unwrap();
    let e128 = estimate(&c128, &default_tile(&c128, &t), &t).unwrap();
    assert!(e3.mxu_utilization < 0.03, "{}", e3.mxu_utilization);
    let per_flop_3 = e3.total_ns / e3.flops;
    let per_flop_128 = e128.total_ns / e128.flops;
    assert!(
        per_flop_3 > 10.0 * per_flop_128,
        "{per_flop_3} vs {per_flop_128}"
    );
}

#[test]
fn copy_costs_what_it_moves() {
    let t = TpuTarget::v3();
    let copy = KernelDesc::copy_transpose("copy", &[8192, 8192], &[0, 1], 32).unwrap();
    let e = estimate(&copy, &default_tile(&copy, &t), &t).unwrap();
    let moved = 2.0 * 8192.0 * 8192.0 * 4.0;
    assert_eq!(e.hbm_bytes, moved);
    assert_eq!(e.bottleneck, Bottleneck::Hbm);
    let ideal = moved / (t.core_hbm_bandwidth() * 0.87) * 1e9;
    assert!(
        (e.total_ns - ideal).abs() / ideal < 0.10,
        "{} vs {ideal}",
        e.total_ns
    );
    // a transpose moves the same bytes; the XLU work hides under the DMA
    let tr = KernelDesc::copy_transpose("transpose", &[8192, 8192], &[1, 0], 32).unwrap();
    let et = estimate(&tr, &default_tile(&tr, &t), &t).unwrap();
    assert_eq!(et.hbm_bytes, moved);
    assert!(et.xlu_ns > 0.0);
    assert!((et.total_ns - e.total_ns).abs() / e.total_ns < 0.05);
    // a tiny copy is dominated by fixed costs
    let tiny = KernelDesc::copy_transpose("tiny", &[8, 128], &[0, 1], 32).unwrap();
    let es = estimate(&tiny, &TileConfig::default(), &t).unwrap();
    assert_eq!(es.bottleneck, Bottleneck::Overhead);
}

#[test]
fn lane_reduction_costs_more_than_major_reduction() {
    let t = TpuTarget::v3();
    let ops = OpCounts::cheap(1.0);
    let lanes = KernelDesc::reduction("rl", &[4096, 4096], &[1], 32, ops).unwrap();
    let major = KernelDesc::reduction("rm", &[4096, 4096], &[0], 32, ops).unwrap();
    let el = estimate(&lanes, &default_tile(&lanes, &t), &t).unwrap();
    let em = estimate(&major, &default_tile(&major, &t), &t).unwrap();
    assert!(el.xlu_ns > 0.0);
    assert_eq!(em.xlu_ns, 0.0);
    assert!(el.vpu_ns + el.xlu_ns > em.vpu_ns + em.xlu_ns);
}

#[test]
fn int8_is_twice_as_fast_on_v5e_only() {
    let mk = |p| KernelDesc::matmul("q", 1, 4096, 4096, 4096, 8, 32, p).unwrap();
    let cfg = blocks(&mk(MxuPrecision::Bf16), 512, 512, 512);
    for (t, ratio) in [(TpuTarget::v5e(), 2.0), (TpuTarget::v3(), 1.0)] {
        let b = estimate(&mk(MxuPrecision::Bf16), &cfg, &t).unwrap();
        let i = estimate(&mk(MxuPrecision::Int8), &cfg, &t).unwrap();
        assert!((b.mxu_ns / i.mxu_ns - ratio).abs() < 1e-9, "{}", t.name);
    }
    let t = TpuTarget::v3();
    let b = estimate(&mk(MxuPrecision::Bf16), &cfg, &t).unwrap();
    let h = estimate(&mk(MxuPrecision::F32Highest), &cfg, &t).unwrap();
    assert!((h.mxu_ns / b.mxu_ns - 6.0).abs() < 1e-9);
}

#[test]
fn megacore_splits_parallel_tiles() {
    let d = mm(8192, 8192, 8192);
    let cfg = blocks(&d, 1024, 512, 1024);
    let mut v4 = TpuTarget::v4();
    let one = {
        v4.megacore = false;
        estimate(&d, &cfg, &v4).unwrap()
    };
    v4.megacore = true;
    let two = estimate(&d, &cfg, &v4).unwrap();
    assert_eq!(two.steps_per_core * 2, two.steps);
    let speedup = one.total_ns / two.total_ns;
    assert!(speedup > 1.8 && speedup <= 2.0, "{speedup}");
}

#[test]
fn evaluation_allocates_nothing() {
    let t = TpuTarget::v3();
    let d = mm(4096, 4096, 4096);
    let cfg = blocks(&d, 512, 1024, 512);
    let conv = KernelDesc::conv2d(
        "conv",
        Conv2dShape {
            n: 8,
            h: 56,
            w: 56,
            c_in: 64,
            c_out: 64,
            kh: 3,
            kw: 3,
            stride: 1,
            pad: 1,
        },
        16,
        16,
        MxuPrecision::Bf16,
    )
    .unwrap();
    let ccfg = default_tile(&conv, &t);
    let red = KernelDesc::reduction("r", &[1000, 3000], &[1], 32, OpCounts::cheap(1.0)).unwrap();
    let rcfg = default_tile(&red, &t);
    let empty = TileConfig::default();
    let too_big = blocks(&d, 4096, 4096, 4096);
    let before = allocs();
    let mut s = 0.0;
    for _ in 0..10 {
        s += estimate(&d, &cfg, &t).unwrap().total_ns;
        s += estimate(&conv, &ccfg, &t).unwrap().total_ns;
        s += estimate(&red, &rcfg, &t).unwrap().total_ns;
        s += estimate(&d, &empty, &t).unwrap().total_ns; // default resolution
        assert!(estimate(&d, &too_big, &t).is_err());
    }
    assert_eq!(allocs() - before, 0);
    assert!(s > 0.0);
}

#[test]
fn default_tile_fits_and_is_aligned() {
    for t in [TpuTarget::v3(), TpuTarget::v5e(), TpuTarget::v6e()] {
        let d = mm(8192, 8192, 8192);
        let cfg = default_tile(&d, &t);
        let e = estimate(&d, &cfg, &t).unwrap();
        assert!(e.vmem_bytes <= t.vmem_limit_bytes);
        // N and K tiles in elements are multiples of the MXU width.
        let a = i64::from(t.mxu_size);
        let sizes = tile_sizes(&d, &cfg, &t).unwrap();
        assert_eq!(sizes[1] % a, 0, "{}: {cfg:?} {sizes:?}", t.name);
        assert_eq!(sizes[2] % a, 0, "{}: {cfg:?} {sizes:?}", t.name);
        // default is within 25 % of the best enumerated config
        let best = enumerate_tiles(&d, &t, 100_000)
            .iter()
            .filter_map(|c| estimate(&d, c, &t).ok())
            .map(|e| e.total_ns)
            .fold(f64::INFINITY, f64::min);
        assert!(
            e.total_ns < 1.25 * best,
            "{}: default {} vs best {best}",
            t.name,
            e.total_ns
        );
    }
    // v5e 4096³: the balanced 1024×512×1024 tile
    let t = TpuTarget::v5e();
    assert_eq!(
        default_tile(&mm(4096, 4096, 4096), &t),
        blocks(&mm(4096, 4096, 4096), 1024, 512, 1024)
    );
}

#[test]
fn sampling_is_deterministic_and_feasible() {
    let t = TpuTarget::v3();
    let conv = KernelDesc::conv2d(
        "conv",
        Conv2dShape {
            n: 32,
            h: 28,
            w: 28,
            c_in: 256,
            c_out: 256,
            kh: 3,
            kw: 3,
            stride: 1,
            pad: 1,
        },
        16,
        16,
        MxuPrecision::Bf16,
    )
    .unwrap();
    let a = sample_tiles(&conv, &t, 50, 7);
    let b = sample_tiles(&conv, &t, 50, 7);
    let c = sample_tiles(&conv, &t, 50, 8);
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a.len(), 50);
    for cfg in &a {
        assert_eq!(cfg.output_bounds.len(), 4);
        assert_eq!(cfg.kernel_bounds.len(), 4);
        assert!(cfg.input_bounds.is_empty());
        estimate(&conv, cfg, &t).unwrap();
    }
    let mut dedup = a.clone();
    dedup.sort_by(|x, y| format!("{x:?}").cmp(&format!("{y:?}")));
    dedup.dedup();
    assert_eq!(dedup.len(), a.len());
}

#[test]
fn bad_configs_are_errors_not_clamped() {
    let t = TpuTarget::v3();
    let d = mm(1024, 1024, 1024);
    // bf16 [1024, 1024] output: (128, 8) tiles of (8, 128).
    let counts = |output_bounds: Vec<i64>| TileConfig {
        output_bounds,
        ..Default::default()
    };
    let e = estimate(&d, &counts(vec![129, 1]), &t).unwrap_err();
    assert!(matches!(
        e,
        ModelError::BoundOutOfRange {
            field: "output_bounds",
            value: 129,
            extent: 128,
            ..
        }
    ));
    let e = estimate(
        &d,
        &TileConfig {
            output_bounds: vec![128],
            kernel_bounds: vec![],
            input_bounds: vec![],
        },
        &t,
    )
    .unwrap_err();
    assert!(matches!(
        e,
        ModelError::BoundsLength {
            expected: 2,
            got: 1,
            ..
        }
    ));
    let e = estimate(&d, &counts(vec![1, 0]), &t).unwrap_err();
    assert!(
        e.to_string()
            .contains("`output_bounds[1]` = 0 is outside 1..=8"),
        "{e}"
    );
}
