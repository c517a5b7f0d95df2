//! IR → HloModuleProto → IR: what the writer stores comes back unchanged (metadata,
//! custom-call side effects and other verbatim attributes aside, which the writer leaves
//! out).

use prost::Message;
use std::path::Path;

fn strip(m: &mut tpusim::ir::Module) {
    m.stack_frames = None;
    for c in m.computations.values_mut() {
        let order = c.order.clone();
        for n in order {
            let a = &mut c.instr_mut(n).attrs;
            a.metadata = None;
            a.backend_config = None;
            a.sharding = None;
            a.frontend_attributes = None;
            a.other.clear();
            a.custom_call_has_side_effect = None;
            if a.literal.is_some() {
                a.literal = None;
            }
        }
    }
    m.attrs = Default::default();
}

#[test]
fn samples_round_trip_through_the_proto_writer() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("hlo_samples");
    let mut n = 0;
    for f in [
        "mlp_train.hlo",
        "resnet18_infer_b8.hlo",
        "bert_base_infer_b8s128.hlo",
        "resnet50_train_b8.optimized.hlo",
    ] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        let m = tpusim::hlo::parse_module(f, &text).unwrap();
        // Also a compiled module (tiles, fusions, bitcasts).
        let c = tpusim::passes::compile(&m, &Default::default())
            .unwrap()
            .module;
        for mut x in [m, c] {
            let bytes = tpusim::proto::module_to_proto(&x).encode_to_vec();
            let mut y = tpusim::proto::module_from_proto_bytes(&bytes).unwrap();
            strip(&mut x);
            strip(&mut y);
            assert!(x == y, "{f}: module differs after the proto round trip");
            n += 1;
        }
    }
    assert_eq!(n, 8);
}
