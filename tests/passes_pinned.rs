//! Pins the output of the compiler passes on the shared JAX corpus: for the default and a
//! few random layout configurations of every model, a checksum of the kernel list (JSON)
//! and of the printed compiled module, and the counters (kernels, copies, bitcasts,
//! fusions, output instructions). The values were recorded before the passes were
//! optimised for speed; any change to what the passes produce fails here. On a mismatch
//! the test prints the complete table of current values (to re-pin after an intended
//! change of behaviour or of the HLO printer).

use std::path::{Path, PathBuf};

use tpusim::hlo::{parse_module, print_module};
use tpusim::passes::{CompilationConfig, PreparedModule};

fn shared() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if p.join("hlo_corpus").is_dir() {
        return Some(p);
    }
    std::env::var_os("TPUSIM_SHARED")
        .map(PathBuf::from)
        .filter(|p| p.join("hlo_corpus").is_dir())
}

/// 64-bit FNV-1a (stable across platforms and Rust versions).
fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// (model, seed (None = default config), kernels, copies, bitcasts, fusions,
/// output instructions, kernels-JSON checksum, module-text checksum).
type Row = (
    &'static str,
    Option<u64>,
    usize,
    usize,
    usize,
    usize,
    usize,
    u64,
    u64,
);

const MODELS: &[&str] = &[
    "bert_base_infer_b8s128",
    "bert_bf16_infer_b16s128",
    "bert_small_train_b8s128",
    "effnet_b0_infer_b8",
    "effnet_b0_train_b4",
    "lstm_train",
    "misc_ops",
    "mlp_train",
    "resnet18_bf16_infer_b16",
    "resnet18_infer_b8",
    "resnet50_infer_b4",
    "resnet50_train_b8",
];
const SEEDS: &[u64] = &[0, 1, 7];

const PINNED: &[Row] = &[
    (
        "bert_base_infer_b8s128",
        None,
        78,
        12,
        74,
        66,
        893,
        0x1a00a046058046ad,
        0xc3b119427fde0d41,
    ),
    (
        "bert_base_infer_b8s128",
        Some(0),
        122,
        72,
        58,
        95,
        979,
        0xd44688ed22954334,
        0xfb0c8ec5b2041953,
    ),
    (
        "bert_base_infer_b8s128",
        Some(1),
        127,
        78,
        47,
        103,
        1001,
        0x7a06e5957d3b8d55,
        0x7f7d6eb513ccb0a4,
    ),
    (
        "bert_base_infer_b8s128",
        Some(7),
        124,
        75,
        51,
        105,
        1011,
        0x2c6a09e7bfbb4a6c,
        0xdd9a9dfb4ac7b68c,
    ),
    (
        "bert_bf16_infer_b16s128",
        None,
        41,
        6,
        38,
        38,
        508,
        0x5c9bd67261b7d42b,
        0x5004c3bab1532629,
    ),
    (
        "bert_bf16_infer_b16s128",
        Some(0),
        62,
        35,
        24,
        53,
        557,
        0x2637ac6e99e58ea7,
        0xee3ce13e01aa0c89,
    ),
    (
        "bert_bf16_infer_b16s128",
        Some(1),
        65,
        42,
        26,
        58,
        569,
        0x575f0b6efb903066,
        0xad673fe3f5cb8fbe,
    ),
    (
        "bert_bf16_infer_b16s128",
        Some(7),
        66,
        40,
        27,
        56,
        564,
        0x11784fcb6f6e9096,
        0x6260b098b7d43251,
    ),
    (
        "bert_small_train_b8s128",
        None,
        244,
        20,
        161,
        225,
        3362,
        0xfc4ae2247251ef34,
        0x1b80dc1ea99edfc1,
    ),
    (
        "bert_small_train_b8s128",
        Some(0),
        391,
        179,
        104,
        322,
        3665,
        0xe542d94688fc0cfe,
        0xdfc30523e26f1947,
    ),
    (
        "bert_small_train_b8s128",
        Some(1),
        388,
        179,
        92,
        318,
        3666,
        0xde007a4145ed6dcf,
        0x5dc9478c42efc242,
    ),
    (
        "bert_small_train_b8s128",
        Some(7),
        364,
        166,
        96,
        306,
        3721,
        0xda340dc8717c47b9,
        0xfd56b3a9d9e81754,
    ),
    (
        "effnet_b0_infer_b8",
        None,
        115,
        1,
        32,
        97,
        1091,
        0xdf9fa12839c5416c,
        0x3d8997f9c55a6058,
    ),
    (
        "effnet_b0_infer_b8",
        Some(0),
        199,
        89,
        20,
        135,
        1259,
        0x41e5a67e2f8f693c,
        0x435432df08548194,
    ),
    (
        "effnet_b0_infer_b8",
        Some(1),
        188,
        74,
        22,
        121,
        1212,
        0x3dcb5910dab263a5,
        0xeefce28981e7d71a,
    ),
    (
        "effnet_b0_infer_b8",
        Some(7),
        181,
        66,
        19,
        120,
        1201,
        0x4b75eeb6c37cb900,
        0x64f533d6cb1c93d5,
    ),
    (
        "effnet_b0_train_b4",
        None,
        531,
        143,
        97,
        422,
        3931,
        0x10ccb3bd4eccfb51,
        0x1d68a43da44c2b2f,
    ),
    (
        "effnet_b0_train_b4",
        Some(0),
        829,
        405,
        60,
        514,
        4533,
        0xdf453caf02649af3,
        0x3e0051fc4bf134c7,
    ),
    (
        "effnet_b0_train_b4",
        Some(1),
        809,
        383,
        72,
        503,
        4411,
        0xa05f25aab0aacc34,
        0xc3d7c2e17fa49a4f,
    ),
    (
        "effnet_b0_train_b4",
        Some(7),
        801,
        365,
        62,
        501,
        4463,
        0x60659f12b99f2800,
        0xea041b0dbfe956af,
    ),
    (
        "lstm_train",
        None,
        41,
        2,
        29,
        31,
        443,
        0xa3da997d3e79878d,
        0xb9f213fdc4ca6f96,
    ),
    (
        "lstm_train",
        Some(0),
        69,
        31,
        15,
        44,
        540,
        0xdff605e8144e1cce,
        0xd3179661fa02007d,
    ),
    (
        "lstm_train",
        Some(1),
        64,
        21,
        29,
        46,
        537,
        0x8a57a334ef7ce722,
        0xe4d713e0b70db2df,
    ),
    (
        "lstm_train",
        Some(7),
        44,
        6,
        29,
        31,
        447,
        0x08a7d4b2bcd40093,
        0xcf9d5dab5430459a,
    ),
    (
        "misc_ops",
        None,
        29,
        0,
        4,
        16,
        225,
        0x761902e8018e32b4,
        0x062d48e7c938ed67,
    ),
    (
        "misc_ops",
        Some(0),
        29,
        0,
        4,
        16,
        225,
        0x761902e8018e32b4,
        0x062d48e7c938ed67,
    ),
    (
        "misc_ops",
        Some(1),
        29,
        0,
        4,
        16,
        225,
        0x761902e8018e32b4,
        0x062d48e7c938ed67,
    ),
    (
        "misc_ops",
        Some(7),
        29,
        0,
        4,
        16,
        225,
        0x761902e8018e32b4,
        0x062d48e7c938ed67,
    ),
    (
        "mlp_train",
        None,
        7,
        0,
        2,
        7,
        47,
        0xa8f47a8d1cf5e6c9,
        0x8fc4f84eff549383,
    ),
    (
        "mlp_train",
        Some(0),
        9,
        3,
        2,
        7,
        53,
        0xe5ec6a0884da0b0c,
        0xb000aefa68fe65cb,
    ),
    (
        "mlp_train",
        Some(1),
        9,
        2,
        2,
        7,
        49,
        0xef6489248cdb8e1d,
        0xbe7cb5f5969f48a8,
    ),
    (
        "mlp_train",
        Some(7),
        9,
        3,
        2,
        7,
        53,
        0xcdde317e9cbc5a3e,
        0xfdf87a06a4ea9ee8,
    ),
    (
        "resnet18_bf16_infer_b16",
        None,
        76,
        1,
        24,
        75,
        1370,
        0xe61efb259d083226,
        0x8e76c78662dc4697,
    ),
    (
        "resnet18_bf16_infer_b16",
        Some(0),
        125,
        60,
        12,
        121,
        1530,
        0x67cad0dfac1ea900,
        0x5396017532271a1d,
    ),
    (
        "resnet18_bf16_infer_b16",
        Some(1),
        125,
        53,
        16,
        118,
        1517,
        0x321ec56176571dab,
        0x61f82c8a85b650f3,
    ),
    (
        "resnet18_bf16_infer_b16",
        Some(7),
        136,
        66,
        12,
        132,
        1558,
        0xea9897251c4630f5,
        0xb35bbf837392a313,
    ),
    (
        "resnet18_infer_b8",
        None,
        76,
        1,
        96,
        42,
        1153,
        0x87fadedc11cf725c,
        0x777dd1f62c783775,
    ),
    (
        "resnet18_infer_b8",
        Some(0),
        125,
        60,
        54,
        87,
        1311,
        0x7651f5d22f66f39f,
        0xeff3ba17da3fdf79,
    ),
    (
        "resnet18_infer_b8",
        Some(1),
        125,
        53,
        65,
        78,
        1286,
        0x2dd768bffab3b231,
        0x2e989cc59fe02738,
    ),
    (
        "resnet18_infer_b8",
        Some(7),
        136,
        66,
        60,
        91,
        1325,
        0xa34c9cc504988c9c,
        0x346ceca4f5807d7f,
    ),
    (
        "resnet50_infer_b4",
        None,
        211,
        0,
        304,
        114,
        3362,
        0x17dfa10889b8a6ba,
        0xa437fbe676dd9fcd,
    ),
    (
        "resnet50_infer_b4",
        Some(0),
        358,
        170,
        159,
        242,
        3797,
        0x74017e3016927934,
        0x89fb2144bdb95329,
    ),
    (
        "resnet50_infer_b4",
        Some(1),
        365,
        168,
        187,
        245,
        3795,
        0x237a3602b6600e2a,
        0x2202b82933aedc70,
    ),
    (
        "resnet50_infer_b4",
        Some(7),
        338,
        133,
        192,
        211,
        3704,
        0x7191d90f1f6ec328,
        0x87a6429cc4300162,
    ),
    (
        "resnet50_train_b8",
        None,
        902,
        102,
        540,
        764,
        18380,
        0x0677a6dd8f73819a,
        0xbe82a7ff23cc2d26,
    ),
    (
        "resnet50_train_b8",
        Some(0),
        1281,
        496,
        332,
        1062,
        18816,
        0x3cc5ce669e556de9,
        0x99b05d2d8d3daada,
    ),
    (
        "resnet50_train_b8",
        Some(1),
        1326,
        523,
        323,
        1091,
        18507,
        0x76140fdd03410375,
        0x557880c1f6aa50a1,
    ),
    (
        "resnet50_train_b8",
        Some(7),
        1291,
        493,
        340,
        1060,
        18771,
        0x30b5586bbb57358a,
        0x95a441968efe8848,
    ),
];

#[test]
fn compiled_outputs_are_pinned() {
    let Some(dir) = shared() else {
        println!("skipping: ../shared (or $TPUSIM_SHARED) with hlo_corpus not found");
        return;
    };
    let mut got: Vec<Row> = Vec::new();
    for &name in MODELS {
        let path = dir.join("hlo_corpus/jax").join(format!("{name}.hlo"));
        let text = std::fs::read_to_string(&path).unwrap();
        let m = parse_module(&path.display().to_string(), &text).unwrap();
        let p = PreparedModule::new(&m).unwrap();
        let configs = std::iter::once((None, CompilationConfig::default())).chain(
            SEEDS
                .iter()
                .map(|&s| (Some(s), CompilationConfig::random_layouts(&m, s))),
        );
        for (seed, cfg) in configs {
            let c = p.compile(&cfg).unwrap();
            let k = p.compile_kernels(&cfg).unwrap();
            assert_eq!(k.kernels, c.kernels, "{name} {seed:?}: compile_kernels");
            assert_eq!(k.stats, c.stats, "{name} {seed:?}: compile_kernels stats");
            let one_shot = tpusim::passes::compile(&m, &cfg).unwrap();
            assert_eq!(one_shot.kernels, c.kernels, "{name} {seed:?}: compile");
            let printed = print_module(&c.module);
            assert_eq!(printed, print_module(&one_shot.module), "{name} {seed:?}");
            got.push((
                name,
                seed,
                c.kernels.len(),
                c.stats.copies_inserted,
                c.stats.bitcasts,
                c.stats.fusions,
                c.stats.output_instructions,
                fnv(c.kernels_json().as_bytes()),
                fnv(printed.as_bytes()),
            ));
        }
    }
    if got != PINNED {
        println!("current values:");
        for r in &got {
            println!(
                "    (\"{}\", {:?}, {}, {}, {}, {}, {}, 0x{:016x}, 0x{:016x}),",
                r.0, r.1, r.2, r.3, r.4, r.5, r.6, r.7, r.8
            );
        }
        for (a, b) in got.iter().zip(PINNED) {
            assert_eq!(a, b, "first differing row");
        }
        assert_eq!(got.len(), PINNED.len(), "number of rows");
    }
}
