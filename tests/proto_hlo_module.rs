//! For every `hlo_corpus/jax/*.hlo.pb`, the IR read from the proto equals the
//! IR parsed from its `.hlo` text twin (names, opcodes, shapes, layouts,
//! operands, attributes, entry layout).

mod proto_common;

use proto_common::{corpus_pbs, jax_corpus};
use tpusim::ir::Module;
use tpusim::proto::module_from_proto_bytes;

/// The text front end reports an absent stack-frame section as `Some("")`;
/// a proto has none. Both mean "no section".
fn norm(mut m: Module) -> Module {
    if m.stack_frames.as_deref() == Some("") {
        m.stack_frames = None;
    }
    m
}

/// First difference between two modules, for a readable failure message.
fn first_difference(a: &Module, b: &Module) -> String {
    if a.name != b.name {
        return format!("module name {:?} vs {:?}", a.name, b.name);
    }
    if a.attrs != b.attrs {
        return format!("module attrs\n  {:?}\nvs\n  {:?}", a.attrs, b.attrs);
    }
    if a.stack_frames != b.stack_frames {
        return format!("stack_frames {:?} vs {:?}", a.stack_frames, b.stack_frames);
    }
    if a.entry != b.entry {
        return format!("entry {} vs {}", a.entry, b.entry);
    }
    let an: Vec<&String> = a.computations.keys().collect();
    let bn: Vec<&String> = b.computations.keys().collect();
    if an != bn {
        return format!("computation names {an:?} vs {bn:?}");
    }
    for (name, ca) in &a.computations {
        let cb = &b.computations[name];
        if ca == cb {
            continue;
        }
        if ca.len() != cb.len() {
            return format!("{name}: {} vs {} instructions", ca.len(), cb.len());
        }
        for (&x, &y) in ca.order.iter().zip(&cb.order) {
            let (ix, iy) = (ca.instr(x), cb.instr(y));
            if ix != iy {
                return format!("{name}: instruction\n  {ix:?}\nvs\n  {iy:?}");
            }
            let ox: Vec<&str> = ca
                .operands(x)
                .iter()
                .map(|&o| ca.instr(o).name.as_str())
                .collect();
            let oy: Vec<&str> = cb
                .operands(y)
                .iter()
                .map(|&o| cb.instr(o).name.as_str())
                .collect();
            if ox != oy {
                return format!("{name}: {} operands {ox:?} vs {oy:?}", ix.name);
            }
        }
        return format!(
            "{name}: root {} vs {} / thread {:?} vs {:?}",
            ca.instr(ca.root).name,
            cb.instr(cb.root).name,
            ca.execution_thread,
            cb.execution_thread
        );
    }
    "modules differ (params?)".to_string()
}

#[test]
fn proto_ir_equals_text_ir_for_every_corpus_module() {
    let Some(dir) = jax_corpus("proto_ir_equals_text_ir_for_every_corpus_module") else {
        return;
    };
    let pbs = corpus_pbs(&dir);
    assert!(pbs.len() >= 10, "only {} corpus protos", pbs.len());
    let mut instructions = 0;
    for pb in &pbs {
        let txt = pb.with_extension(""); // x.hlo.pb -> x.hlo
        let src = std::fs::read_to_string(&txt).unwrap();
        let from_text = norm(
            tpusim::hlo::parse_module(&txt.display().to_string(), &src)
                .unwrap_or_else(|e| panic!("{e}")),
        );
        let bytes = std::fs::read(pb).unwrap();
        let from_proto =
            module_from_proto_bytes(&bytes).unwrap_or_else(|e| panic!("{}: {e}", pb.display()));
        assert!(
            from_proto == from_text,
            "{}: {}",
            pb.display(),
            first_difference(&from_proto, &from_text)
        );
        // parameters by number agree too (not part of Computation equality)
        for (name, c) in &from_proto.computations {
            let t = &from_text.computations[name];
            let pn: Vec<&str> = c.params.iter().map(|&p| c.instr(p).name.as_str()).collect();
            let tn: Vec<&str> = t.params.iter().map(|&p| t.instr(p).name.as_str()).collect();
            assert_eq!(pn, tn, "{name}");
        }
        instructions += from_proto.instruction_count();
    }
    eprintln!("{} modules, {instructions} instructions equal", pbs.len());
    assert!(instructions > 10_000);
}

#[test]
fn printed_proto_ir_reparses_to_the_same_ir() {
    let Some(dir) = jax_corpus("printed_proto_ir_reparses_to_the_same_ir") else {
        return;
    };
    for pb in corpus_pbs(&dir).iter().take(6) {
        let m = module_from_proto_bytes(&std::fs::read(pb).unwrap()).unwrap();
        let text = tpusim::hlo::print_module(&m);
        let back =
            norm(tpusim::hlo::parse_module("printed", &text).unwrap_or_else(|e| panic!("{e}")));
        assert!(
            back == m,
            "{}: {}",
            pb.display(),
            first_difference(&back, &m)
        );
    }
}

mod structural_errors {
    use prost::Message;
    use tpusim::proto::module_from_proto_bytes;
    use tpusim::proto::xla::{self, HloComputationProto, HloInstructionProto, HloModuleProto};

    fn f32_shape(dims: &[i64]) -> xla::ShapeProto {
        xla::ShapeProto {
            element_type: xla::PrimitiveType::F32 as i32,
            dimensions: dims.to_vec(),
            layout: Some(xla::LayoutProto {
                minor_to_major: (0..dims.len() as i64).rev().collect(),
                tail_padding_alignment_in_elements: 1,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn inst(id: i64, name: &str, op: &str, ops: &[i64]) -> HloInstructionProto {
        HloInstructionProto {
            id,
            name: name.into(),
            opcode: op.into(),
            shape: Some(f32_shape(&[8, 128])),
            operand_ids: ops.to_vec(),
            ..Default::default()
        }
    }

    fn module(insts: Vec<HloInstructionProto>, root: i64) -> HloModuleProto {
        HloModuleProto {
            name: "m".into(),
            entry_computation_name: "main".into(),
            entry_computation_id: 7,
            computations: vec![HloComputationProto {
                name: "main".into(),
                id: 7,
                root_id: root,
                instructions: insts,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn err(m: &HloModuleProto) -> String {
        module_from_proto_bytes(&m.encode_to_vec())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn good_module_with_tiles_and_large_ids() {
        let big = 7i64 << 32;
        let mut p = inst(big, "p", "parameter", &[]);
        p.shape = Some(xla::ShapeProto {
            layout: Some(xla::LayoutProto {
                minor_to_major: vec![1, 0],
                tiles: vec![
                    xla::TileProto {
                        dimensions: vec![8, 128],
                    },
                    xla::TileProto {
                        dimensions: vec![i64::MIN, 2],
                    },
                ],
                memory_space: 1,
                element_size_in_bits: 4,
                tail_padding_alignment_in_elements: 1024,
            }),
            ..f32_shape(&[8, 128])
        });
        let m = module(vec![p, inst(big + 1, "n", "negate", &[big])], big + 1);
        let ir = module_from_proto_bytes(&m.encode_to_vec()).unwrap();
        let c = ir.entry();
        let a = c.instr(c.params[0]).shape.as_array().unwrap().clone();
        let l = a.layout.unwrap();
        assert_eq!(l.tiles.len(), 2);
        assert_eq!(l.tiles[0].dims.as_slice(), &[8, 128]);
        assert_eq!(l.tiles[1].dims.as_slice(), &[-1, 2]);
        assert_eq!(
            (
                l.memory_space,
                l.element_size_in_bits,
                l.tail_padding_alignment
            ),
            (1, 4, 1024)
        );
        assert_eq!(c.instr(c.root).name, "n");
        assert_eq!(c.operands(c.root).len(), 1);
        // the printed text reads back to the same IR
        let text = tpusim::hlo::print_module(&ir);
        let back = tpusim::hlo::parse_module("printed", &text).unwrap();
        assert!(back.entry() == ir.entry(), "{text}");
    }

    #[test]
    fn custom_call_side_effect_is_typed_printed_where_xla_does_and_kept() {
        let with = |side_effect: bool| {
            let mut cc = inst(2, "cc", "custom-call", &[1]);
            cc.custom_call_target = "foo".into();
            cc.custom_call_has_side_effect = side_effect;
            cc.custom_call_api_version = 4;
            let m = module(
                vec![
                    inst(1, "p", "parameter", &[]),
                    cc,
                    inst(3, "n", "negate", &[1]),
                ],
                3,
            );
            module_from_proto_bytes(&m.encode_to_vec()).unwrap()
        };
        let ir = with(true);
        let c = ir.entry();
        let a = &c.instr(c.find("cc").unwrap()).attrs;
        assert_eq!(a.custom_call_has_side_effect, Some(true));
        assert_eq!(a.other("custom_call_has_side_effect"), None);
        let text = tpusim::hlo::print_module(&ir);
        assert!(
            text.contains(
                "custom_call_target=\"foo\", custom_call_has_side_effect=true, \
                 api_version=API_VERSION_TYPED_FFI"
            ),
            "{text}"
        );
        let back = tpusim::hlo::parse_module("printed", &text).unwrap();
        assert!(back.entry() == ir.entry(), "{text}");
        // unused, yet kept by the passes only when it has a side effect
        for (side_effect, kept) in [(true, true), (false, false)] {
            let out = tpusim::passes::compile(&with(side_effect), &Default::default())
                .unwrap()
                .module;
            let printed = tpusim::hlo::print_module(&out);
            assert_eq!(printed.contains("custom-call"), kept, "{printed}");
        }
    }

    #[test]
    fn entry_by_name_when_the_id_is_absent() {
        // an old writer that never set entry_computation_id (reads as 0):
        // computation id 0 is a callee, the name says which is the entry
        let callee = HloComputationProto {
            name: "callee".into(),
            id: 0,
            root_id: 1,
            instructions: vec![inst(1, "p", "parameter", &[])],
            ..Default::default()
        };
        let mut call = inst(3, "c", "call", &[2]);
        call.called_computation_ids = vec![0];
        let main = HloComputationProto {
            name: "main".into(),
            id: 1,
            root_id: 3,
            instructions: vec![inst(2, "x", "parameter", &[]), call],
            ..Default::default()
        };
        let mut m = HloModuleProto {
            name: "m".into(),
            entry_computation_name: "main".into(),
            computations: vec![callee, main],
            ..Default::default()
        };
        let ir = module_from_proto_bytes(&m.encode_to_vec()).unwrap();
        assert_eq!(ir.entry().name, "main");
        let c = ir.entry();
        assert_eq!(
            c.instr(c.root).attrs.called.as_slice(),
            &[(tpusim::ir::CallRole::ToApply, 0)]
        );
        // with the id set, the id wins
        m.entry_computation_id = 1;
        m.entry_computation_name.clear();
        let ir = module_from_proto_bytes(&m.encode_to_vec()).unwrap();
        assert_eq!(ir.entry().name, "main");
    }

    #[test]
    fn clear_errors() {
        let e = err(&module(vec![inst(1, "a", "negate", &[5])], 1));
        assert_eq!(
            e,
            "computation `main`, instruction `a`: operand id 5 is not an earlier instruction of this computation"
        );
        let e = err(&module(vec![inst(1, "a", "parameter", &[])], 9));
        assert_eq!(
            e,
            "computation `main`: root id 9 is not one of its instructions"
        );
        let e = err(&module(vec![inst(1, "a", "frobnicate", &[])], 1));
        assert_eq!(
            e,
            "computation `main`, instruction `a`: unknown opcode 'frobnicate'"
        );
        let e = err(&module(
            vec![inst(1, "a", "parameter", &[]), inst(2, "a", "negate", &[1])],
            2,
        ));
        assert_eq!(
            e,
            "computation `main`, instruction `a`: instruction name is used twice"
        );
        let mut bad_layout = inst(1, "a", "parameter", &[]);
        bad_layout
            .shape
            .as_mut()
            .unwrap()
            .layout
            .as_mut()
            .unwrap()
            .minor_to_major = vec![0, 0];
        let e = err(&module(vec![bad_layout], 1));
        assert!(
            e.ends_with("layout minor_to_major is not a permutation of the dimensions"),
            "{e}"
        );
        let mut p1 = inst(1, "a", "parameter", &[]);
        p1.parameter_number = 1;
        let e = err(&module(vec![p1], 1));
        assert!(e.contains("parameter numbers must be 0..0"), "{e}");
        let mut call = inst(2, "c", "call", &[1]);
        call.called_computation_ids = vec![42];
        let e = err(&module(vec![inst(1, "a", "parameter", &[]), call], 2));
        assert!(
            e.ends_with("called computation id 42 does not exist"),
            "{e}"
        );
        let mut odd = inst(1, "a", "parameter", &[]);
        odd.shape.as_mut().unwrap().element_type = 99;
        let e = err(&module(vec![odd], 1));
        assert!(e.ends_with("unknown element type number 99"), "{e}");
    }
}

#[test]
fn modules_from_binary_reads_every_kind() {
    use tpusim::proto::{
        modules_from_binary, read_hlo_module_proto, write_module_tuning, write_tuning_set,
        InputKind, ProtoError,
    };
    let Some(dir) = jax_corpus("modules_from_binary_reads_every_kind") else {
        return;
    };
    let bytes = std::fs::read(dir.join("mlp_train.hlo.pb")).unwrap();
    let direct = module_from_proto_bytes(&bytes).unwrap();
    let one = modules_from_binary(&bytes).unwrap();
    assert!(one.len() == 1 && one[0] == direct);
    let p = read_hlo_module_proto(&bytes).unwrap();
    let layout = write_module_tuning(&proto_common::synthetic_layout(p.clone(), 3, 1)).unwrap();
    let from_layout = modules_from_binary(&layout).unwrap();
    assert!(from_layout.len() == 1 && from_layout[0] == direct);
    let tiles = write_tuning_set(&proto_common::synthetic_tiles(vec![p.clone(), p], 2, 1)).unwrap();
    let from_tiles = modules_from_binary(&tiles).unwrap();
    assert!(from_tiles.len() == 2 && from_tiles.iter().all(|m| *m == direct));
    let text = std::fs::read(dir.join("mlp_train.hlo")).unwrap();
    match modules_from_binary(&text) {
        Err(ProtoError::WrongKind { found, .. }) => assert_eq!(found, InputKind::HloText),
        other => panic!("{:?}", other.map(|v| v.len())),
    }
}
