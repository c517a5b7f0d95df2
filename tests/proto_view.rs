//! The fast zero-copy `ModuleView` decoder agrees with the prost messages on
//! every corpus module, field by field.

mod proto_common;

use proto_common::{corpus_pbs, jax_corpus};
use tpusim::proto::xla;
use tpusim::proto::{read_hlo_module_proto, ModuleView, ProtoError, ShapeView};

fn shape_of(s: &Option<xla::ShapeProto>) -> Option<ShapeView> {
    s.as_ref().map(ShapeView::from)
}

#[test]
fn view_agrees_with_prost_on_corpus() {
    let Some(dir) = jax_corpus("view_agrees_with_prost_on_corpus") else {
        return;
    };
    let mut checked = 0usize;
    let mut attrs = 0usize;
    for path in corpus_pbs(&dir) {
        let bytes = std::fs::read(&path).unwrap();
        let p = read_hlo_module_proto(&bytes).unwrap();
        let v = ModuleView::decode(&bytes).unwrap();
        let at = path.display().to_string();
        assert_eq!(v.name, p.name, "{at}");
        assert_eq!(v.entry_computation_name, p.entry_computation_name);
        assert_eq!(
            (v.id, v.entry_computation_id),
            (p.id, p.entry_computation_id)
        );
        let hps = p.host_program_shape.as_ref().unwrap();
        let vhps = v.host_program_shape.as_ref().unwrap();
        assert_eq!(
            vhps.parameters,
            hps.parameters
                .iter()
                .map(ShapeView::from)
                .collect::<Vec<_>>()
        );
        assert_eq!(vhps.result, shape_of(&hps.result));
        assert_eq!(vhps.parameter_names, hps.parameter_names);
        assert_eq!(v.computations.len(), p.computations.len());
        assert_eq!(v.entry_index(), Some(p.computations.len() - 1), "{at}");
        for (vc, pc) in v.computations.iter().zip(&p.computations) {
            assert_eq!(vc.name, pc.name);
            assert_eq!((vc.id, vc.root_id), (pc.id, pc.root_id));
            assert_eq!(vc.is_fusion_computation, pc.is_fusion_computation);
            let ps = pc.program_shape.as_ref().unwrap();
            let vps = vc.program_shape().unwrap().unwrap();
            assert_eq!(vps.result, shape_of(&ps.result));
            assert_eq!(
                vps.parameters,
                ps.parameters
                    .iter()
                    .map(ShapeView::from)
                    .collect::<Vec<_>>()
            );
            assert_eq!(vc.instruction_count(), pc.instructions.len());
            let vis: Vec<_> = vc.instructions().collect::<Result<_, _>>().unwrap();
            for (vi, pi) in vis.iter().zip(&pc.instructions) {
                let w = format!("{at} {} {}", pc.name, pi.name);
                assert_eq!(vi.name, pi.name, "{w}");
                assert_eq!(vi.opcode, pi.opcode, "{w}");
                assert_eq!(vi.shape().unwrap(), shape_of(&pi.shape), "{w}");
                assert_eq!(vi.id, pi.id, "{w}");
                assert_eq!(vi.parameter_number, pi.parameter_number, "{w}");
                assert_eq!(vi.tuple_index, pi.tuple_index, "{w}");
                assert_eq!(vi.dimensions.as_slice(), pi.dimensions.as_slice(), "{w}");
                assert_eq!(vi.operand_ids.as_slice(), pi.operand_ids.as_slice(), "{w}");
                assert_eq!(
                    vi.called_computation_ids.as_slice(),
                    pi.called_computation_ids.as_slice()
                );
                assert_eq!(
                    vi.control_predecessor_ids.as_slice(),
                    pi.control_predecessor_ids.as_slice()
                );
                // attributes decoded on demand equal prost's
                assert_eq!(
                    vi.message::<xla::Window>(15).unwrap().map(Box::new),
                    pi.window
                );
                assert_eq!(
                    vi.message::<xla::ConvolutionDimensionNumbers>(16)
                        .unwrap()
                        .map(Box::new),
                    pi.convolution_dimension_numbers
                );
                assert_eq!(
                    vi.messages::<xla::hlo_instruction_proto::SliceDimensions>(17)
                        .unwrap(),
                    pi.slice_dimensions
                );
                assert_eq!(
                    vi.message::<xla::PaddingConfig>(21).unwrap().map(Box::new),
                    pi.padding_config
                );
                assert_eq!(
                    vi.message::<xla::DotDimensionNumbers>(30)
                        .unwrap()
                        .map(Box::new),
                    pi.dot_dimension_numbers
                );
                assert_eq!(
                    vi.message::<xla::GatherDimensionNumbers>(33)
                        .unwrap()
                        .map(Box::new),
                    pi.gather_dimension_numbers
                );
                assert_eq!(
                    vi.message::<xla::ScatterDimensionNumbers>(48)
                        .unwrap()
                        .map(Box::new),
                    pi.scatter_dimension_numbers
                );
                assert_eq!(vi.ints(34).unwrap(), pi.gather_slice_sizes);
                assert_eq!(vi.ints(20).unwrap(), pi.dynamic_slice_sizes);
                assert_eq!(vi.ints(32).unwrap(), pi.fft_length);
                assert_eq!(vi.int(31).unwrap() as i32, pi.fft_type);
                assert_eq!(vi.string(11).unwrap(), pi.fusion_kind);
                assert_eq!(vi.string(63).unwrap(), pi.comparison_direction);
                assert_eq!(vi.string(72).unwrap(), pi.comparison_type);
                assert_eq!(vi.float(24).unwrap(), pi.epsilon);
                assert_eq!(vi.int(25).unwrap(), pi.feature_index);
                assert_eq!(vi.int(50).unwrap(), pi.feature_group_count);
                assert_eq!(vi.int(58).unwrap(), pi.batch_group_count);
                assert_eq!(vi.flag(60).unwrap(), pi.is_stable);
                assert_eq!(vi.flag(67).unwrap(), pi.indices_are_sorted);
                assert_eq!(vi.flag(69).unwrap(), pi.unique_indices);
                assert_eq!(vi.bytes(43).unwrap(), pi.backend_config.as_slice());
                let lit = vi.message::<xla::LiteralProto>(8).unwrap();
                assert_eq!(
                    lit.map(|l| prost::Message::encode_to_vec(&l)),
                    pi.literal
                        .as_ref()
                        .map(|l| prost::Message::encode_to_vec(l.as_ref()))
                );
                attrs += vi.other.len();
                checked += 1;
            }
        }
    }
    eprintln!("{checked} instructions, {attrs} other fields checked");
    assert!(checked > 10_000, "only {checked} instructions");
}

#[test]
fn malformed_view_errors_name_the_place() {
    use prost::Message;
    let m = xla::HloModuleProto {
        name: "m".into(),
        computations: vec![xla::HloComputationProto {
            name: "main".into(),
            instructions: vec![xla::HloInstructionProto {
                name: "add.1".into(),
                opcode: "add".into(),
                operand_ids: vec![1, 2, 3],
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut bytes = m.encode_to_vec();
    // the packed operand list is the last thing written: break its last varint
    let last = bytes.len() - 1;
    bytes[last] |= 0x80;
    // the view is lazy: the module splits fine, the instruction does not
    let v = ModuleView::decode(&bytes).unwrap();
    let err = v.computations[0].instruction(0).unwrap_err();
    assert!(matches!(err, ProtoError::Malformed { .. }), "{err:?}");
    let expected = "not a valid xla.HloModuleProto (truncated or corrupt file?): \
         computation #0 `main`, instruction #0 `add.1`: truncated varint at byte 3";
    assert_eq!(err.to_string(), expected);
    // the IR reader reports the same error
    let err = tpusim::proto::module_from_proto_bytes(&bytes).unwrap_err();
    assert_eq!(err.to_string(), expected);
    // a cut file
    let err = ModuleView::decode(&bytes[..bytes.len() - 4])
        .unwrap_err()
        .to_string();
    assert!(err.contains("runs past the end"), "{err}");
}
