//! The 132 HLO opcodes (XLA, Feb 2026) with their text names, arities and classes.

use serde::{Deserialize, Serialize};

macro_rules! opcodes {
    ($( $variant:ident = $name:literal, $arity:expr ; )*) => {
        /// An HLO opcode.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum Opcode { $( $variant, )* }

        /// All opcodes in alphabetical order of their text names.
        pub const ALL_OPCODES: &[Opcode] = &[ $( Opcode::$variant, )* ];

        impl Opcode {
            /// Text spelling as in HLO text and `HloInstructionProto.opcode`.
            pub fn name(self) -> &'static str {
                match self { $( Opcode::$variant => $name, )* }
            }

            /// Fixed operand count, or `None` for variadic opcodes.
            pub fn arity(self) -> Option<usize> {
                match self { $( Opcode::$variant => $arity, )* }
            }
        }
    };
}

const V: Option<usize> = None;
const fn n(k: usize) -> Option<usize> {
    Some(k)
}

opcodes! {
    Abs = "abs", n(1);
    Acos = "acos", n(1);
    Acosh = "acosh", n(1);
    Add = "add", n(2);
    AddDependency = "add-dependency", n(2);
    AfterAll = "after-all", V;
    AllGather = "all-gather", V;
    AllGatherDone = "all-gather-done", n(1);
    AllGatherStart = "all-gather-start", V;
    AllReduce = "all-reduce", V;
    AllReduceDone = "all-reduce-done", n(1);
    AllReduceStart = "all-reduce-start", V;
    AllToAll = "all-to-all", V;
    And = "and", n(2);
    Asin = "asin", n(1);
    Asinh = "asinh", n(1);
    AsyncDone = "async-done", n(1);
    AsyncStart = "async-start", V;
    AsyncUpdate = "async-update", n(1);
    Atan2 = "atan2", n(2);
    Atanh = "atanh", n(1);
    BatchNormGrad = "batch-norm-grad", n(5);
    BatchNormInference = "batch-norm-inference", n(5);
    BatchNormTraining = "batch-norm-training", n(3);
    Bitcast = "bitcast", n(1);
    BitcastConvert = "bitcast-convert", n(1);
    Broadcast = "broadcast", n(1);
    Call = "call", V;
    Cbrt = "cbrt", n(1);
    Ceil = "ceil", n(1);
    Cholesky = "cholesky", n(1);
    Clamp = "clamp", n(3);
    CollectiveBroadcast = "collective-broadcast", V;
    CollectivePermute = "collective-permute", V;
    CollectivePermuteDone = "collective-permute-done", n(1);
    CollectivePermuteStart = "collective-permute-start", V;
    Compare = "compare", n(2);
    Complex = "complex", n(2);
    Concatenate = "concatenate", V;
    Conditional = "conditional", V;
    Constant = "constant", n(0);
    Convert = "convert", n(1);
    Convolution = "convolution", n(2);
    Copy = "copy", n(1);
    CopyDone = "copy-done", n(1);
    CopyStart = "copy-start", n(1);
    Cosh = "cosh", n(1);
    Cos = "cosine", n(1);
    Clz = "count-leading-zeros", n(1);
    CustomCall = "custom-call", V;
    Divide = "divide", n(2);
    Domain = "domain", n(1);
    Dot = "dot", n(2);
    DynamicReshape = "dynamic-reshape", V;
    DynamicSlice = "dynamic-slice", V;
    DynamicUpdateSlice = "dynamic-update-slice", V;
    Erf = "erf", n(1);
    Exp = "exponential", n(1);
    Expm1 = "exponential-minus-one", n(1);
    Fft = "fft", n(1);
    Floor = "floor", n(1);
    Fusion = "fusion", V;
    Gather = "gather", n(2);
    GetDimensionSize = "get-dimension-size", n(1);
    GetTupleElement = "get-tuple-element", n(1);
    Imag = "imag", n(1);
    Infeed = "infeed", n(1);
    Iota = "iota", n(0);
    IsFinite = "is-finite", n(1);
    Log = "log", n(1);
    Log1p = "log-plus-one", n(1);
    Logistic = "logistic", n(1);
    Map = "map", V;
    Maximum = "maximum", n(2);
    Minimum = "minimum", n(2);
    Multiply = "multiply", n(2);
    Negate = "negate", n(1);
    Not = "not", n(1);
    OptimizationBarrier = "opt-barrier", n(1);
    Or = "or", n(2);
    Outfeed = "outfeed", n(2);
    Pad = "pad", n(2);
    Parameter = "parameter", n(0);
    PartitionId = "partition-id", n(0);
    PopulationCount = "popcnt", n(1);
    Power = "power", n(2);
    RaggedAllToAll = "ragged-all-to-all", n(6);
    RaggedDot = "ragged-dot", n(3);
    Real = "real", n(1);
    Recv = "recv", n(1);
    RecvDone = "recv-done", n(1);
    Reduce = "reduce", V;
    ReducePrecision = "reduce-precision", n(1);
    ReduceScatter = "reduce-scatter", V;
    ReduceWindow = "reduce-window", V;
    Remainder = "remainder", n(2);
    ReplicaId = "replica-id", n(0);
    Reshape = "reshape", n(1);
    Reverse = "reverse", n(1);
    Rng = "rng", V;
    RngBitGenerator = "rng-bit-generator", n(1);
    RngGetAndUpdateState = "rng-get-and-update-state", n(0);
    RoundNearestAfz = "round-nearest-afz", n(1);
    RoundNearestEven = "round-nearest-even", n(1);
    Rsqrt = "rsqrt", n(1);
    ScaledDot = "scaled-dot", n(4);
    Scan = "scan", V;
    Scatter = "scatter", V;
    Select = "select", n(3);
    SelectAndScatter = "select-and-scatter", n(3);
    Send = "send", n(2);
    SendDone = "send-done", n(1);
    SetDimensionSize = "set-dimension-size", n(2);
    ShiftLeft = "shift-left", n(2);
    ShiftRightArithmetic = "shift-right-arithmetic", n(2);
    ShiftRightLogical = "shift-right-logical", n(2);
    Sign = "sign", n(1);
    Sin = "sine", n(1);
    Sinh = "sinh", n(1);
    Slice = "slice", n(1);
    Sort = "sort", V;
    Sqrt = "sqrt", n(1);
    StochasticConvert = "stochastic-convert", n(2);
    Subtract = "subtract", n(2);
    Tan = "tan", n(1);
    Tanh = "tanh", n(1);
    TopK = "topk", n(1);
    Transpose = "transpose", n(1);
    TriangularSolve = "triangular-solve", n(2);
    Tuple = "tuple", V;
    While = "while", n(1);
    Xor = "xor", n(2);
}

impl Opcode {
    /// Look an opcode up by its exact text name.
    pub fn from_name(s: &str) -> Option<Opcode> {
        // A hash table built once: the parser looks up every instruction's opcode.
        type Table = std::collections::HashMap<&'static str, Opcode, foldhash::fast::FixedState>;
        static TABLE: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
        TABLE
            .get_or_init(|| ALL_OPCODES.iter().map(|&o| (o.name(), o)).collect())
            .get(s)
            .copied()
    }

    /// Elementwise per XLA's `IsOpElementwise` (bitcast-convert counted as elementwise;
    /// callers check the width rule where it matters).
    pub fn is_elementwise(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Abs | Acos
                | Acosh
                | Add
                | And
                | Asin
                | Asinh
                | Atan2
                | Atanh
                | BitcastConvert
                | Cbrt
                | Ceil
                | Clamp
                | Clz
                | Compare
                | Complex
                | Convert
                | Copy
                | Cos
                | Cosh
                | Divide
                | Erf
                | Exp
                | Expm1
                | Floor
                | Imag
                | IsFinite
                | Log
                | Log1p
                | Logistic
                | Maximum
                | Minimum
                | Multiply
                | Negate
                | Not
                | Or
                | PopulationCount
                | Power
                | Real
                | ReducePrecision
                | Remainder
                | RoundNearestAfz
                | RoundNearestEven
                | Rsqrt
                | Select
                | ShiftLeft
                | ShiftRightArithmetic
                | ShiftRightLogical
                | Sign
                | Sin
                | Sinh
                | Sqrt
                | StochasticConvert
                | Subtract
                | Tan
                | Tanh
                | Xor
        )
    }

    /// Counted as a transcendental (not a flop) by XLA's HloCostAnalysis.
    pub fn is_transcendental(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Acos | Acosh
                | Asin
                | Asinh
                | Atan2
                | Atanh
                | Cbrt
                | Cos
                | Cosh
                | Erf
                | Exp
                | Expm1
                | Log
                | Log1p
                | Logistic
                | Power
                | Rsqrt
                | Sin
                | Sinh
                | Sqrt
                | Tan
                | Tanh
        )
    }

    /// Opcodes with exactly one operand that are elementwise.
    pub fn is_elementwise_unary(self) -> bool {
        self.is_elementwise() && self.arity() == Some(1)
    }

    /// Opcodes that call computations (`to_apply`, `calls`, `body`, branches, ...).
    pub fn calls_computations(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Call | Conditional
                | While
                | Fusion
                | Map
                | Reduce
                | ReduceWindow
                | ReduceScatter
                | AllReduce
                | AllReduceStart
                | Scatter
                | SelectAndScatter
                | Sort
                | AsyncStart
                | CustomCall
                | Scan
        )
    }
}

impl std::fmt::Display for Opcode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_are_132_opcodes_sorted_by_name() {
        assert_eq!(ALL_OPCODES.len(), 132);
        for w in ALL_OPCODES.windows(2) {
            assert!(w[0].name() < w[1].name(), "{} !< {}", w[0], w[1]);
        }
        for &o in ALL_OPCODES {
            assert_eq!(Opcode::from_name(o.name()), Some(o));
        }
        assert_eq!(Opcode::from_name("cos"), None);
        assert_eq!(Opcode::from_name("cosine"), Some(Opcode::Cos));
    }
}
