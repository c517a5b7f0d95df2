//! Cost analysis on small modules; every expected figure is what XLA's own
//! `HloCostAnalysis` reports for the same module (computed with jaxlib's
//! `hlo_module_cost_analysis` on the CPU client).

use tpusim::analysis::{analyze_module, module_cost, render_report, Cost};
use tpusim::hlo::parse_module;

const ADD: &str =
    "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT r = f32[] add(a, b)\n}\n";
const GE: &str = "ge {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT r = pred[] compare(a, b), direction=GE\n}\n";

fn cost_of(body: &str) -> Cost {
    let text = format!("HloModule m\n{body}");
    let m = parse_module("t.hlo", &text).unwrap_or_else(|e| panic!("{e}"));
    module_cost(&m)
}

#[track_caller]
fn check(body: &str, flops: f64, transcendentals: f64, bytes: f64) {
    let c = cost_of(body);
    assert_eq!(
        (c.flops, c.transcendentals, c.bytes_accessed),
        (flops, transcendentals, bytes),
        "flops, transcendentals, bytes accessed"
    );
}

fn entry(body: &str) -> String {
    format!("ENTRY e {{\n{body}\n}}")
}

#[test]
fn elementwise_flops_and_transcendentals() {
    check(
        &entry(" a = f32[10] parameter(0)\n ROOT r = f32[10] add(a, a)"),
        10.0,
        0.0,
        120.0,
    );
    for op in [
        "exponential",
        "log",
        "tanh",
        "rsqrt",
        "sine",
        "tan",
        "acos",
        "erf",
        "logistic",
        "cbrt",
    ] {
        check(
            &entry(&format!(
                " a = f32[10] parameter(0)\n ROOT r = f32[10] {op}(a)"
            )),
            0.0,
            10.0,
            80.0,
        );
    }
    check(
        &entry(" a = f32[10] parameter(0)\n ROOT r = f32[10] power(a, a)"),
        0.0,
        10.0,
        120.0,
    );
    check(
        &entry(" a = f32[10] parameter(0)\n ROOT r = pred[10] is-finite(a)"),
        10.0,
        0.0,
        50.0,
    );
    check(
        &entry(" a = c64[10] parameter(0)\n ROOT r = f32[10] abs(a)"),
        10.0,
        0.0,
        120.0,
    );
    check(
        &entry(" a = f32[10] parameter(0)\n ROOT r = s32[10] bitcast-convert(a)"),
        10.0,
        0.0,
        80.0,
    );
    // copy moves data but does no arithmetic
    check(
        &entry(" a = f32[10] parameter(0)\n ROOT r = f32[10] copy(a)"),
        0.0,
        0.0,
        80.0,
    );
}

#[test]
fn tuples_count_index_tables_and_leaves() {
    check(&entry(" a = f32[10] parameter(0)\n b = f32[20] parameter(1)\n ROOT t = (f32[10], f32[20]) tuple(a, b)"), 0.0, 0.0, 16.0);
    // copy of a tuple: the operand is its index table, the output its leaves
    check(
        &entry(" t = (f32[10], f32[20]) parameter(0)\n ROOT o = (f32[10], f32[20]) copy(t)"),
        0.0,
        0.0,
        136.0,
    );
    // opt-barrier: its tuple operand is an index table, its output the leaves (+ the tuple's table)
    check(&entry(" a = f32[10] parameter(0)\n b = f32[20] parameter(1)\n t = (f32[10], f32[20]) tuple(a, b)\n ROOT o = (f32[10], f32[20]) opt-barrier(t)"), 0.0, 0.0, 152.0);
    check(
        &entry(
            " t = (f32[10], f32[20]) parameter(0)\n ROOT g = f32[20] get-tuple-element(t), index=1",
        ),
        0.0,
        0.0,
        0.0,
    );
}

#[test]
fn dot_and_convolutions() {
    check(&entry(" a = bf16[7,2,3,5] parameter(0)\n b = bf16[7,5,3,4] parameter(1)\n ROOT d = f32[7,2,4] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2,3}, rhs_contracting_dims={2,1}"), 1680.0, 0.0, 1484.0);
    check(&entry(" x = f32[8,32,32,16] parameter(0)\n w = f32[3,3,8,64] parameter(1)\n ROOT c = f32[8,16,16,64] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=2"), 18096128.0, 0.0, 1067008.0);
    check(&entry(" x = f32[2,7,7,4] parameter(0)\n w = f32[3,3,4,5] parameter(1)\n ROOT c = f32[2,15,15,5] convolution(x, w), window={size=3x3 pad=2_2x2_2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f"), 35280.0, 0.0, 11288.0);
    check(&entry(" x = f32[2,9,9,4] parameter(0)\n w = f32[3,3,4,5] parameter(1)\n ROOT c = f32[2,9,9,5] convolution(x, w), window={size=3x3 pad=2_2x2_2 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f"), 42320.0, 0.0, 6552.0);
    check(&entry(" x = f32[16,8,8,4] parameter(0)\n k = f32[3,3,4,8] parameter(1)\n ROOT c = f32[4,6,6,8] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f, batch_group_count=4"), 82944.0, 0.0, 22144.0);
    check(&entry(" x = f32[16,4] parameter(0)\n k = f32[4,8] parameter(1)\n ROOT c = f32[16,8] convolution(x, k), dim_labels=bf_io->bf"), 1024.0, 0.0, 896.0);
}

#[test]
fn reductions_through_their_computations() {
    check(&format!("{ADD}{}", entry(" a = f32[32,128] parameter(0)\n z = f32[] constant(0)\n ROOT r = f32[32] reduce(a, z), dimensions={1}, to_apply=add")), 4064.0, 0.0, 16516.0);
    let am = "am {\n a = f32[] parameter(0)\n b = s32[] parameter(1)\n c = f32[] parameter(2)\n d = s32[] parameter(3)\n x = f32[] add(a, c)\n y = s32[] add(b, d)\n ROOT r = (f32[], s32[]) tuple(x, y)\n}\n";
    check(&format!("{am}{}", entry(" a = f32[10,7] parameter(0)\n b = s32[10,7] parameter(1)\n i = f32[] constant(0)\n j = s32[] constant(0)\n ROOT s = (f32[10], s32[10]) reduce(a, b, i, j), dimensions={1}, to_apply=am")), 120.0, 0.0, 648.0);
    check(&format!("{ADD}{}", entry(" a = f32[8,56,56,64] parameter(0)\n z = f32[] constant(0)\n ROOT r = f32[8,28,28,64] reduce-window(a, z), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}, to_apply=add")), 3211264.0, 0.0, 8028164.0);
    // a centred window spanning the whole dimension: XLA's reduce+broadcast special case
    check(&format!("{ADD}{}", entry(" a = f32[64,16] parameter(0)\n z = f32[] constant(0)\n ROOT r = f32[64,16] reduce-window(a, z), window={size=1x31 pad=0_0x15_15}, to_apply=add")), 79.0, 0.0, 8196.0);
    check(&format!("{ADD}{}", entry(" a = f32[64,16] parameter(0)\n z = f32[] constant(0)\n ROOT r = f32[64,16] reduce-window(a, z), window={size=1x16 pad=0_0x15_0}, to_apply=add")), 15360.0, 0.0, 8196.0);
    check(&format!("{ADD}{GE}{}", entry(" a = f32[8,8] parameter(0)\n s = f32[4,4] parameter(1)\n z = f32[] constant(0)\n ROOT r = f32[8,8] select-and-scatter(a, s, z), window={size=2x2 stride=2x2}, select=ge, scatter=add")), 64.0, 0.0, 580.0);
    check(&format!("{ADD}{}", entry(" a = f32[10] parameter(0)\n ROOT r = f32[10] map(a, a), dimensions={0}, to_apply=add")), 10.0, 0.0, 120.0);
    let cmp = "cmp {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n c = s32[] parameter(2)\n d = s32[] parameter(3)\n ROOT r = pred[] compare(a, b), direction=LT\n}\n";
    check(&format!("{cmp}{}", entry(" a = f32[10,7] parameter(0)\n b = s32[10,7] parameter(1)\n ROOT s = (f32[10,7], s32[10,7]) sort(a, b), dimensions={1}, to_apply=cmp")), 490.0, 0.0, 1120.0);
}

#[test]
fn data_movement_overrides() {
    check(
        &entry(" a = f32[20] parameter(0)\n ROOT r = f32[5] slice(a), slice={[0:10:2]}"),
        0.0,
        0.0,
        40.0,
    );
    check(&entry(" a = f32[20,4] parameter(0)\n i = s32[] parameter(1)\n j = s32[] parameter(2)\n ROOT r = f32[5,4] dynamic-slice(a, i, j), dynamic_slice_sizes={5,4}"), 0.0, 0.0, 164.0);
    check(&entry(" a = f32[20,4] parameter(0)\n u = f32[5,4] parameter(1)\n i = s32[] parameter(2)\n j = s32[] parameter(3)\n ROOT r = f32[20,4] dynamic-update-slice(a, u, i, j)"), 0.0, 0.0, 164.0);
    check(&entry(" a = f32[100,8] parameter(0)\n i = s32[5,1] parameter(1)\n ROOT r = f32[5,8] gather(a, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,8}"), 0.0, 0.0, 340.0);
    check(&format!("{ADD}{}", entry(" a = f32[100,8] parameter(0)\n i = s32[5,1] parameter(1)\n u = f32[5,8] parameter(2)\n ROOT r = f32[100,8] scatter(a, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add")), 40.0, 0.0, 500.0);
    check(
        &entry(" a = f32[5] parameter(0)\n ROOT r = f32[4,5] broadcast(a), dimensions={1}"),
        0.0,
        0.0,
        100.0,
    );
    check(
        &entry(" ROOT r = s32[10,3] iota(), iota_dimension=0"),
        0.0,
        0.0,
        120.0,
    );
    check(&entry(" a = f32[10] parameter(0)\n z = f32[] constant(0)\n ROOT r = f32[25] pad(a, z), padding=2_3_1"), 0.0, 0.0, 144.0);
    check(
        &entry(" a = f32[10] parameter(0)\n ROOT r = f32[2,5] bitcast(a)"),
        0.0,
        0.0,
        0.0,
    );
}

#[test]
fn transposes_that_are_bitcasts_are_free() {
    check(&entry(" a = f32[2,5]{1,0} parameter(0)\n ROOT r = f32[5,2]{1,0} transpose(a), dimensions={1,0}"), 0.0, 0.0, 80.0);
    check(&entry(" a = f32[2,5]{1,0} parameter(0)\n ROOT r = f32[5,2]{0,1} transpose(a), dimensions={1,0}"), 0.0, 0.0, 0.0);
    // degenerate dimensions do not make a bitcast for XLA's cost analysis
    check(&entry(" a = f32[1,5]{1,0} parameter(0)\n ROOT r = f32[5,1]{1,0} transpose(a), dimensions={1,0}"), 0.0, 0.0, 40.0);
}

#[test]
fn control_flow_folds_in_callees() {
    let body = "body {\n p = (s32[], f32[10]) parameter(0)\n i = s32[] get-tuple-element(p), index=0\n x = f32[10] get-tuple-element(p), index=1\n one = s32[] constant(1)\n i2 = s32[] add(i, one)\n x2 = f32[10] multiply(x, x)\n ROOT r = (s32[], f32[10]) tuple(i2, x2)\n}\ncond {\n p = (s32[], f32[10]) parameter(0)\n i = s32[] get-tuple-element(p), index=0\n n = s32[] constant(5)\n ROOT c = pred[] compare(i, n), direction=LT\n}\n";
    check(&format!("{body}{}", entry(" a = f32[10] parameter(0)\n z = s32[] constant(0)\n t = (s32[], f32[10]) tuple(z, a)\n ROOT w = (s32[], f32[10]) while(t), condition=cond, body=body")), 12.0, 0.0, 173.0);
    let branches = "b1 {\n p = f32[10] parameter(0)\n ROOT r = f32[10] exponential(p)\n}\nb2 {\n p = f32[10] parameter(0)\n n = f32[10] negate(p)\n ROOT r = f32[10] multiply(n, n)\n}\n";
    check(&format!("{branches}{}", entry(" c = pred[] parameter(0)\n a = f32[10] parameter(1)\n ROOT r = f32[10] conditional(c, a, a), true_computation=b1, false_computation=b2")), 20.0, 10.0, 200.0);
    check(
        &format!(
            "{ADD}{}",
            entry(" a = f32[] parameter(0)\n ROOT r = f32[] call(a, a), to_apply=add")
        ),
        1.0,
        0.0,
        12.0,
    );
    let comp = "comp {\n a = f32[10] parameter(0)\n ROOT r = f32[10] exponential(a)\n}\n";
    check(&format!("{comp}{}", entry(" a = f32[10] parameter(0)\n s = ((f32[10]), f32[10], s32[]) async-start(a), calls=comp\n ROOT d = f32[10] async-done(s)")), 0.0, 10.0, 144.0);
}

#[test]
fn fusions_count_what_they_read() {
    let f = "f {\n p0 = f32[100] parameter(0)\n p1 = f32[100] parameter(1)\n s = f32[10] slice(p0), slice={[0:10]}\n q2 = f32[20] slice(p0), slice={[10:30]}\n b = f32[10,100] broadcast(p1), dimensions={1}\n r = f32[100] reshape(p1)\n n = f32[100] negate(p1)\n m = f32[100] multiply(p1, r)\n ROOT t = (f32[10], f32[20], f32[10,100], f32[100]) tuple(s, q2, b, m)\n}\n";
    check(&format!("{f}{}", entry(" a = f32[100] parameter(0)\n c = f32[100] parameter(1)\n ROOT r = (f32[10], f32[20], f32[10,100], f32[100]) fusion(a, c), kind=kLoop, calls=f")), 200.0, 0.0, 5840.0);
    let dus = "f {\n p0 = f32[100] parameter(0)\n p1 = f32[10] parameter(1)\n i = s32[] parameter(2)\n ROOT d = f32[100] dynamic-update-slice(p0, p1, i)\n}\n";
    check(&format!("{dus}{}", entry(" a = f32[100] parameter(0)\n c = f32[10] parameter(1)\n i = s32[] parameter(2)\n ROOT r = f32[100] fusion(a, c, i), kind=kLoop, calls=f")), 0.0, 0.0, 84.0);
    let dus_t = "f {\n p0 = f32[100] parameter(0)\n p1 = f32[10] parameter(1)\n i = s32[] parameter(2)\n d = f32[100] dynamic-update-slice(p0, p1, i)\n n = f32[10] negate(p1)\n ROOT t = (f32[100], f32[10]) tuple(d, n)\n}\n";
    check(&format!("{dus_t}{}", entry(" a = f32[100] parameter(0)\n c = f32[10] parameter(1)\n i = s32[] parameter(2)\n ROOT r = (f32[100], f32[10]) fusion(a, c, i), kind=kLoop, calls=f")), 10.0, 0.0, 124.0);
    let konst = "f {\n p0 = f32[100] parameter(0)\n k = f32[100] constant({...})\n k1 = f32[1] constant({1})\n ROOT d = f32[100] add(p0, k)\n}\n";
    check(
        &format!(
            "{konst}{}",
            entry(" a = f32[100] parameter(0)\n ROOT r = f32[100] fusion(a), kind=kLoop, calls=f")
        ),
        100.0,
        0.0,
        1200.0,
    );
    let ds = "f {\n p0 = f32[100] parameter(0)\n i = s32[] parameter(1)\n d = f32[10] dynamic-slice(p0, i), dynamic_slice_sizes={10}\n b = f32[100] bitcast(p0)\n t = f32[100] transpose(p0), dimensions={0}\n ROOT x = (f32[10], f32[100], f32[100]) tuple(d, b, t)\n}\n";
    check(&format!("{ds}{}", entry(" a = f32[100] parameter(0)\n i = s32[] parameter(1)\n ROOT r = (f32[10], f32[100], f32[100]) fusion(a, i), kind=kLoop, calls=f")), 0.0, 0.0, 1284.0);
    let nested = "inner {\n q = f32[100] parameter(0)\n ROOT s = f32[10] slice(q), slice={[0:10]}\n}\nouter {\n p = f32[100] parameter(0)\n f = f32[10] fusion(p), kind=kLoop, calls=inner\n ROOT n = f32[10] negate(f)\n}\n";
    check(
        &format!(
            "{nested}{}",
            entry(
                " a = f32[100] parameter(0)\n ROOT r = f32[10] fusion(a), kind=kLoop, calls=outer"
            )
        ),
        10.0,
        0.0,
        80.0,
    );
    let tparam = "f {\n p = (f32[100], f32[10]) parameter(0)\n a = f32[100] get-tuple-element(p), index=0\n b = f32[10] get-tuple-element(p), index=1\n s = f32[10] slice(a), slice={[0:10]}\n ROOT x = f32[10] add(s, b)\n}\n";
    check(&format!("{tparam}{}", entry(" a = f32[100] parameter(0)\n b = f32[10] parameter(1)\n t = (f32[100], f32[10]) tuple(a, b)\n ROOT r = f32[10] fusion(t), kind=kLoop, calls=f")), 10.0, 0.0, 136.0);
}

#[test]
fn other_handlers() {
    check(&entry(" a = f32[10] parameter(0)\n ROOT r = f32[10] custom-call(a), custom_call_target=\"foo\""), -1.0, 0.0, -1.0);
    check(&entry(" a = f32[4,4] parameter(0)\n b = f32[4,3] parameter(1)\n ROOT r = f32[4,3] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE"), 96.0, 0.0, 128.0);
    check(
        &entry(" a = f32[4,4] parameter(0)\n ROOT r = f32[4,4] cholesky(a)"),
        21.0,
        0.0,
        64.0,
    );
    check(&entry(" a = f32[8,64] parameter(0)\n ROOT r = c64[8,33] fft(a), fft_type=RFFT, fft_length={64}"), 24576.0, 0.0, 4160.0);
    check(&entry(" a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT r = f32[10] rng(a, b), distribution=rng_uniform"), 0.0, 10.0, 48.0);
    check(&entry(" s = u64[2] parameter(0)\n ROOT r = (u64[2], u32[10,10]) rng-bit-generator(s), algorithm=rng_default"), 0.0, 102.0, 432.0);
    check(&format!("{ADD}{}", entry(" a = f32[10] parameter(0)\n b = f32[20] parameter(1)\n ROOT s = (f32[10], f32[20]) all-reduce(a, b), to_apply=add, replica_groups={}")), 30.0, 0.0, 240.0);
    check(&entry(" a = f32[10] parameter(0)\n t = token[] after-all()\n ROOT d = f32[10] add-dependency(a, t)"), 0.0, 0.0, 0.0);
}

#[test]
fn report_rows_sum_to_the_totals_and_serialise_with_the_agreed_keys() {
    let text = format!("HloModule m\n{ADD}{}", entry(" a = f32[32,128] parameter(0)\n e = f32[32,128] exponential(a)\n z = f32[] constant(0)\n ROOT r = f32[32] reduce(e, z), dimensions={1}, to_apply=add"));
    let m = parse_module("t.hlo", &text).unwrap();
    let r = analyze_module(&m);
    assert_eq!(r.instructions.len(), 4);
    let sum: f64 = r.instructions.iter().map(|x| x.bytes_accessed).sum();
    assert_eq!(sum, r.bytes_accessed);
    assert_eq!((r.flops, r.transcendentals), (4064.0, 4096.0));
    let json = serde_json::to_string(&r).unwrap();
    assert!(
        json.starts_with("{\"flops\":4064.0,\"transcendentals\":4096.0,\"bytes_accessed\":"),
        "{json}"
    );
    assert!(json.contains(",\"instructions\":[{\"computation\":\"e\",\"name\":\"a\",\"opcode\":\"parameter\",\"flops\":0.0,\"transcendentals\":0.0,\"bytes_accessed\":0.0}"), "{json}");
    let v = serde_json::to_value(&r).unwrap();
    let row = &v["instructions"][1];
    assert_eq!(row["name"], "e");
    assert_eq!(row["opcode"], "exponential");
    assert_eq!(row["computation"], "e");
    assert_eq!(row["transcendentals"], 4096.0);
    let text = render_report(&r, 3);
    assert!(text.contains("top 1 instructions by flops"), "{text}");
    assert!(text.contains("reduce"), "{text}");
    assert!(
        text.contains("top 2 instructions by bytes accessed"),
        "{text}"
    );
}
