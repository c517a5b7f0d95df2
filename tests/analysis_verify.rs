//! Verifier: hand-broken modules each give their specific error, located at the
//! right computation, instruction and line; well-formed modules infer the right
//! shapes for the tricky opcodes.

use tpusim::analysis::{infer_shape, verify_module, ShapeError, VerifyError, VerifyErrorKind};
use tpusim::hlo::parse_module;
use tpusim::ir::Module;

fn parse(text: &str) -> Module {
    parse_module("test.hlo", text).unwrap_or_else(|e| panic!("test module must parse: {e}"))
}

/// The single verifier error of a module.
fn one_error(text: &str) -> VerifyError {
    let m = parse(text);
    let errs = verify_module(&m).expect_err("the module is broken");
    assert_eq!(errs.len(), 1, "expected one error, got {errs:#?}");
    errs.into_iter().next().unwrap()
}

fn malformed(text: &str) -> (VerifyError, ShapeError) {
    let e = one_error(text);
    match &e.kind {
        VerifyErrorKind::Malformed(s) => {
            let s = s.clone();
            (e, s)
        }
        k => panic!("expected a malformed-instruction error, got {k:?}"),
    }
}

fn mismatch(text: &str) -> (VerifyError, String, String) {
    let e = one_error(text);
    match &e.kind {
        VerifyErrorKind::ShapeMismatch { declared, inferred } => {
            let (d, i) = (
                tpusim::analysis::error::shape_text(declared),
                tpusim::analysis::error::shape_text(inferred),
            );
            (e, d, i)
        }
        k => panic!("expected a shape mismatch, got {k:?}"),
    }
}

#[test]
fn wrong_dot_result_shape_names_both_shapes_and_the_line() {
    let (e, declared, inferred) = mismatch(
        "HloModule m\n\
         ENTRY main {\n\
           a = f32[2,3] parameter(0)\n\
           b = f32[3,4] parameter(1)\n\
           ROOT d = f32[2,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n\
         }\n",
    );
    assert_eq!(e.computation, "main");
    assert_eq!(e.instruction, "d");
    assert_eq!(e.line, 5);
    assert_eq!(declared, "f32[2,5]");
    assert_eq!(inferred, "f32[2,4]");
    let msg = e.to_string();
    assert!(
        msg.contains("line 5") && msg.contains("f32[2,5]") && msg.contains("f32[2,4]"),
        "{msg}"
    );
}

#[test]
fn dot_contracting_size_mismatch() {
    let (_, s) = malformed(
        "HloModule m\nENTRY main {\n a = f32[2,3] parameter(0)\n b = f32[5,4] parameter(1)\n \
         ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
    );
    assert_eq!(
        s,
        ShapeError::DotContracting {
            lhs_dim: 1,
            lhs_size: 3,
            rhs_dim: 0,
            rhs_size: 5
        }
    );
}

#[test]
fn dot_batch_size_mismatch() {
    let (_, s) = malformed(
        "HloModule m\nENTRY main {\n a = f32[7,2,3] parameter(0)\n b = f32[6,3,4] parameter(1)\n \
         ROOT d = f32[7,2,4] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, \
         lhs_contracting_dims={2}, rhs_contracting_dims={1}\n}\n",
    );
    assert!(
        matches!(
            s,
            ShapeError::DotBatch {
                lhs_size: 7,
                rhs_size: 6,
                ..
            }
        ),
        "{s:?}"
    );
}

#[test]
fn reshape_with_a_different_element_count() {
    let (e, s) = malformed(
        "HloModule m\nENTRY main {\n a = f32[2,3] parameter(0)\n ROOT r = f32[7] reshape(a)\n}\n",
    );
    assert_eq!(e.instruction, "r");
    assert_eq!(
        s,
        ShapeError::ReshapeElementCount {
            operand: 6,
            result: 7
        }
    );
}

#[test]
fn transpose_permutation_out_of_range() {
    let (_, s) = malformed(
        "HloModule m\nENTRY main {\n a = f32[2,3] parameter(0)\n \
         ROOT t = f32[3,2] transpose(a), dimensions={1,2}\n}\n",
    );
    assert!(
        matches!(&s, ShapeError::NotPermutation { dims, rank: 2, .. } if dims == &[1, 2]),
        "{s:?}"
    );
}

#[test]
fn transpose_with_wrong_declared_shape() {
    let (_, d, i) = mismatch(
        "HloModule m\nENTRY main {\n a = f32[2,3,4] parameter(0)\n \
         ROOT t = f32[4,3,2] transpose(a), dimensions={2,0,1}\n}\n",
    );
    assert_eq!((d.as_str(), i.as_str()), ("f32[4,3,2]", "f32[4,2,3]"));
}

#[test]
fn tuple_index_out_of_range() {
    let (_, s) = malformed(
        "HloModule m\nENTRY main {\n p = (f32[2], s32[]) parameter(0)\n \
         ROOT g = f32[2] get-tuple-element(p), index=2\n}\n",
    );
    assert_eq!(s, ShapeError::TupleIndex { index: 2, len: 2 });
}

#[test]
fn tuple_index_picks_the_wrong_element() {
    let (_, d, i) = mismatch(
        "HloModule m\nENTRY main {\n p = (f32[2], s32[]) parameter(0)\n \
         ROOT g = f32[2] get-tuple-element(p), index=1\n}\n",
    );
    assert_eq!((d.as_str(), i.as_str()), ("f32[2]", "s32[]"));
}

#[test]
fn get_tuple_element_of_an_array() {
    let (_, s) = malformed(
        "HloModule m\nENTRY main {\n p = f32[2] parameter(0)\n \
         ROOT g = f32[2] get-tuple-element(p), index=0\n}\n",
    );
    assert!(
        matches!(s, ShapeError::NotTuple { operand: 0, .. }),
        "{s:?}"
    );
}

#[test]
fn broadcast_dimension_maps_to_a_wrong_size() {
    let (_, s) = malformed(
        "HloModule m\nENTRY main {\n a = f32[3] parameter(0)\n \
         ROOT b = f32[3,4] broadcast(a), dimensions={1}\n}\n",
    );
    assert_eq!(
        s,
        ShapeError::BroadcastDim {
            operand_dim: 0,
            operand_size: 3,
            result_dim: 1,
            result_size: 4
        }
    );
}

#[test]
fn broadcast_dimension_count_differs_from_operand_rank() {
    let (_, s) = malformed(
        "HloModule m\nENTRY main {\n a = f32[3,4] parameter(0)\n \
         ROOT b = f32[2,3,4] broadcast(a), dimensions={1}\n}\n",
    );
    assert_eq!(s, ShapeError::BroadcastRank { dims: 1, rank: 2 });
}

#[test]
fn convolution_feature_mismatch() {
    let (_, s) = malformed(
        "HloModule m\nENTRY main {\n x = f32[8,32,32,16] parameter(0)\n w = f32[3,3,8,64] parameter(1)\n \
         ROOT c = f32[8,32,32,64] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n}\n",
    );
    assert_eq!(
        s,
        ShapeError::ConvFeatures {
            input_features: 16,
            kernel_input_features: 8,
            feature_group_count: 1
        }
    );
}

#[test]
fn grouped_convolution_is_accepted_and_wrong_spatial_size_is_caught() {
    // feature_group_count=2 makes 16 input features match 8 kernel input features.
    let ok = "HloModule m\nENTRY main {\n x = f32[8,32,32,16] parameter(0)\n w = f32[3,3,8,64] parameter(1)\n \
         ROOT c = f32[8,16,16,64] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, \
         dim_labels=b01f_01io->b01f, feature_group_count=2\n}\n";
    assert!(verify_module(&parse(ok)).is_ok());
    let (_, d, i) =
        mismatch(&ok.replace("f32[8,16,16,64] convolution", "f32[8,15,16,64] convolution"));
    assert_eq!(
        (d.as_str(), i.as_str()),
        ("f32[8,15,16,64]", "f32[8,16,16,64]")
    );
}

#[test]
fn convolution_window_differs_from_kernel() {
    let (_, s) = malformed(
        "HloModule m\nENTRY main {\n x = f32[1,8,8,4] parameter(0)\n w = f32[2,2,4,4] parameter(1)\n \
         ROOT c = f32[1,6,6,4] convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f\n}\n",
    );
    assert!(matches!(s, ShapeError::Window(_)), "{s:?}");
}

#[test]
fn elementwise_operands_with_different_dims() {
    let (_, s) = malformed(
        "HloModule m\nENTRY main {\n a = f32[2,3] parameter(0)\n b = f32[3,2] parameter(1)\n \
         ROOT c = f32[2,3] add(a, b)\n}\n",
    );
    assert_eq!(
        s,
        ShapeError::OperandDims {
            lhs: "f32[2,3]".into(),
            rhs: "f32[3,2]".into()
        }
    );
}

#[test]
fn elementwise_operands_with_different_types() {
    let (_, s) = malformed(
        "HloModule m\nENTRY main {\n a = f32[2] parameter(0)\n b = s32[2] parameter(1)\n \
         ROOT c = f32[2] multiply(a, b)\n}\n",
    );
    assert!(matches!(s, ShapeError::ElementType { .. }), "{s:?}");
}

#[test]
fn compare_must_produce_pred() {
    let (_, d, i) = mismatch(
        "HloModule m\nENTRY main {\n a = f32[2] parameter(0)\n \
         ROOT c = f32[2] compare(a, a), direction=LT\n}\n",
    );
    assert_eq!((d.as_str(), i.as_str()), ("f32[2]", "pred[2]"));
}

#[test]
fn slice_out_of_bounds() {
    let (_, s) = malformed(
        "HloModule m\nENTRY main {\n a = f32[10] parameter(0)\n \
         ROOT s = f32[5] slice(a), slice={[8:13]}\n}\n",
    );
    assert_eq!(
        s,
        ShapeError::SliceBounds {
            dim: 0,
            start: 8,
            limit: 13,
            stride: 1,
            size: 10
        }
    );
}

#[test]
fn strided_slice_size() {
    let (_, d, i) = mismatch(
        "HloModule m\nENTRY main {\n a = f32[10] parameter(0)\n \
         ROOT s = f32[5] slice(a), slice={[1:10:3]}\n}\n",
    );
    assert_eq!((d.as_str(), i.as_str()), ("f32[5]", "f32[3]"));
}

#[test]
fn reduce_with_wrong_result_dims() {
    let (e, d, i) = mismatch(
        "HloModule m\n\
         add {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y)\n}\n\
         ENTRY main {\n a = f32[4,5,6] parameter(0)\n z = f32[] constant(0)\n \
         ROOT r = f32[4,5] reduce(a, z), dimensions={1}, to_apply=add\n}\n",
    );
    assert_eq!(e.computation, "main");
    assert_eq!((d.as_str(), i.as_str()), ("f32[4,5]", "f32[4,6]"));
}

#[test]
fn variadic_reduce_infers_a_tuple() {
    let text = "HloModule m\n\
         am {\n a = f32[] parameter(0)\n b = s32[] parameter(1)\n c = f32[] parameter(2)\n d = s32[] parameter(3)\n \
         x = f32[] maximum(a, c)\n y = s32[] maximum(b, d)\n ROOT t = (f32[], s32[]) tuple(x, y)\n}\n\
         ENTRY main {\n v = f32[4,5] parameter(0)\n i = s32[4,5] parameter(1)\n z = f32[] constant(0)\n k = s32[] constant(0)\n \
         ROOT r = (f32[4], s32[4]) reduce(v, i, z, k), dimensions={1}, to_apply=am\n}\n";
    assert!(verify_module(&parse(text)).is_ok());
    let (_, d, i) =
        mismatch(&text.replace("ROOT r = (f32[4], s32[4])", "ROOT r = (f32[4], f32[4])"));
    assert_eq!(
        (d.as_str(), i.as_str()),
        ("(f32[4], f32[4])", "(f32[4], s32[4])")
    );
}

#[test]
fn reduce_window_output_size_with_stride_padding_and_dilation() {
    let text = "HloModule m\n\
         mx {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] maximum(x, y)\n}\n\
         ENTRY main {\n a = f32[8,56,56,64] parameter(0)\n z = f32[] constant(0)\n \
         ROOT r = f32[8,28,28,64] reduce-window(a, z), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}, to_apply=mx\n}\n";
    assert!(verify_module(&parse(text)).is_ok());
    // rhs_dilate=2 makes the 3-window span 5: (57 - 5) / 2 + 1 = 27.
    let (_, d, i) = mismatch(&text.replace(
        "pad=0_0x0_1x0_1x0_0}",
        "pad=0_0x0_1x0_1x0_0 rhs_dilate=1x2x1x1}",
    ));
    assert_eq!(
        (d.as_str(), i.as_str()),
        ("f32[8,28,28,64]", "f32[8,27,28,64]")
    );
}

#[test]
fn while_body_signature_mismatch() {
    let (_, s) = malformed(
        "HloModule m\n\
         body {\n p = (s32[], f32[4]) parameter(0)\n i = s32[] get-tuple-element(p), index=0\n \
         ROOT t = (s32[], s32[]) tuple(i, i)\n}\n\
         cond {\n p = (s32[], f32[4]) parameter(0)\n ROOT c = pred[] constant(false)\n}\n\
         ENTRY main {\n a = (s32[], f32[4]) parameter(0)\n \
         ROOT w = (s32[], f32[4]) while(a), condition=cond, body=body\n}\n",
    );
    assert!(
        matches!(&s, ShapeError::Signature { computation, .. } if computation == "body"),
        "{s:?}"
    );
}

#[test]
fn fusion_operand_does_not_match_the_fused_parameter() {
    let (e, s) = malformed(
        "HloModule m\n\
         fused {\n p0 = f32[4] parameter(0)\n ROOT n = f32[4] negate(p0)\n}\n\
         ENTRY main {\n a = f32[5] parameter(0)\n \
         ROOT f = f32[4] fusion(a), kind=kLoop, calls=fused\n}\n",
    );
    assert_eq!(e.instruction, "f");
    assert!(
        matches!(&s, ShapeError::Signature { computation, message } if computation == "fused" && message.contains("f32[5]")),
        "{s:?}"
    );
}

#[test]
fn concatenate_with_mismatched_dims() {
    let (_, s) = malformed(
        "HloModule m\nENTRY main {\n a = f32[2,3] parameter(0)\n b = f32[2,4] parameter(1)\n \
         ROOT c = f32[4,3] concatenate(a, b), dimensions={0}\n}\n",
    );
    assert!(matches!(s, ShapeError::OperandDims { .. }), "{s:?}");
}

#[test]
fn pad_with_interior_padding() {
    let (_, d, i) = mismatch(
        "HloModule m\nENTRY main {\n a = f32[10] parameter(0)\n z = f32[] constant(0)\n \
         ROOT p = f32[25] pad(a, z), padding=2_3_1\n}\n",
    );
    // 2 + 3 + 10 + 9 interior elements
    assert_eq!((d.as_str(), i.as_str()), ("f32[25]", "f32[24]"));
}

#[test]
fn dynamic_slice_size_exceeds_the_operand() {
    let (_, s) = malformed(
        "HloModule m\nENTRY main {\n a = f32[4,8] parameter(0)\n i = s32[] parameter(1)\n \
         ROOT d = f32[5,8] dynamic-slice(a, i, i), dynamic_slice_sizes={5,8}\n}\n",
    );
    assert!(
        matches!(&s, ShapeError::Invalid(m) if m.contains("exceeds")),
        "{s:?}"
    );
}

#[test]
fn gather_result_shape() {
    let text = "HloModule m\nENTRY main {\n a = f32[100,8] parameter(0)\n i = s32[5,1] parameter(1)\n \
         ROOT g = f32[5,8] gather(a, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, \
         index_vector_dim=1, slice_sizes={1,8}\n}\n";
    assert!(verify_module(&parse(text)).is_ok());
    let (_, d, i) = mismatch(&text.replace("offset_dims={1}", "offset_dims={0}"));
    assert_eq!((d.as_str(), i.as_str()), ("f32[5,8]", "f32[8,5]"));
}

#[test]
fn select_and_scatter_source_must_match_the_window() {
    let (_, s) = malformed(
        "HloModule m\n\
         ge {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT c = pred[] compare(x, y), direction=GE\n}\n\
         add {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y)\n}\n\
         ENTRY main {\n a = f32[8,8] parameter(0)\n s = f32[3,4] parameter(1)\n z = f32[] constant(0)\n \
         ROOT r = f32[8,8] select-and-scatter(a, s, z), window={size=2x2 stride=2x2}, select=ge, scatter=add\n}\n",
    );
    assert!(
        matches!(&s, ShapeError::Invalid(m) if m.contains("f32[4,4]")),
        "{s:?}"
    );
}

#[test]
fn entry_computation_layout_must_match_the_parameters() {
    let e = one_error(
        "HloModule m, entry_computation_layout={(f32[3]{0})->f32[2]{0}}\n\
         ENTRY main {\n a = f32[2] parameter(0)\n ROOT n = f32[2] negate(a)\n}\n",
    );
    assert_eq!(e.instruction, "a");
    assert!(matches!(e.kind, VerifyErrorKind::Structure(_)), "{e:?}");
}

#[test]
fn several_errors_are_all_reported_in_order() {
    let m = parse(
        "HloModule m\nENTRY main {\n a = f32[2,3] parameter(0)\n r = f32[7] reshape(a)\n \
         t = f32[3,3] transpose(a), dimensions={1,0}\n ROOT n = f32[2,3] negate(a)\n}\n",
    );
    let errs = verify_module(&m).unwrap_err();
    let names: Vec<&str> = errs.iter().map(|e| e.instruction.as_str()).collect();
    assert_eq!(names, ["r", "t"]);
    assert_eq!(errs[0].line, 4);
    assert_eq!(errs[1].line, 5);
}

#[test]
fn inference_of_dot_with_batch_dims_and_a_preferred_type() {
    let m = parse(
        "HloModule m\nENTRY main {\n a = bf16[7,2,3,5] parameter(0)\n b = bf16[7,5,3,4] parameter(1)\n \
         ROOT d = f32[7,2,4] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, \
         lhs_contracting_dims={2,3}, rhs_contracting_dims={2,1}\n}\n",
    );
    let c = m.entry();
    let s = infer_shape(&m, c, c.root).unwrap().unwrap();
    assert_eq!(tpusim::analysis::error::shape_text(&s), "f32[7,2,4]");
    assert!(verify_module(&m).is_ok());
}

#[test]
fn inference_of_batch_grouped_convolution() {
    // batch_group_count=4: output batch = 16 / 4; kernel output features 8 divisible by 4.
    let text = "HloModule m\nENTRY main {\n x = f32[16,8,8,4] parameter(0)\n k = f32[3,3,4,8] parameter(1)\n \
         ROOT c = f32[4,6,6,8] convolution(x, k), window={size=3x3}, \
         dim_labels=b01f_01io->b01f, batch_group_count=4\n}\n";
    let m = parse(text);
    let c = m.entry();
    let s = infer_shape(&m, c, c.root).unwrap().unwrap();
    assert_eq!(tpusim::analysis::error::shape_text(&s), "f32[4,6,6,8]");
    assert!(verify_module(&m).is_ok());
    let (_, s) = malformed(&text.replace("batch_group_count=4", "batch_group_count=3"));
    assert!(
        matches!(&s, ShapeError::Conv(m) if m.contains("batch_group_count 3")),
        "{s:?}"
    );
}

#[test]
fn programmatic_modules_with_an_empty_computation_do_not_panic() {
    use tpusim::ir::{CallRole, Computation, Instruction, Opcode, PrimitiveType, Shape};
    let mut m = parse(
        "HloModule m\nf {\n p = f32[4] parameter(0)\n ROOT n = f32[4] negate(p)\n}\n\
         ENTRY main {\n a = f32[4] parameter(0)\n ROOT c = f32[4] call(a), to_apply=f\n}\n",
    );
    // Empty the callee: no root, no instructions.
    let fid = m.comp_id("f").unwrap();
    m.computations[fid] = Computation::new("f");
    let errs = verify_module(&m).unwrap_err();
    assert!(errs.iter().any(|e| e.computation == "f"), "{errs:#?}");
    assert!(errs.iter().any(|e| e.instruction == "c"), "{errs:#?}");
    let c = tpusim::analysis::module_cost(&m);
    assert_eq!(c.flops, 0.0);
    // A fusion calling the empty computation is costed without panicking too.
    let entry = m.entry;
    let comp = &mut m.computations[entry];
    let a = comp.find("a").unwrap();
    let mut f = Instruction::new("fu", Opcode::Fusion, Shape::array(PrimitiveType::F32, &[4]));
    f.attrs.called.push((CallRole::Calls, fid));
    let id = comp.add(f, &[a]);
    comp.root = id;
    let c = tpusim::analysis::module_cost(&m);
    assert_eq!(c.flops, 0.0);
}
