//! The program model: loops × trip count (backend_config, induction pattern,
//! default), conditionals by their most expensive branch, calls, layout
//! sensitivity, tile overrides and their errors, explain.

use tpusim::hlo::parse_module;
use tpusim::ir::Module;
use tpusim::kernels::{
    estimate_program, explain_kernel, KernelRow, LoweredProgram, ProgramError, ProgramEstimate,
    TileOverrides, TripSource, DEFAULT_TRIP_COUNT,
};
use tpusim::tpu::{ModelError, TileConfig, TpuTarget};

fn module(text: &str) -> Module {
    parse_module("test.hlo", text).unwrap_or_else(|e| panic!("{e}"))
}

fn est(m: &Module) -> ProgramEstimate {
    estimate_program(m, &TpuTarget::v3(), &TileOverrides::new()).unwrap_or_else(|e| panic!("{e}"))
}

fn row<'a>(e: &'a ProgramEstimate, name: &str) -> &'a KernelRow {
    e.kernels
        .iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("no row {name}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// A counted loop: the body scales a [1024,1024] state; `CONFIG` is replaced
/// by the while's backend_config (or nothing) and `LIMIT` by the bound.
const LOOP: &str = r#"
HloModule loop
%body (s: (s32[], f32[1024,1024])) -> (s32[], f32[1024,1024]) {
  %s = (s32[], f32[1024,1024]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %x = f32[1024,1024]{1,0} get-tuple-element(%s), index=1
  %two = f32[] constant(2)
  %b = f32[1024,1024]{1,0} broadcast(%two), dimensions={}
  %y = f32[1024,1024]{1,0} multiply(%x, %b)
  ROOT %t = (s32[], f32[1024,1024]{1,0}) tuple(%next, %y)
}
%cond (c: (s32[], f32[1024,1024])) -> pred[] {
  %c = (s32[], f32[1024,1024]{1,0}) parameter(0)
  %ci = s32[] get-tuple-element(%c), index=0
  %lim = s32[] constant(LIMIT)
  ROOT %lt = pred[] compare(%ci, %lim), direction=LT
}
ENTRY %main (x0: f32[1024,1024]) -> (s32[], f32[1024,1024]) {
  %x0 = f32[1024,1024]{1,0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[1024,1024]{1,0}) tuple(%zero, %x0)
  ROOT %w = (s32[], f32[1024,1024]{1,0}) while(%init), condition=%cond, body=%bodyCONFIG
}
"#;

fn loop_module(limit: &str, config: &str) -> Module {
    module(&LOOP.replace("LIMIT", limit).replace("CONFIG", config))
}

#[test]
fn while_with_known_trip_count_multiplies() {
    // the bound in the condition (7) differs: backend_config wins
    let m = loop_module("7", r#", backend_config={"known_trip_count":{"n":"10"}}"#);
    let lp = LoweredProgram::new(&m).unwrap();
    assert_eq!(
        lp.loops,
        vec![("w".to_string(), 10, TripSource::BackendConfig)]
    );
    let e = est(&m);
    let y = row(&e, "y");
    let lt = row(&e, "lt");
    assert_eq!(y.multiplier, 10.0);
    assert_eq!(
        lt.multiplier, 11.0,
        "the condition runs once more than the body"
    );
    assert_eq!(row(&e, "next").multiplier, 10.0);
    let sum: f64 = e.kernels.iter().map(|k| k.total_ns * k.multiplier).sum();
    assert!(close(e.total_ns, sum));
    assert!(y.total_ns > 0.0 && e.total_ns > 10.0 * y.total_ns);
    assert!(e.warnings.is_empty());
}

#[test]
fn while_trip_count_from_the_induction_pattern() {
    let m = loop_module("12", "");
    let lp = LoweredProgram::new(&m).unwrap();
    assert_eq!(lp.loops, vec![("w".to_string(), 12, TripSource::Induction)]);
    let e = est(&m);
    assert_eq!(row(&e, "y").multiplier, 12.0);
    // LE adds one trip
    let le = module(
        &LOOP
            .replace("LIMIT", "12")
            .replace("CONFIG", "")
            .replace("direction=LT", "direction=LE"),
    );
    assert_eq!(LoweredProgram::new(&le).unwrap().loops[0].1, 13);
    // constant on the left: 12 > i
    let gt = module(&LOOP.replace("LIMIT", "12").replace("CONFIG", "").replace(
        "compare(%ci, %lim), direction=LT",
        "compare(%lim, %ci), direction=GT",
    ));
    assert_eq!(LoweredProgram::new(&gt).unwrap().loops[0].1, 12);
}

#[test]
fn while_with_unknown_trip_count_uses_the_default_and_warns() {
    // the bound is a loop-carried value: no pattern
    let m = module(&LOOP.replace("LIMIT", "12").replace("CONFIG", "").replace(
        "%next = s32[] add(%i, %one)",
        "%next = s32[] multiply(%i, %one)",
    ));
    let lp = LoweredProgram::new(&m).unwrap();
    assert_eq!(lp.loops[0].1, DEFAULT_TRIP_COUNT);
    assert_eq!(lp.loops[0].2, TripSource::Default);
    let e = est(&m);
    assert_eq!(row(&e, "y").multiplier, DEFAULT_TRIP_COUNT as f64);
    assert!(e.warnings.iter().any(|w| w.contains("trip count unknown")));
}

const COND: &str = r#"
HloModule cond
%cheap (a: f32[8,128]) -> f32[8,128] {
  %a = f32[8,128]{1,0} parameter(0)
  ROOT %neg = f32[8,128]{1,0} negate(%a)
}
%costly (b: f32[8,128]) -> f32[8,128] {
  %b = f32[8,128]{1,0} parameter(0)
  %big = f32[4096,4096]{1,0} broadcast(%b), dimensions={0,1}
  %sin = f32[4096,4096]{1,0} sine(%big)
  ROOT %sl = f32[8,128]{1,0} slice(%sin), slice={[0:8], [0:128]}
}
ENTRY %main (p: s32[], x: f32[8,128]) -> f32[8,128] {
  %p = s32[] parameter(0)
  %x = f32[8,128]{1,0} parameter(1)
  ROOT %c = f32[8,128]{1,0} conditional(%p, %x, %x), branch_computations={%cheap, %costly}
}
"#;

#[test]
fn conditional_takes_the_most_expensive_branch() {
    let m = module(COND);
    let e = est(&m);
    let cheap = row(&e, "neg");
    let costly: f64 = ["big", "sin", "sl"]
        .iter()
        .map(|n| row(&e, n).total_ns)
        .sum();
    assert!(costly > 100.0 * cheap.total_ns);
    assert!(close(e.total_ns, costly));
    assert_eq!(cheap.multiplier, 0.0, "the cheaper branch does not count");
    assert_eq!(row(&e, "sin").multiplier, 1.0);
    // swapping the branch order changes nothing
    let swapped = module(&COND.replace("{%cheap, %costly}", "{%costly, %cheap}"));
    assert!(close(est(&swapped).total_ns, e.total_ns));
}

#[test]
fn calls_are_walked_once_per_call_site_kernel() {
    let m = module(
        r#"
HloModule call
%callee (a: f32[256,256]) -> f32[256,256] {
  %a = f32[256,256]{1,0} parameter(0)
  ROOT %e = f32[256,256]{1,0} exponential(%a)
}
ENTRY %main (x: f32[256,256]) -> f32[256,256] {
  %x = f32[256,256]{1,0} parameter(0)
  %c1 = f32[256,256]{1,0} call(%x), to_apply=%callee
  ROOT %c2 = f32[256,256]{1,0} call(%c1), to_apply=%callee
}
"#,
    );
    let e = est(&m);
    // one lowered kernel, executed at both call sites
    assert_eq!(e.kernels.len(), 1);
    assert_eq!(e.kernels[0].multiplier, 2.0);
    assert!(close(e.total_ns, 2.0 * e.kernels[0].total_ns));
    assert_eq!(e.kernels[0].computation, "callee");
}

#[test]
fn narrow_minor_dim_layout_costs_more_than_a_128_multiple() {
    // the same elementwise add over f32[131072,3], dim 1 minor vs dim 0 minor
    let text = r#"
HloModule lay
ENTRY %main (x: f32[131072,3], y: f32[131072,3]) -> f32[131072,3] {
  %x = f32[131072,3]{L} parameter(0)
  %y = f32[131072,3]{L} parameter(1)
  ROOT %a = f32[131072,3]{L} add(%x, %y)
}
"#;
    let narrow = est(&module(&text.replace("{L}", "{1,0}")));
    let wide = est(&module(&text.replace("{L}", "{0,1}")));
    let (n, w) = (row(&narrow, "a"), row(&wide, "a"));
    // 3 → 128 lanes (42.7×) vs 3 → 8 sublanes (2.7×)
    assert!(n.bytes > 15.0 * w.bytes, "{} vs {}", n.bytes, w.bytes);
    assert!(
        narrow.total_ns > 10.0 * wide.total_ns,
        "{} vs {}",
        narrow.total_ns,
        wide.total_ns
    );
    // a transposing copy between the two layouts is an extra kernel
    let with_copy = module(
        r#"
HloModule relayout
ENTRY %main (x: f32[131072,3], y: f32[131072,3]) -> f32[131072,3] {
  %x = f32[131072,3]{1,0} parameter(0)
  %y = f32[131072,3]{0,1} parameter(1)
  %xc = f32[131072,3]{0,1} copy(%x)
  ROOT %a = f32[131072,3]{0,1} add(%xc, %y)
}
"#,
    );
    let e = est(&with_copy);
    assert_eq!(row(&e, "xc").kind, "CopyTranspose");
    assert!(e.total_ns > wide.total_ns);
}

/// One 2048³ bf16 matmul fusion `mm`.
const MM: &str = r#"
HloModule mm
%f (p0: bf16[2048,2048], p1: bf16[2048,2048]) -> bf16[2048,2048] {
  %p0 = bf16[2048,2048]{1,0} parameter(0)
  %p1 = bf16[2048,2048]{1,0} parameter(1)
  ROOT %d = bf16[2048,2048]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
ENTRY %main (a: bf16[2048,2048], b: bf16[2048,2048]) -> bf16[2048,2048] {
  %a = bf16[2048,2048]{1,0} parameter(0)
  %b = bf16[2048,2048]{1,0} parameter(1)
  ROOT %mm = bf16[2048,2048]{1,0} fusion(%a, %b), kind=kOutput, calls=%f
}
"#;

#[test]
fn tile_overrides_apply_by_name_and_errors_name_the_kernel() {
    let m = module(MM);
    let t = TpuTarget::v3();
    let lp = LoweredProgram::new(&m).unwrap();
    let base = lp.estimate(&t, &TileOverrides::new()).unwrap();
    let mut small = TileOverrides::new();
    small.insert(
        "mm".to_string(),
        // 128 × 128 blocks of the bf16 [2048, 2048] output and right-hand side: 16 × 1
        // tiles of (8, 128).
        TileConfig {
            output_bounds: vec![16, 1],
            kernel_bounds: vec![16, 1],
            input_bounds: vec![],
        },
    );
    let s = lp.estimate(&t, &small).unwrap();
    assert_eq!(s.kernels[0].tile.output_bounds, vec![16, 1]);
    assert_eq!(s.kernels[0].tile.kernel_bounds, vec![16, 1]);
    assert!(
        s.total_ns > 2.0 * base.total_ns,
        "128³ blocks are overhead/HBM bound"
    );
    // the prepared fast path agrees
    let prep = lp.prepare(&t).unwrap();
    assert!(close(prep.total_ns(&small).unwrap(), s.total_ns));
    assert!(close(
        prep.total_ns(&TileOverrides::new()).unwrap(),
        base.total_ns
    ));
    // A tile that does not fit VMEM (the whole 2048³ product, 256 × 16 tiles) is costed
    // by the untiled roofline, with a warning, as a default tile that does not fit is.
    let mut huge = TileOverrides::new();
    huge.insert(
        "mm".to_string(),
        TileConfig {
            output_bounds: vec![256, 16],
            kernel_bounds: vec![256, 16],
            input_bounds: vec![],
        },
    );
    let h = lp.estimate(&t, &huge).unwrap();
    assert!(
        h.warnings
            .iter()
            .any(|w| w.contains("`mm`: its tile does not fit VMEM, untiled roofline used")),
        "{:?}",
        h.warnings
    );
    // A bound past its extent in tiles is an error that names the kernel.
    let mut bad = TileOverrides::new();
    bad.insert(
        "mm".to_string(),
        TileConfig {
            output_bounds: vec![257, 16],
            kernel_bounds: vec![],
            input_bounds: vec![],
        },
    );
    let msg = lp.estimate(&t, &bad).unwrap_err().to_string();
    assert!(
        msg.contains("`mm`") && msg.contains("`output_bounds[0]` = 257 is outside 1..=256"),
        "{msg}"
    );
    // unknown kernel
    let mut unknown = TileOverrides::new();
    unknown.insert("nope".to_string(), TileConfig::default());
    assert_eq!(
        lp.estimate(&t, &unknown).unwrap_err(),
        ProgramError::UnknownKernel("nope".to_string())
    );
    // several unknown kernels: the first by name is reported, whatever the order given
    for names in [["zz", "aa", "mm_missing"], ["mm_missing", "zz", "aa"]] {
        let tiles: TileOverrides = names
            .iter()
            .map(|n| (n.to_string(), TileConfig::default()))
            .collect();
        assert_eq!(
            lp.estimate(&t, &tiles).unwrap_err(),
            ProgramError::UnknownKernel("aa".to_string())
        );
    }
}

#[test]
fn explain_prints_hlo_lowering_and_derivation() {
    let m = loop_module("4", "");
    let t = TpuTarget::v3();
    let s = explain_kernel(&m, &t, "y", None).unwrap().to_string();
    assert!(s.contains("multiply(%x, %b)"), "{s}");
    assert!(s.contains("Lowering of `y`"), "{s}");
    assert!(s.contains("Total ="), "{s}");
    assert!(matches!(
        explain_kernel(&m, &t, "missing", None),
        Err(ProgramError::UnknownKernel(_))
    ));
    assert!(matches!(
        explain_kernel(&m, &t, "w", None),
        Err(ProgramError::NotAKernel(_))
    ));
    // a fusion prints its fused computation
    let f = explain_kernel(
        &module(&COND.replace(
            "ROOT %c = f32[8,128]{1,0} conditional(%p, %x, %x), branch_computations={%cheap, %costly}",
            "ROOT %c = f32[8,128]{1,0} fusion(%x), kind=kLoop, calls=%cheap",
        )),
        &t,
        "c",
        None,
    )
    .unwrap()
    .to_string();
    assert!(f.contains("%cheap") && f.contains("negate(%a)"), "{f}");
    let fused = module(&COND.replace(
        "ROOT %c = f32[8,128]{1,0} conditional(%p, %x, %x), branch_computations={%cheap, %costly}",
        "ROOT %c = f32[8,128]{1,0} fusion(%x), kind=kLoop, calls=%cheap",
    ));
    assert_eq!(
        explain_kernel(&fused, &t, "neg", None).unwrap_err(),
        ProgramError::InsideFusion {
            name: "neg".to_string(),
            fusion: "c".to_string()
        }
    );
}

/// The explanation's kernel time is the program model's row: for every kernel, with
/// and without a tile override; its JSON carries the derivation's numbers; an
/// infeasible override is explained (sections 1–2 and the reason) with no time.
#[test]
fn explanation_total_is_the_estimate_row() {
    let t = TpuTarget::v3();
    for m in [loop_module("4", ""), module(MM)] {
        let e = est(&m);
        for r in &e.kernels {
            let x = explain_kernel(&m, &t, &r.name, None).unwrap();
            assert_eq!(x.total_ns, Some(r.total_ns), "{}", r.name);
            let d = x.derivation.estimate().expect("evaluable");
            assert_eq!(d.total_ns, r.total_ns - r.side_output_ns);
            assert!(!x.untiled && x.side_outputs.is_none());
            let text = x.to_string();
            assert!(
                text.contains(&format!(
                    "Total = pipelined + prologue + epilogue + overheads = {:.1} ns",
                    r.total_ns
                )),
                "{text}"
            );
            let j: serde_json::Value = serde_json::to_value(&x).unwrap();
            assert_eq!(j["total_ns"].as_f64(), Some(r.total_ns));
            assert_eq!(
                j["derivation"]["pipeline"]["estimate"]["total_ns"].as_f64(),
                Some(d.total_ns)
            );
            assert_eq!(
                j["derivation"]["pipeline"]["estimate"]["hbm_bytes"].as_f64(),
                Some(d.hbm_bytes)
            );
            assert_eq!(
                j["derivation"]["grid"]["vmem_bytes"].as_u64(),
                Some(d.vmem_bytes)
            );
            assert_eq!(j["kernel"], r.name.as_str());
        }
    }
    let m = module(MM);
    let small = TileConfig {
        output_bounds: vec![16, 1],
        kernel_bounds: vec![16, 1],
        input_bounds: vec![],
    };
    let mut over = TileOverrides::new();
    over.insert("mm".to_string(), small.clone());
    let with = LoweredProgram::new(&m)
        .unwrap()
        .estimate(&t, &over)
        .unwrap();
    let x = explain_kernel(&m, &t, "mm", Some(&small)).unwrap();
    assert_eq!(x.total_ns, Some(with.kernels[0].total_ns));
    let g = x.derivation.grid.as_ref().unwrap();
    assert_eq!(
        g.dims.iter().map(|d| d.tiles).collect::<Vec<_>>(),
        [16, 16, 16]
    );
    assert_eq!(g.steps, 4096.0);
    let huge = TileConfig {
        output_bounds: vec![256, 16],
        kernel_bounds: vec![256, 16],
        input_bounds: vec![],
    };
    let mut over = TileOverrides::new();
    over.insert("mm".to_string(), huge.clone());
    let with = LoweredProgram::new(&m)
        .unwrap()
        .estimate(&t, &over)
        .unwrap();
    let x = explain_kernel(&m, &t, "mm", Some(&huge)).unwrap();
    // The untiled roofline, as in the estimate's row.
    assert!(x.untiled);
    assert_eq!(x.total_ns, Some(with.kernels[0].total_ns));
    let g = x.derivation.grid.as_ref().unwrap();
    assert!(!g.fits && g.vmem_bytes > g.vmem_limit_bytes);
    assert!(x.derivation.traffic.is_none() && x.derivation.pipeline.is_none());
    assert!(matches!(
        x.derivation.error,
        Some(ModelError::Infeasible { .. })
    ));
    let text = x.to_string();
    assert!(
        text.contains("INFEASIBLE") && text.contains("Not evaluable: infeasible tile"),
        "{text}"
    );
    let j: serde_json::Value = serde_json::to_value(&x).unwrap();
    assert!(j["derivation"]["error"]
        .as_str()
        .unwrap()
        .contains("scoped limit"));
}

/// A kernel whose default tile does not fit VMEM (the 2048-row transpose side output
/// of XLA's `transpose/side_outputs_inplace` test): the explanation derives the
/// infeasible tile and gives the untiled roofline time `estimate` counts.
#[test]
fn explanation_of_an_untiled_kernel_gives_the_roofline_time() {
    let m = module(
        r#"
HloModule module, input_output_alias={ {0}: (0, {}) }
transpose_fusion {
  p0 = f32[1024,2048]{1,0} parameter(0)
  p1 = f32[1024,2048]{1,0} parameter(1)
  add = f32[1024,2048]{1,0} add(p0, p1)
  bitcast = f32[2097152]{0} bitcast(p0)
  transpose = f32[2048,1024]{1,0} transpose(p1), dimensions={1,0}
  ROOT res = (f32[1024,2048]{1,0}, f32[2048,1024]{1,0}, f32[2097152]{0}) tuple(add, transpose, bitcast)
}
ENTRY module {
  param0 = f32[1024,2048]{1,0} parameter(0)
  param1 = f32[1024,2048]{1,0} parameter(1)
  ROOT f = (f32[1024,2048]{1,0}, f32[2048,1024]{1,0}, f32[2097152]{0}) fusion(param0, param1), kind=kInput, calls=transpose_fusion
}
"#,
    );
    let e = est(&m);
    let r = row(&e, "f");
    assert!(r.untiled);
    let x = explain_kernel(&m, &TpuTarget::v3(), "f", None).unwrap();
    assert!(x.untiled && x.side_outputs.is_none());
    assert_eq!(x.total_ns, Some(r.total_ns));
    assert!(matches!(
        x.derivation.error,
        Some(ModelError::Infeasible { .. })
    ));
    let text = x.to_string();
    assert!(
        text.contains(&format!(
            "untiled roofline, max(peak-MXU time, one pass over every operand) + launch = {:.1} ns",
            r.total_ns
        )),
        "{text}"
    );
}

#[test]
fn rows_serialize_to_json() {
    let e = est(&loop_module("3", ""));
    let j = serde_json::to_value(&e).unwrap();
    assert!(j["total_ns"].as_f64().unwrap() > 0.0);
    let rows = j["kernels"].as_array().unwrap();
    assert_eq!(rows.len(), e.kernels.len());
    assert!(rows[0].get("multiplier").is_some() && rows[0].get("tile").is_some());
}

/// Kernels that differ only in their names are one class (evaluated once); a kernel
/// with another shape or another element type is a class of its own.
#[test]
fn identical_kernels_share_one_class() {
    let m = module(
        r#"
HloModule classes
ENTRY %main (x: f32[512,1024], y: f32[512,1024], z: f32[256,1024], w: bf16[512,1024]) -> (f32[512,1024], f32[512,1024], f32[256,1024], bf16[512,1024]) {
  %x = f32[512,1024]{1,0} parameter(0)
  %y = f32[512,1024]{1,0} parameter(1)
  %z = f32[256,1024]{1,0} parameter(2)
  %w = bf16[512,1024]{1,0} parameter(3)
  %a = f32[512,1024]{1,0} exponential(%x)
  %b = f32[512,1024]{1,0} exponential(%y)
  %c = f32[256,1024]{1,0} exponential(%z)
  %d = bf16[512,1024]{1,0} exponential(%w)
  ROOT %t = (f32[512,1024]{1,0}, f32[512,1024]{1,0}, f32[256,1024]{1,0}, bf16[512,1024]{1,0}) tuple(%a, %b, %c, %d)
}
"#,
    );
    let lp = LoweredProgram::new(&m).unwrap();
    let e = est(&m);
    let names: Vec<&str> = e.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
    assert_eq!(lp.distinct_kernels(), 3);
    assert!(close(row(&e, "a").total_ns, row(&e, "b").total_ns));
    assert!(row(&e, "c").total_ns < row(&e, "a").total_ns);
}

/// The compiled kernel list (`compile --emit json`) and the program estimate read one
/// trip-count analysis: they agree on every form of loop, the backend_config one included.
#[test]
fn kernel_list_and_estimate_agree_on_trip_counts() {
    let cases = [
        (
            loop_module("7", r#", backend_config={"known_trip_count":{"n":"10"}}"#),
            Some(10),
        ),
        (loop_module("12", ""), Some(12)),
        (
            module(&LOOP.replace("LIMIT", "12").replace("CONFIG", "").replace(
                "%next = s32[] add(%i, %one)",
                "%next = s32[] subtract(%i, %one)",
            )),
            None,
        ),
        (
            module(
                &LOOP
                    .replace("LIMIT", "0")
                    .replace("CONFIG", "")
                    .replace("%zero = s32[] constant(0)", "%zero = s32[] constant(9)")
                    .replace(
                        "%next = s32[] add(%i, %one)",
                        "%next = s32[] subtract(%i, %one)",
                    )
                    .replace("direction=LT", "direction=GT"),
            ),
            Some(9),
        ),
    ];
    for (m, want) in cases {
        let lp = LoweredProgram::new(&m).unwrap();
        assert_eq!(lp.loops[0].1, want.unwrap_or(DEFAULT_TRIP_COUNT));
        let c = tpusim::passes::compile(&m, &Default::default()).unwrap();
        let sites: Vec<_> = c
            .kernels
            .iter()
            .filter_map(|k| k.call_site.as_ref())
            .filter(|s| s.role == tpusim::passes::SiteRole::Body)
            .collect();
        assert!(!sites.is_empty());
        assert!(sites.iter().all(|s| s.trip_count == want), "{sites:?}");
    }
}
