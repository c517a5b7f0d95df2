//! TpuGraphs opcode ids (`node_opcode`), spec §3.
//!
//! The table is `LEARNED_HLO_OPCODE_LIST` plus `TOMBSTONE_HLO_OPCODE_LIST` of
//! `tpu_graphs/process_data/xla/hlo_opcode.h`: ids 1..=120, 0 = unknown.
//!
//! Mapping decisions (see `docs/dataset-format.md`):
//! * The id is looked up by the opcode that `HloInstructionProto.opcode` holds. Async
//!   sugar (`fusion-start`, `custom-call-done`, ...) is serialised by XLA as
//!   `async-start` / `async-update` / `async-done`, so it maps to 115 / 116 / 117 (the
//!   wrapped opcode is not visible in the id). Dedicated async opcodes that have their
//!   own entries (`all-reduce-start` 109, `all-gather-done` 113, `copy-start` 29,
//!   `collective-permute-start` 105, ...) keep them.
//! * Opcodes newer than the table (`erf`, `topk`, `cosh`, `sinh`, `acos`, `acosh`,
//!   `asin`, `asinh`, `atanh`, `collective-broadcast`, `ragged-all-to-all`,
//!   `ragged-dot`, `scaled-dot`, `scan`) get 0, exactly as the official
//!   `StringToOpcodeID` does for names it does not know.

use crate::ir::{Instruction, Opcode};

/// Number of ids including 0 (unknown): ids are `0..OPCODE_ID_COUNT`.
pub const OPCODE_ID_COUNT: usize = 121;

/// Id for opcodes missing from the table.
pub const UNKNOWN_OPCODE_ID: u8 = 0;

/// The official table `(name, id)`, in id order of the header (including the two
/// tombstones `trace` 97 and `tuple-select` 101, which the IR cannot produce).
pub const OPCODE_TABLE: &[(&str, u8)] = &[
    ("abs", 1),
    ("add", 2),
    ("add-dependency", 3),
    ("after-all", 4),
    ("all-reduce", 5),
    ("all-to-all", 6),
    ("atan2", 7),
    ("batch-norm-grad", 8),
    ("batch-norm-inference", 9),
    ("batch-norm-training", 10),
    ("bitcast", 11),
    ("bitcast-convert", 12),
    ("broadcast", 13),
    ("call", 14),
    ("ceil", 15),
    ("cholesky", 16),
    ("clamp", 17),
    ("collective-permute", 18),
    ("count-leading-zeros", 19),
    ("compare", 20),
    ("complex", 21),
    ("concatenate", 22),
    ("conditional", 23),
    ("constant", 24),
    ("convert", 25),
    ("convolution", 26),
    ("copy", 27),
    ("copy-done", 28),
    ("copy-start", 29),
    ("cosine", 30),
    ("custom-call", 31),
    ("divide", 32),
    ("domain", 33),
    ("dot", 34),
    ("dynamic-slice", 35),
    ("dynamic-update-slice", 36),
    ("exponential", 37),
    ("exponential-minus-one", 38),
    ("fft", 39),
    ("floor", 40),
    ("fusion", 41),
    ("gather", 42),
    ("get-dimension-size", 43),
    ("set-dimension-size", 44),
    ("get-tuple-element", 45),
    ("imag", 46),
    ("infeed", 47),
    ("iota", 48),
    ("is-finite", 49),
    ("log", 50),
    ("log-plus-one", 51),
    ("and", 52),
    ("not", 53),
    ("or", 54),
    ("xor", 55),
    ("map", 56),
    ("maximum", 57),
    ("minimum", 58),
    ("multiply", 59),
    ("negate", 60),
    ("outfeed", 61),
    ("pad", 62),
    ("parameter", 63),
    ("partition-id", 64),
    ("popcnt", 65),
    ("power", 66),
    ("real", 67),
    ("recv", 68),
    ("recv-done", 69),
    ("reduce", 70),
    ("reduce-precision", 71),
    ("reduce-window", 72),
    ("remainder", 73),
    ("replica-id", 74),
    ("reshape", 75),
    ("reverse", 76),
    ("rng", 77),
    ("rng-get-and-update-state", 78),
    ("rng-bit-generator", 79),
    ("round-nearest-afz", 80),
    ("rsqrt", 81),
    ("scatter", 82),
    ("select", 83),
    ("select-and-scatter", 84),
    ("send", 85),
    ("send-done", 86),
    ("shift-left", 87),
    ("shift-right-arithmetic", 88),
    ("shift-right-logical", 89),
    ("sign", 90),
    ("sine", 91),
    ("slice", 92),
    ("sort", 93),
    ("sqrt", 94),
    ("subtract", 95),
    ("tanh", 96),
    ("trace", 97),
    ("transpose", 98),
    ("triangular-solve", 99),
    ("tuple", 100),
    ("tuple-select", 101),
    ("while", 102),
    ("cbrt", 103),
    ("all-gather", 104),
    ("collective-permute-start", 105),
    ("collective-permute-done", 106),
    ("logistic", 107),
    ("dynamic-reshape", 108),
    ("all-reduce-start", 109),
    ("all-reduce-done", 110),
    ("reduce-scatter", 111),
    ("all-gather-start", 112),
    ("all-gather-done", 113),
    ("opt-barrier", 114),
    ("async-start", 115),
    ("async-update", 116),
    ("async-done", 117),
    ("round-nearest-even", 118),
    ("stochastic-convert", 119),
    ("tan", 120),
];

/// TpuGraphs id of an IR opcode (0 when the table has no entry for it).
pub fn opcode_id_of(op: Opcode) -> u8 {
    use Opcode::*;
    match op {
        Abs => 1,
        Add => 2,
        AddDependency => 3,
        AfterAll => 4,
        AllReduce => 5,
        AllToAll => 6,
        Atan2 => 7,
        BatchNormGrad => 8,
        BatchNormInference => 9,
        BatchNormTraining => 10,
        Bitcast => 11,
        BitcastConvert => 12,
        Broadcast => 13,
        Call => 14,
        Ceil => 15,
        Cholesky => 16,
        Clamp => 17,
        CollectivePermute => 18,
        Clz => 19,
        Compare => 20,
        Complex => 21,
        Concatenate => 22,
        Conditional => 23,
        Constant => 24,
        Convert => 25,
        Convolution => 26,
        Copy => 27,
        CopyDone => 28,
        CopyStart => 29,
        Cos => 30,
        CustomCall => 31,
        Divide => 32,
        Domain => 33,
        Dot => 34,
        DynamicSlice => 35,
        DynamicUpdateSlice => 36,
        Exp => 37,
        Expm1 => 38,
        Fft => 39,
        Floor => 40,
        Fusion => 41,
        Gather => 42,
        GetDimensionSize => 43,
        SetDimensionSize => 44,
        GetTupleElement => 45,
        Imag => 46,
        Infeed => 47,
        Iota => 48,
        IsFinite => 49,
        Log => 50,
        Log1p => 51,
        And => 52,
        Not => 53,
        Or => 54,
        Xor => 55,
        Map => 56,
        Maximum => 57,
        Minimum => 58,
        Multiply => 59,
        Negate => 60,
        Outfeed => 61,
        Pad => 62,
        Parameter => 63,
        PartitionId => 64,
        PopulationCount => 65,
        Power => 66,
        Real => 67,
        Recv => 68,
        RecvDone => 69,
        Reduce => 70,
        ReducePrecision => 71,
        ReduceWindow => 72,
        Remainder => 73,
        ReplicaId => 74,
        Reshape => 75,
        Reverse => 76,
        Rng => 77,
        RngGetAndUpdateState => 78,
        RngBitGenerator => 79,
        RoundNearestAfz => 80,
        Rsqrt => 81,
        Scatter => 82,
        Select => 83,
        SelectAndScatter => 84,
        Send => 85,
        SendDone => 86,
        ShiftLeft => 87,
        ShiftRightArithmetic => 88,
        ShiftRightLogical => 89,
        Sign => 90,
        Sin => 91,
        Slice => 92,
        Sort => 93,
        Sqrt => 94,
        Subtract => 95,
        Tanh => 96,
        Transpose => 98,
        TriangularSolve => 99,
        Tuple => 100,
        While => 102,
        Cbrt => 103,
        AllGather => 104,
        CollectivePermuteStart => 105,
        CollectivePermuteDone => 106,
        Logistic => 107,
        DynamicReshape => 108,
        AllReduceStart => 109,
        AllReduceDone => 110,
        ReduceScatter => 111,
        AllGatherStart => 112,
        AllGatherDone => 113,
        OptimizationBarrier => 114,
        AsyncStart => 115,
        AsyncUpdate => 116,
        AsyncDone => 117,
        RoundNearestEven => 118,
        StochasticConvert => 119,
        Tan => 120,
        _ => UNKNOWN_OPCODE_ID,
    }
}

/// TpuGraphs id of an instruction, as the official extractor computes it from
/// `HloInstructionProto.opcode` (async sugar maps to async-start/update/done).
pub fn opcode_id(instr: &Instruction) -> u8 {
    opcode_id_of(instr.opcode)
}

/// Id of an opcode text name (`HloInstructionProto.opcode` spelling); 0 if unknown.
/// Sugar names such as `fusion-start` are not proto opcodes and give 0.
pub fn opcode_id_by_name(name: &str) -> u8 {
    OPCODE_TABLE
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, id)| *id)
        .unwrap_or(UNKNOWN_OPCODE_ID)
}

/// Opcode name of an id (`None` for 0 and ids outside the table).
pub fn opcode_name(id: u8) -> Option<&'static str> {
    OPCODE_TABLE.iter().find(|(_, i)| *i == id).map(|(n, _)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::ALL_OPCODES;

    #[test]
    fn table_has_ids_1_to_120_once() {
        let mut ids: Vec<u8> = OPCODE_TABLE.iter().map(|(_, i)| *i).collect();
        ids.sort_unstable();
        assert_eq!(ids, (1..=120).collect::<Vec<u8>>());
        assert_eq!(OPCODE_ID_COUNT, 121);
    }

    #[test]
    fn enum_mapping_agrees_with_name_table() {
        let mut known = 0;
        for &op in ALL_OPCODES {
            assert_eq!(opcode_id_of(op), opcode_id_by_name(op.name()), "{op}");
            if opcode_id_of(op) != 0 {
                known += 1;
            }
        }
        // 120 ids minus the two tombstones.
        assert_eq!(known, 118);
        assert_eq!(opcode_id_of(Opcode::Cos), 30);
        assert_eq!(opcode_id_of(Opcode::Tan), 120);
        assert_eq!(opcode_id_of(Opcode::Erf), 0);
        assert_eq!(opcode_id_by_name("tuple-select"), 101);
        assert_eq!(opcode_name(97), Some("trace"));
        assert_eq!(opcode_name(0), None);
    }
}
