//! Lowering of hand-written HLO to kernel descriptions: MXU roles and maps of
//! dot / convolution fusions, reduction axes from the physical layout,
//! copy/transpose detection, reshape merges, gathers, side outputs and
//! in-place updates.

use tpusim::hlo::parse_module;
use tpusim::ir::Module;
use tpusim::kernels::{lower_kernel, lower_kernel_full, LoweredKernel};
use tpusim::tpu::{
    estimate, DimMap, KernelDesc, KernelKind, MxuPrecision, MxuRole, ReduceAxis, ReductionKind,
    TileConfig, TpuTarget,
};

fn module(text: &str) -> Module {
    parse_module("test.hlo", text).unwrap_or_else(|e| panic!("{e}"))
}

/// Lowers instruction `name` of the entry computation.
fn lower(m: &Module, name: &str) -> Option<LoweredKernel> {
    let c = m.entry();
    let id = c
        .find(name)
        .unwrap_or_else(|| panic!("no instruction {name}"));
    lower_kernel_full(m, m.entry, id).unwrap_or_else(|e| panic!("{e}"))
}

fn desc(m: &Module, name: &str) -> KernelDesc {
    lower(m, name)
        .unwrap_or_else(|| panic!("{name} lowered to no kernel"))
        .into_desc()
}

fn roles(d: &KernelDesc) -> Vec<MxuRole> {
    match &d.kind {
        KernelKind::Mxu(s) => s.roles.clone(),
        k => panic!("not an MXU kernel: {k:?}"),
    }
}

fn precision(d: &KernelDesc) -> MxuPrecision {
    match &d.kind {
        KernelKind::Mxu(s) => s.precision,
        k => panic!("not an MXU kernel: {k:?}"),
    }
}

const DOT_BIAS: &str = r#"
HloModule dot_bias

%fused_dot (p0: f32[256,512], p1: f32[512,1024], p2: f32[1024]) -> f32[256,1024] {
  %p0 = f32[256,512]{1,0} parameter(0)
  %p1 = f32[512,1024]{1,0} parameter(1)
  %p2 = f32[1024]{0} parameter(2)
  %dot = f32[256,1024]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %bias = f32[256,1024]{1,0} broadcast(%p2), dimensions={1}
  ROOT %add = f32[256,1024]{1,0} add(%dot, %bias)
}

ENTRY %main (a: f32[256,512], w: f32[512,1024], b: f32[1024]) -> f32[256,1024] {
  %a = f32[256,512]{1,0} parameter(0)
  %w = f32[512,1024]{1,0} parameter(1)
  %b = f32[1024]{0} parameter(2)
  ROOT %dot_fusion = f32[256,1024]{1,0} fusion(%a, %w, %b), kind=kOutput, calls=%fused_dot
}
"#;

#[test]
fn dot_with_bias_epilogue_is_an_mxu_kernel() {
    let m = module(DOT_BIAS);
    let k = lower(&m, "dot_fusion").expect("a kernel");
    let d = k.desc();
    assert_eq!(k.hero.name(), "dot");
    assert_eq!(roles(d), vec![MxuRole::M, MxuRole::N]);
    assert_eq!(
        precision(d),
        MxuPrecision::Bf16,
        "f32 DEFAULT = one bf16 pass"
    );
    // M = 256, N = 1024 (output dims), K = 512 (the one reduction dim)
    assert_eq!(d.output.dims[..], [256, 1024]);
    assert_eq!(d.output.elem_bits, 32);
    assert_eq!(d.reduction_dims.len(), 1);
    assert_eq!(d.reduction_dims[0].size, 512);
    assert_eq!(d.reduction_dims[0].kind, ReductionKind::Contraction);
    assert_eq!(d.inputs.len(), 3);
    assert_eq!(d.inputs[0].dims, vec![DimMap::Iter(0), DimMap::Iter(2)]);
    assert_eq!(d.inputs[1].dims, vec![DimMap::Iter(2), DimMap::Iter(1)]);
    // the bias depends only on N: broadcast along M and K
    assert_eq!(d.inputs[2].dims, vec![DimMap::Iter(1)]);
    assert_eq!(d.inputs[2].broadcast_dims(3), vec![0, 2]);
    assert_eq!(d.kernel_operand, Some(1));
    assert_eq!(
        d.vpu.per_output_element.cheap, 1.0,
        "one add per output element"
    );
    assert_eq!(d.flops, 2.0 * 256.0 * 512.0 * 1024.0 + 256.0 * 1024.0);
    // the lowered dot costs what the hand-built matmul costs (+ the bias)
    let t = TpuTarget::v3();
    let mm = KernelDesc::matmul("mm", 1, 256, 512, 1024, 32, 32, MxuPrecision::Bf16).unwrap();
    let cfg = TileConfig::default();
    let a = estimate(d, &cfg, &t).unwrap();
    let b = estimate(&mm, &cfg, &t).unwrap();
    assert_eq!(a.mxu_ns, b.mxu_ns);
    assert!(a.hbm_read_bytes > b.hbm_read_bytes, "the bias is read too");
}

#[test]
fn dot_operand_layout_and_precision() {
    // LHS stored column-major: its physical dims are [K, M]
    let text = DOT_BIAS
        .replace(
            "%p0 = f32[256,512]{1,0} parameter(0)\n  %p1",
            "%p0 = f32[256,512]{0,1} parameter(0)\n  %p1",
        )
        .replace(
            "%a = f32[256,512]{1,0} parameter(0)",
            "%a = f32[256,512]{0,1} parameter(0)",
        )
        .replace(
            "rhs_contracting_dims={0}",
            "rhs_contracting_dims={0}, operand_precision={highest,highest}",
        );
    let m = module(&text);
    let d = desc(&m, "dot_fusion");
    assert_eq!(d.inputs[0].tensor.dims[..], [512, 256]);
    assert_eq!(d.inputs[0].dims, vec![DimMap::Iter(2), DimMap::Iter(0)]);
    assert_eq!(precision(&d), MxuPrecision::F32Highest);
}

#[test]
fn bf16_batched_dot_and_merged_reshape_operand() {
    // an [8,128,768] activation read as [1024,768] by a bitcast
    let m = module(
        r#"
HloModule bdot
%f (p0: bf16[8,128,768], p1: bf16[768,3072]) -> bf16[1024,3072] {
  %p0 = bf16[8,128,768]{2,1,0} parameter(0)
  %p1 = bf16[768,3072]{1,0} parameter(1)
  %bc = bf16[1024,768]{1,0} bitcast(%p0)
  ROOT %d = bf16[1024,3072]{1,0} dot(%bc, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
%g (q0: bf16[4,64,32], q1: bf16[4,32,16]) -> bf16[4,64,16] {
  %q0 = bf16[4,64,32]{2,1,0} parameter(0)
  %q1 = bf16[4,32,16]{2,1,0} parameter(1)
  ROOT %bd = bf16[4,64,16]{2,1,0} dot(%q0, %q1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
ENTRY %main (x: bf16[8,128,768], w: bf16[768,3072], y: bf16[4,64,32], z: bf16[4,32,16]) -> (bf16[1024,3072], bf16[4,64,16]) {
  %x = bf16[8,128,768]{2,1,0} parameter(0)
  %w = bf16[768,3072]{1,0} parameter(1)
  %y = bf16[4,64,32]{2,1,0} parameter(2)
  %z = bf16[4,32,16]{2,1,0} parameter(3)
  %mm = bf16[1024,3072]{1,0} fusion(%x, %w), kind=kOutput, calls=%f
  %bmm = bf16[4,64,16]{2,1,0} fusion(%y, %z), kind=kOutput, calls=%g
  ROOT %t = (bf16[1024,3072]{1,0}, bf16[4,64,16]{2,1,0}) tuple(%mm, %bmm)
}
"#,
    );
    let d = desc(&m, "mm");
    assert_eq!(precision(&d), MxuPrecision::Bf16);
    assert_eq!(d.inputs[0].tensor.dims[..], [8, 128, 768]);
    assert_eq!(d.inputs[0].tensor.elem_bits, 16);
    assert_eq!(
        d.inputs[0].dims,
        vec![
            DimMap::Outer {
                iter: 0,
                inner: 128
            },
            DimMap::Iter(0),
            DimMap::Iter(2)
        ]
    );
    // a 256-row tile reads 2 × 128 rows, not 8 × 128
    let t = TpuTarget::v3();
    // 256 rows × 1024 columns of output, all 768 of K (in elements).
    let cfg = TileConfig::from_sizes(&d, &[256, 1024, 768]);
    let e = estimate(&d, &cfg, &t).unwrap();
    let lhs_bytes = 1024.0 * 768.0 * 2.0;
    let rhs_bytes = 768.0 * 3072.0 * 2.0;
    let out_bytes = 1024.0 * 3072.0 * 2.0;
    // LHS once (each 256-row tile fetched once), RHS once per M tile (4),
    // output once
    assert_eq!(e.hbm_bytes, lhs_bytes + 4.0 * rhs_bytes + out_bytes);

    let b = desc(&m, "bmm");
    assert_eq!(roles(&b), vec![MxuRole::Batch, MxuRole::M, MxuRole::N]);
    assert_eq!(b.reduction_dims[0].size, 32);
    assert_eq!(
        b.inputs[1].dims,
        vec![DimMap::Iter(0), DimMap::Iter(3), DimMap::Iter(2)]
    );
    assert_eq!(b.flops, 2.0 * 4.0 * 64.0 * 16.0 * 32.0);
}

#[test]
fn convolution_fusion_gets_window_maps() {
    let m = module(
        r#"
HloModule conv
%fc (p0: f32[8,32,32,64], p1: f32[3,3,64,128]) -> f32[8,16,16,128] {
  %p0 = f32[8,32,32,64]{3,2,1,0} parameter(0)
  %p1 = f32[3,3,64,128]{3,2,1,0} parameter(1)
  %conv = f32[8,16,16,128]{3,2,1,0} convolution(%p0, %p1), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  %zero = f32[] constant(0)
  %z = f32[8,16,16,128]{3,2,1,0} broadcast(%zero), dimensions={}
  ROOT %relu = f32[8,16,16,128]{3,2,1,0} maximum(%conv, %z)
}
ENTRY %main (x: f32[8,32,32,64], k: f32[3,3,64,128]) -> f32[8,16,16,128] {
  %x = f32[8,32,32,64]{3,2,1,0} parameter(0)
  %k = f32[3,3,64,128]{3,2,1,0} parameter(1)
  ROOT %conv_fusion = f32[8,16,16,128]{3,2,1,0} fusion(%x, %k), kind=kOutput, calls=%fc
}
"#,
    );
    let k = lower(&m, "conv_fusion").expect("a kernel");
    let d = k.desc();
    assert_eq!(k.hero.name(), "convolution");
    assert_eq!(
        roles(d),
        vec![MxuRole::M, MxuRole::M, MxuRole::M, MxuRole::N]
    );
    let kinds: Vec<_> = d.reduction_dims.iter().map(|r| (r.kind, r.size)).collect();
    assert_eq!(
        kinds,
        vec![
            (ReductionKind::Window, 3),
            (ReductionKind::Window, 3),
            (ReductionKind::Contraction, 64)
        ]
    );
    assert_eq!(
        d.inputs[0].dims,
        vec![
            DimMap::Iter(0),
            DimMap::Window {
                out: 1,
                win: 4,
                stride: 2,
                dilation: 1
            },
            DimMap::Window {
                out: 2,
                win: 5,
                stride: 2,
                dilation: 1
            },
            DimMap::Iter(6)
        ]
    );
    assert_eq!(
        d.inputs[1].dims,
        vec![
            DimMap::Iter(4),
            DimMap::Iter(5),
            DimMap::Iter(6),
            DimMap::Iter(3)
        ]
    );
    assert_eq!(d.kernel_operand, Some(1));
    assert_eq!(d.vpu.per_output_element.cheap, 1.0, "the ReLU");
    // same maps and MXU time as the model's own conv2d builder
    let built = KernelDesc::conv2d(
        "c",
        tpusim::tpu::Conv2dShape {
            n: 8,
            h: 32,
            w: 32,
            c_in: 64,
            c_out: 128,
            kh: 3,
            kw: 3,
            stride: 2,
            pad: 1,
        },
        32,
        32,
        MxuPrecision::Bf16,
    )
    .unwrap();
    assert_eq!(d.inputs, built.inputs);
    assert_eq!(d.reduction_dims, built.reduction_dims);
    let t = TpuTarget::v3();
    let cfg = TileConfig::default();
    assert_eq!(
        estimate(d, &cfg, &t).unwrap().mxu_ns,
        estimate(&built, &cfg, &t).unwrap().mxu_ns
    );
    assert_eq!(d.flops, built.flops + 8.0 * 16.0 * 16.0 * 128.0);
}

/// The filter gradient of a 3×3 convolution as JAX writes it for a training step (ResNet-50,
/// stage 1): the activations are the "input" with the batch as its feature dim, the
/// output gradients the 56×56 "window", the result the 3×3×64×64 filter.
#[test]
fn filter_gradient_contracts_window_taps_with_the_features() {
    let m = module(
        r#"
HloModule fg
ENTRY %main (a: f32[8,56,56,64], g: f32[8,56,56,64]) -> f32[3,3,64,64] {
  %a = f32[8,56,56,64]{3,2,1,0} parameter(0)
  %g = f32[8,56,56,64]{3,2,1,0} parameter(1)
  ROOT %dw = f32[3,3,64,64]{3,2,1,0} convolution(%a, %g), window={size=56x56 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf
}
"#,
    );
    let d = desc(&m, "dw");
    let kinds: Vec<_> = d.reduction_dims.iter().map(|r| (r.kind, r.size)).collect();
    assert_eq!(
        kinds,
        vec![
            (ReductionKind::Window, 56),
            (ReductionKind::Window, 56),
            (ReductionKind::Contraction, 8)
        ]
    );
    // Iteration dims: output 0..4 = [3, 3, 64, 64], then taps 4, 5 and K 6.
    assert!(d.is_big_window(4) && d.is_big_window(5));
    assert!(!d.is_big_window(6));
    assert!(d.has_big_window());
    let t = TpuTarget::v3();
    let e = estimate(&d, &TileConfig::default(), &t).unwrap();
    // The default tile cuts the taps, not M (3·3·64) or N (64).
    assert_eq!(&e.tile[..4], &[3, 3, 64, 64]);
    let (t4, t5, t6) = (e.tile[4], e.tile[5], e.tile[6]);
    assert_eq!(t6, 8);
    assert!(t4 * t5 < 56 * 56, "the taps are tiled: {:?}", &e.tile[..7]);
    // Tap extents of the steps along one window dim (the last tile may be short).
    let extents =
        |t: i64| -> Vec<i64> { (0..56).step_by(t as usize).map(|s| t.min(56 - s)).collect() };
    // One contraction of K·taps per step: M_pad = 576, N_pad = 128,
    // K_pad = ⌈8·e4·e5/128⌉·128; MXU cycles ⌈(K_pad/128) / 2 MXUs⌉ · 576 rows.
    let (mut steps, mut padded, mut cycles) = (0u64, 0.0, 0.0);
    for &e4 in &extents(t4) {
        for &e5 in &extents(t5) {
            let k_pad = ((8 * e4 * e5 + 127) / 128 * 128) as f64;
            steps += 1;
            padded += 2.0 * 576.0 * 128.0 * k_pad;
            cycles += ((k_pad / 128.0) / 2.0).ceil() * 576.0;
        }
    }
    assert_eq!(e.steps, steps);
    assert!(
        (e.padded_flops - padded).abs() <= 1e-9 * padded,
        "{} vs {padded}",
        e.padded_flops
    );
    let mxu_ns = cycles / t.mxu_rate_hz() * 1e9;
    assert!(
        (e.mxu_ns - mxu_ns).abs() <= 1e-6 * mxu_ns,
        "{} vs {mxu_ns}",
        e.mxu_ns
    );
    // One pass per tap with K = 8 padded to 128 was 3 % of the MXU and 15 ms.
    assert!(e.mxu_utilization > 0.4, "{}", e.mxu_utilization);
    assert!(e.total_ns < 1e6, "{} ns", e.total_ns);

    // A forward convolution's window is smaller than its output: one pass per tap.
    let fwd = KernelDesc::conv2d(
        "c",
        tpusim::tpu::Conv2dShape {
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
        32,
        32,
        MxuPrecision::Bf16,
    )
    .unwrap();
    assert!(!fwd.has_big_window());
}

/// A filter stored with its taps as the two minor dims (a random layout configuration
/// can ask for that): the (8, 128) tile pads the 3×3 taps to 8×128 whatever the tile
/// takes of them, so the default tile keeps them whole and cuts other dims.
#[test]
fn default_tile_keeps_the_dims_an_operand_tiles_minor() {
    let conv = |kernel_layout: &str| {
        let m = module(&format!(
            r#"
HloModule c
ENTRY %main (x: f32[8,7,7,512], k: f32[3,3,512,512]) -> f32[8,7,7,512] {{
  %x = f32[8,7,7,512]{{3,0,2,1}} parameter(0)
  %k = f32[3,3,512,512]{{{kernel_layout}}} parameter(1)
  ROOT %y = f32[8,7,7,512]{{2,3,1,0}} convolution(%x, %k), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f
}}
"#
        ));
        let d = desc(&m, "y");
        estimate(&d, &TileConfig::default(), &TpuTarget::v3()).unwrap()
    };
    let taps_minor = conv("0,1,2,3");
    // Iteration dims: output [7, 512, 7, 8] physical (N = 512 second-major), taps 4 and
    // 5, K 6. The taps stay whole.
    assert_eq!((taps_minor.tile[4], taps_minor.tile[5]), (3, 3));
    // The filter is stored padded: 512·512 × (8·128) f32 = 1 GiB, read about once (the
    // old search cut the taps to 1 and re-read 4 MiB blocks 129,024 times: 1.4 s).
    let padded_filter = 512.0 * 512.0 * 8.0 * 128.0 * 4.0;
    assert!(
        taps_minor.hbm_bytes > padded_filter && taps_minor.hbm_bytes < 1.2 * padded_filter,
        "{}",
        taps_minor.hbm_bytes
    );
    assert!(taps_minor.total_ns < 4e6, "{}", taps_minor.total_ns);
    // The same convolution with a row-major filter moves 3 % of those bytes.
    let row_major = conv("3,2,1,0");
    assert!(row_major.hbm_bytes < 0.05 * taps_minor.hbm_bytes);
}

const REDUCE: &str = r#"
HloModule red
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%fr (p0: f32[1024,512]) -> f32[1024] {
  %p0 = f32[1024,512]{LAYOUT} parameter(0)
  %e = f32[1024,512]{LAYOUT} exponential(%p0)
  %zero = f32[] constant(0)
  ROOT %r = f32[1024]{0} reduce(%e, %zero), dimensions={1}, to_apply=%add
}
ENTRY %main (x: f32[1024,512]) -> f32[1024] {
  %x = f32[1024,512]{LAYOUT} parameter(0)
  ROOT %rf = f32[1024]{0} fusion(%x), kind=kInput, calls=%fr
}
"#;

#[test]
fn reduce_over_the_minor_dim_is_a_lane_reduction() {
    let m = module(&REDUCE.replace("LAYOUT", "1,0"));
    let k = lower(&m, "rf").expect("a kernel");
    let d = k.desc();
    assert_eq!(d.kind, KernelKind::Reduction);
    assert_eq!(k.hero.name(), "reduce");
    assert_eq!(d.output.dims[..], [1024]);
    assert_eq!(d.reduction_dims.len(), 1);
    assert_eq!(
        d.reduction_dims[0].kind,
        ReductionKind::Reduce(ReduceAxis::Lanes)
    );
    assert_eq!(d.reduction_dims[0].size, 512);
    assert_eq!(d.inputs[0].dims, vec![DimMap::Iter(0), DimMap::Iter(1)]);
    // exp before the reduction, add as the combiner: per reduced element
    assert_eq!(d.vpu.per_reduction_point.medium, 1.0);
    assert_eq!(d.vpu.per_reduction_point.cheap, 1.0);
    assert_eq!(d.transcendentals, 1024.0 * 512.0);

    // the same logical reduce with dim 1 stored second-minor: a sublane reduction
    let m2 = module(&REDUCE.replace("LAYOUT", "0,1"));
    let d2 = desc(&m2, "rf");
    assert_eq!(
        d2.reduction_dims[0].kind,
        ReductionKind::Reduce(ReduceAxis::Sublanes)
    );
    assert_eq!(d2.inputs[0].tensor.dims[..], [512, 1024]);
    assert_eq!(d2.inputs[0].dims, vec![DimMap::Iter(1), DimMap::Iter(0)]);
    let t = TpuTarget::v3();
    let lanes = estimate(d, &TileConfig::default(), &t).unwrap();
    let sub = estimate(&d2, &TileConfig::default(), &t).unwrap();
    assert!(lanes.xlu_ns > 0.0 && sub.xlu_ns == 0.0);
}

#[test]
fn reduce_to_sublanes_and_reduce_window() {
    let m = module(
        r#"
HloModule rw
%max (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}
ENTRY %main (x: f32[64,256], y: f32[8,56,56,64]) -> (f32[256], f32[8,28,28,64]) {
  %x = f32[64,256]{1,0} parameter(0)
  %y = f32[8,56,56,64]{3,2,1,0} parameter(1)
  %ninf = f32[] constant(-inf)
  %cols = f32[256]{0} reduce(%x, %ninf), dimensions={0}, to_apply=%max
  %pool = f32[8,28,28,64]{3,2,1,0} reduce-window(%y, %ninf), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}, to_apply=%max
  ROOT %t = (f32[256]{0}, f32[8,28,28,64]{3,2,1,0}) tuple(%cols, %pool)
}
"#,
    );
    let c = desc(&m, "cols");
    assert_eq!(c.kind, KernelKind::Reduction);
    assert_eq!(
        c.reduction_dims[0].kind,
        ReductionKind::Reduce(ReduceAxis::Sublanes)
    );
    assert_eq!(c.inputs[0].dims, vec![DimMap::Iter(1), DimMap::Iter(0)]);
    let p = desc(&m, "pool");
    assert_eq!(p.kind, KernelKind::Reduction);
    assert_eq!(p.output.dims[..], [8, 28, 28, 64]);
    let kinds: Vec<_> = p.reduction_dims.iter().map(|r| (r.kind, r.size)).collect();
    assert_eq!(
        kinds,
        vec![
            // H is a major dim, W the second-minor (sublane) dim of NHWC
            (ReductionKind::Reduce(ReduceAxis::Major), 3),
            (ReductionKind::Reduce(ReduceAxis::Sublanes), 3)
        ]
    );
    assert_eq!(
        p.inputs[0].dims[1],
        DimMap::Window {
            out: 1,
            win: 4,
            stride: 2,
            dilation: 1
        }
    );
    assert_eq!(p.inputs[0].dims[3], DimMap::Iter(3));
    assert_eq!(
        p.vpu.per_reduction_point.cheap, 1.0,
        "one max per window point"
    );
}

const COPIES: &str = r#"
HloModule copies
%ft (p0: f32[1,1,64,128]) -> f32[1,1,128,64] {
  %p0 = f32[1,1,64,128]{3,2,1,0} parameter(0)
  %tr = f32[1,1,128,64]{2,3,1,0} transpose(%p0), dimensions={0,1,3,2}
  ROOT %cp = f32[1,1,128,64]{3,2,1,0} copy(%tr)
}
ENTRY %main (x: f32[512,256], w: f32[1,1,64,128]) -> (f32[512,256], f32[256,512], f32[1,1,128,64]) {
  %x = f32[512,256]{1,0} parameter(0)
  %w = f32[1,1,64,128]{3,2,1,0} parameter(1)
  %relayout = f32[512,256]{0,1} copy(%x)
  %free = f32[256,512]{0,1} transpose(%x), dimensions={1,0}
  %tf = f32[1,1,128,64]{3,2,1,0} fusion(%w), kind=kLoop, calls=%ft
  ROOT %t = (f32[512,256]{0,1}, f32[256,512]{0,1}, f32[1,1,128,64]{3,2,1,0}) tuple(%relayout, %free, %tf)
}
"#;

#[test]
fn transposing_copies_are_copy_transpose_kernels() {
    let m = module(COPIES);
    let d = desc(&m, "relayout");
    assert_eq!(d.kind, KernelKind::CopyTranspose);
    // output physical [256, 512]; the input's minor dim (256) is output dim 0
    assert_eq!(d.output.dims[..], [256, 512]);
    assert_eq!(d.inputs[0].tensor.dims[..], [512, 256]);
    assert_eq!(d.inputs[0].dims, vec![DimMap::Iter(1), DimMap::Iter(0)]);
    let e = estimate(&d, &TileConfig::default(), &TpuTarget::v3()).unwrap();
    assert!(e.xlu_ns > 0.0, "a minor-dim change goes through the XLU");
    // a transpose whose layout makes it a bitcast costs nothing
    assert!(lower(&m, "free").is_none());
    // fusion: logical transpose into a swapped layout, then a relayout copy
    let f = lower(&m, "tf").expect("a kernel");
    assert_eq!(f.desc().kind, KernelKind::CopyTranspose);
    assert_eq!(f.hero.name(), "copy");
    assert_eq!(
        f.desc().inputs[0].dims,
        vec![
            DimMap::Iter(0),
            DimMap::Iter(1),
            DimMap::Iter(3),
            DimMap::Iter(2)
        ]
    );
}

#[test]
fn zero_cost_instructions_lower_to_nothing() {
    let m = module(
        r#"
HloModule zero
ENTRY %main (x: f32[16,128]) -> (f32[16,128], f32[2048], f32[]) {
  %x = f32[16,128]{1,0} parameter(0)
  %c = f32[] constant(1)
  %bc = f32[2048]{0} bitcast(%x)
  %rs = f32[2048]{0} reshape(%x)
  %t = (f32[16,128]{1,0}, f32[2048]{0}, f32[]) tuple(%x, %bc, %c)
  %g = f32[16,128]{1,0} get-tuple-element(%t), index=0
  %pid = u32[] partition-id()
  ROOT %r = (f32[16,128]{1,0}, f32[2048]{0}, f32[]) tuple(%g, %rs, %c)
}
"#,
    );
    let c = m.entry();
    for &id in &c.order {
        let name = &c.instr(id).name;
        let k = lower_kernel(&m, m.entry, id).unwrap();
        assert!(k.is_none(), "{name} should cost nothing");
    }
}

#[test]
fn multi_output_fusion_uses_the_largest_output_and_counts_the_rest() {
    let m = module(
        r#"
HloModule mof
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%fm (p0: f32[64,1024], p1: f32[64,1024]) -> (f32[64], f32[64,1024]) {
  %p0 = f32[64,1024]{1,0} parameter(0)
  %p1 = f32[64,1024]{1,0} parameter(1)
  %m = f32[64,1024]{1,0} multiply(%p0, %p1)
  %zero = f32[] constant(0)
  %r = f32[64]{0} reduce(%m, %zero), dimensions={1}, to_apply=%add
  ROOT %t = (f32[64]{0}, f32[64,1024]{1,0}) tuple(%r, %m)
}
ENTRY %main (x: f32[64,1024], y: f32[64,1024]) -> (f32[64], f32[64,1024]) {
  %x = f32[64,1024]{1,0} parameter(0)
  %y = f32[64,1024]{1,0} parameter(1)
  ROOT %f = (f32[64]{0}, f32[64,1024]{1,0}) fusion(%x, %y), kind=kLoop, calls=%fm
}
"#,
    );
    let k = lower(&m, "f").expect("a kernel");
    assert_eq!(k.desc().output.dims[..], [64, 1024]);
    assert_eq!(k.desc().kind, KernelKind::Elementwise);
    assert_eq!(k.side_outputs.len(), 1);
    assert_eq!(k.side_outputs[0].dims[..], [64]);
    // multiply (1) + reduce combiner (1) per output element
    assert_eq!(k.desc().vpu.per_output_element.cheap, 2.0);
    assert_eq!(
        k.desc().inputs[0].dims,
        vec![DimMap::Iter(0), DimMap::Iter(1)]
    );
}

#[test]
fn in_place_update_iterates_over_the_update() {
    let m = module(
        r#"
HloModule dus
%fd (p0: f32[32,16,256], p1: f32[1,16,256], p2: s32[]) -> f32[32,16,256] {
  %p0 = f32[32,16,256]{2,1,0} parameter(0)
  %p1 = f32[1,16,256]{2,1,0} parameter(1)
  %p2 = s32[] parameter(2)
  %t = f32[1,16,256]{2,1,0} tanh(%p1)
  %z = s32[] constant(0)
  ROOT %u = f32[32,16,256]{2,1,0} dynamic-update-slice(%p0, %t, %p2, %z, %z)
}
ENTRY %main (buf: f32[32,16,256], v: f32[1,16,256], i: s32[]) -> f32[32,16,256] {
  %buf = f32[32,16,256]{2,1,0} parameter(0)
  %v = f32[1,16,256]{2,1,0} parameter(1)
  %i = s32[] parameter(2)
  ROOT %upd = f32[32,16,256]{2,1,0} fusion(%buf, %v, %i), kind=kLoop, calls=%fd
}
"#,
    );
    let k = lower(&m, "upd").expect("a kernel");
    assert_eq!(k.desc().output.dims[..], [1, 16, 256]);
    // the aliased buffer is not read, the scalar index is a kernel argument
    assert_eq!(k.operand_of_input, vec![1]);
    assert_eq!(k.desc().vpu.per_output_element.medium, 1.0);
    assert!(k.side_outputs.is_empty());
}

#[test]
fn embedding_gather_reads_rows_not_the_table() {
    let m = module(
        r#"
HloModule gather
ENTRY %main (table: f32[30522,768], ids: s32[1024,1]) -> f32[1024,1,768] {
  %table = f32[30522,768]{1,0} parameter(0)
  %ids = s32[1024,1]{1,0} parameter(1)
  ROOT %g = f32[1024,1,768]{2,1,0} gather(%table, %ids), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,768}
}
"#,
    );
    let d = desc(&m, "g");
    assert_eq!(d.kind, KernelKind::Other);
    assert_eq!(d.inputs[0].dims, vec![DimMap::Iter(0), DimMap::Iter(2)]);
    assert_eq!(d.inputs[1].dims, vec![DimMap::Iter(0), DimMap::Full]);
    // default tile fits VMEM: the table is streamed by rows
    let e = estimate(&d, &TileConfig::default(), &TpuTarget::v3()).unwrap();
    assert!(e.hbm_read_bytes < 30522.0 * 768.0 * 4.0);
}
