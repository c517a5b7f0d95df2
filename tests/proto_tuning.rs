//! Binary inputs: detection, HloModuleProto decoding against the spec's worked
//! example, TpuGraphs tuning data round trip and the inspect summary.

mod proto_common;

use std::collections::BTreeMap;

use proto_common::{corpus_pbs, jax_corpus, synthetic_layout, synthetic_tiles};
use tpusim::proto::inspect::ConfigKind;
use tpusim::proto::xla::{self, HloModuleProto};
use tpusim::proto::{
    detect, flattened_nodes, inspect_bytes, read_hlo_module_proto, read_module_tuning, read_tuning,
    read_tuning_file, read_tuning_set, write_module_tuning, write_tuning_file, write_tuning_set,
    InputKind, ModuleTuning, ProtoError, Tuning,
};

fn read_pb(name: &str) -> Option<(Vec<u8>, HloModuleProto)> {
    let dir = jax_corpus(&format!("the test reading {name}"))?;
    let bytes = std::fs::read(dir.join(name)).expect("corpus file readable");
    let m = read_hlo_module_proto(&bytes).expect("corpus module decodes");
    Some((bytes, m))
}

#[test]
fn detects_every_corpus_file() {
    let Some(dir) = jax_corpus("detects_every_corpus_file") else {
        return;
    };
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.to_string_lossy().to_string();
        let bytes = std::fs::read(&path).unwrap();
        let expected = if name.ends_with(".hlo.pb") {
            InputKind::HloModuleProto
        } else if name.ends_with(".hlo") {
            InputKind::HloText
        } else {
            continue;
        };
        assert_eq!(detect(&bytes), expected, "{name}");
        n += 1;
    }
    assert!(n >= 20, "only {n} corpus files");
}

/// The worked example of spec section 13.2 (mlp_train.hlo.pb).
#[test]
fn mlp_train_matches_spec_example() {
    let Some((_, m)) = read_pb("mlp_train.hlo.pb") else {
        return;
    };
    assert_eq!(m.name, "jit__lambda");
    assert_eq!(m.id, 6);
    assert_eq!(m.entry_computation_name, "main.3");
    assert_eq!(m.entry_computation_id, 2);
    let comps: Vec<(&str, i64, i64, usize)> = m
        .computations
        .iter()
        .map(|c| (c.name.as_str(), c.id, c.root_id, c.instructions.len()))
        .collect();
    assert_eq!(
        comps,
        vec![
            ("relu.1", 0, 3, 4),
            ("region_0.2", 1, (1 << 32) + 2, 3),
            ("main.3", 2, (2 << 32) + 21, 22)
        ]
    );
    let mut hist = BTreeMap::new();
    for i in flattened_nodes(&m) {
        *hist.entry(i.opcode.as_str()).or_insert(0) += 1;
    }
    let expected: BTreeMap<&str, i32> = [
        ("parameter", 6),
        ("constant", 5),
        ("dot", 5),
        ("broadcast", 3),
        ("transpose", 2),
        ("maximum", 1),
        ("add", 1),
        ("call", 1),
        ("reduce", 1),
        ("divide", 1),
        ("compare", 1),
        ("select", 1),
        ("tuple", 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(hist, expected);

    let entry = &m.computations[2].instructions;
    let x = &entry[0];
    assert_eq!(
        (x.id, x.name.as_str(), x.parameter_number),
        (8589934592, "x.1", 2)
    );
    let dot = &entry[2];
    assert_eq!(dot.operand_ids, vec![8589934592, 8589934593]);
    let dd = dot.dot_dimension_numbers.as_ref().unwrap();
    assert_eq!(
        (
            dd.lhs_contracting_dimensions.as_slice(),
            dd.rhs_contracting_dimensions.as_slice()
        ),
        (&[1][..], &[0][..])
    );
    let call = &entry[3];
    assert_eq!(call.called_computation_ids, vec![0]);
    let reduce = entry.iter().find(|i| i.name == "reduce_sum.7").unwrap();
    assert_eq!(reduce.dimensions, vec![0, 1]);
    assert_eq!(reduce.called_computation_ids, vec![1]);
    let gt = entry.iter().find(|i| i.name == "gt.1").unwrap();
    assert_eq!(
        (
            gt.comparison_direction.as_str(),
            gt.comparison_type.as_str()
        ),
        ("GT", "FLOAT")
    );
    let tr = entry.iter().find(|i| i.name == "transpose.3").unwrap();
    let s = tr.shape.as_ref().unwrap();
    assert_eq!(s.element_type, xla::PrimitiveType::F32 as i32);
    assert_eq!(s.dimensions, vec![512, 1024]);
    assert_eq!(s.layout.as_ref().unwrap().minor_to_major, vec![0, 1]);
    assert_eq!(
        s.layout
            .as_ref()
            .unwrap()
            .tail_padding_alignment_in_elements,
        1
    );
    // scalar: layout present but empty minor_to_major; tuple: no layout
    let c = entry.iter().find(|i| i.name == "constant.9").unwrap();
    let cs = c.shape.as_ref().unwrap();
    assert!(cs.dimensions.is_empty() && cs.layout.as_ref().unwrap().minor_to_major.is_empty());
    assert_eq!(c.literal.as_ref().unwrap().f32s, vec![0.0]);
    let root = entry.last().unwrap();
    assert_eq!(root.id, (2 << 32) + 21);
    let rs = root.shape.as_ref().unwrap();
    assert_eq!(rs.element_type, xla::PrimitiveType::Tuple as i32);
    assert!(rs.layout.is_none());
    assert_eq!(rs.tuple_shapes.len(), 3);
    let hps = m.host_program_shape.as_ref().unwrap();
    let dims: Vec<Vec<i64>> = hps
        .parameters
        .iter()
        .map(|p| p.dimensions.clone())
        .collect();
    assert_eq!(dims, vec![vec![512, 1024], vec![1024, 10], vec![64, 512]]);
}

/// A module small enough to build by hand (no corpus needed).
fn hand_module() -> HloModuleProto {
    let shape = |dims: Vec<i64>| xla::ShapeProto {
        element_type: xla::PrimitiveType::F32 as i32,
        layout: Some(xla::LayoutProto {
            minor_to_major: (0..dims.len() as i64).rev().collect(),
            tiles: vec![xla::TileProto {
                dimensions: vec![8, 128],
            }],
            ..Default::default()
        }),
        is_dynamic_dimension: vec![false; dims.len()],
        dimensions: dims,
        ..Default::default()
    };
    let inst = |id: i64, name: &str, op: &str, ops: Vec<i64>| xla::HloInstructionProto {
        id,
        name: name.into(),
        opcode: op.into(),
        shape: Some(shape(vec![8, 128])),
        operand_ids: ops,
        ..Default::default()
    };
    HloModuleProto {
        name: "hand".into(),
        entry_computation_name: "main".into(),
        computations: vec![xla::HloComputationProto {
            name: "main".into(),
            instructions: vec![
                inst(0, "p0", "parameter", vec![]),
                inst(1, "t", "transpose", vec![0]),
                inst(2, "d", "dot", vec![0, 1]),
            ],
            root_id: 2,
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn hand_made_layout_round_trip_and_inspect() {
    let mut m = synthetic_layout(hand_module(), 9, 42);
    assert_eq!(m.config_index_to_node, vec![1, 2]);
    m.fingerprint = 0xfeed;
    let bytes = write_module_tuning(&m).unwrap();
    assert_eq!(detect(&bytes), InputKind::ModuleTuningData);
    let back = read_module_tuning(&bytes).unwrap();
    assert_eq!(back, m);
    assert_eq!(
        write_module_tuning(&back).unwrap(),
        bytes,
        "deterministic bytes"
    );

    let s = inspect_bytes(&bytes).unwrap();
    assert_eq!(s.kind, InputKind::ModuleTuningData);
    let ms = &s.modules[0];
    assert_eq!(ms.name.as_deref(), Some("hand"));
    assert_eq!((ms.computations, ms.instructions, ms.runs), (1, 3, 9));
    assert_eq!(ms.config_kind, ConfigKind::Layout);
    // run 3 is an error, run 5 unprofiled (see synthetic_layout)
    assert_eq!((ms.errors, ms.unprofiled, ms.usable), (1, 1, 7));
    assert_eq!(ms.default_run, Some(0));
    assert_eq!(ms.default_time_ns, m.runs[0].compute_time_ns());
    let times: Vec<i64> = m.runs.iter().filter_map(|r| r.measured()).collect();
    let r = ms.runtime.unwrap();
    assert_eq!(r.min_ns, *times.iter().min().unwrap());
    assert_eq!(r.max_ns, *times.iter().max().unwrap());
    assert_eq!(m.runs[r.min_run].compute_time_ns(), Some(r.min_ns));
    let ops: Vec<(u64, &str, &str)> = ms
        .configurable_nodes
        .iter()
        .map(|n| {
            (
                n.node,
                n.name.as_deref().unwrap(),
                n.opcode.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(ops, vec![(1, "t", "transpose"), (2, "d", "dot")]);
    assert!(ms.warnings.is_empty(), "{:?}", ms.warnings);
    let text = s.to_string();
    assert!(
        text.contains("configurable nodes: 2 (dot 1, transpose 1)"),
        "{text}"
    );
    assert!(text.contains("default: run 0,"), "{text}");
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["kind"], "module_tuning_data");
    assert_eq!(json["modules"][0]["configurable_nodes"][1]["opcode"], "dot");
}

#[test]
fn inspect_reports_inconsistencies() {
    let mut m = synthetic_layout(hand_module(), 3, 1);
    m.config_index_to_node.push(99);
    for r in &mut m.runs {
        r.is_default = false;
    }
    let s = inspect_bytes(&write_module_tuning(&m).unwrap()).unwrap();
    let w = &s.modules[0].warnings;
    assert!(
        w.iter()
            .any(|w| w.contains("node 99 is outside the module (3 nodes)")),
        "{w:?}"
    );
    assert!(w.iter().any(|w| w == "no default run"), "{w:?}");
    assert!(
        w.iter()
            .any(|w| w.contains("2 layout nodes but 3 config_index_to_node")),
        "{w:?}"
    );
    assert_eq!(s.modules[0].default_run, None);
}

#[test]
fn wrong_kind_is_reported() {
    let bytes = hand_module_bytes();
    match read_tuning(&bytes) {
        Err(ProtoError::WrongKind { found, .. }) => assert_eq!(found, InputKind::HloModuleProto),
        other => panic!("expected WrongKind, got {other:?}"),
    }
    let err = read_tuning(b"HloModule m\nENTRY e { ROOT p = f32[] parameter(0) }")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "expected tpu_graphs.ModuleTuningData, but the content looks like HLO text"
    );
}

fn hand_module_bytes() -> Vec<u8> {
    use prost::Message;
    hand_module().encode_to_vec()
}

#[test]
fn corpus_layout_round_trip() {
    let Some(dir) = jax_corpus("corpus_layout_round_trip") else {
        return;
    };
    for path in corpus_pbs(&dir) {
        let m = read_hlo_module_proto(&std::fs::read(&path).unwrap()).unwrap();
        let t = synthetic_layout(m, 30, 7);
        let bytes = write_module_tuning(&t).unwrap();
        assert_eq!(
            detect(&bytes),
            InputKind::ModuleTuningData,
            "{}",
            path.display()
        );
        let back = read_module_tuning(&bytes).unwrap();
        assert!(back == t, "{}: round trip differs", path.display());
        let s = inspect_bytes(&bytes).unwrap();
        assert_eq!(
            s.modules[0].configurable_nodes.len(),
            t.config_index_to_node.len()
        );
        assert!(
            s.modules[0].warnings.is_empty(),
            "{:?}",
            s.modules[0].warnings
        );
    }
}

#[test]
fn corpus_tile_set_round_trip_via_file() {
    let Some(dir) = jax_corpus("corpus_tile_set_round_trip_via_file") else {
        return;
    };
    let modules: Vec<HloModuleProto> = corpus_pbs(&dir)
        .iter()
        .take(5)
        .map(|p| read_hlo_module_proto(&std::fs::read(p).unwrap()).unwrap())
        .collect();
    let set = synthetic_tiles(modules, 12, 3);
    let bytes = write_tuning_set(&set).unwrap();
    assert_eq!(detect(&bytes), InputKind::TuningData);
    assert!(
        read_tuning_set(&bytes).unwrap() == set,
        "round trip differs"
    );

    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("tiles.pb");
    write_tuning_file(&path, &Tuning::Set(set.clone())).unwrap();
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("tiles.pb")],
        "no temp file left"
    );
    let back = read_tuning_file(&path).unwrap();
    assert!(back == Tuning::Set(set.clone()), "file round trip differs");

    let s = tpusim::proto::summarize(&back);
    assert_eq!((s.num_modules, s.total_runs), (5, 60));
    assert_eq!(s.total_errors, 5 * 2); // runs 4 and 9 of each kernel
    for (ms, m) in s.modules.iter().zip(&set.modules) {
        assert_eq!(ms.config_kind, ConfigKind::Tile);
        let expect = m.runs.iter().filter(|r| r.usable_tile()).count();
        assert_eq!(ms.usable, expect);
        assert!(ms.configurable_nodes.is_empty());
    }
}

#[test]
fn missing_file_error_names_the_file() {
    let err = read_tuning_file(std::path::Path::new("/nonexistent/x.pb")).unwrap_err();
    assert!(err.to_string().starts_with("/nonexistent/x.pb: "), "{err}");
}

#[test]
fn single_module_layout_file_from_tuning_enum() {
    let t = Tuning::Module(ModuleTuning {
        module: Some(hand_module()),
        ..ModuleTuning::default()
    });
    let bytes = tpusim::proto::write_tuning(&t).unwrap();
    // a module without runs: detected by its module payload alone
    assert_eq!(detect(&bytes), InputKind::ModuleTuningData);
    assert_eq!(read_tuning(&bytes).unwrap(), t);
}

#[test]
fn nan_constants_compare_equal() {
    let mut m = hand_module();
    m.computations[0].instructions[0].literal = Some(Box::new(xla::LiteralProto {
        f32s: vec![f32::NAN],
        ..Default::default()
    }));
    let t = ModuleTuning {
        module: Some(m.clone()),
        ..ModuleTuning::default()
    };
    assert!(read_module_tuning(&write_module_tuning(&t).unwrap()).unwrap() == t);
    let mut other = t.clone();
    other.module.as_mut().unwrap().computations[0].instructions[0].name = "q".into();
    assert!(other != t);
}
