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

/// Opcode classes. Each class is written once here and every stage asks it; where two
/// stages need nearly the same set, both classes are here, one built from the other, with
/// the reason they differ.
impl Opcode {
    /// `while`, `conditional` and `call`: their cost is that of the computations they
    /// call (the program model walks them; they are not kernels).
    pub fn is_control_flow(self) -> bool {
        matches!(self, Opcode::While | Opcode::Conditional | Opcode::Call)
    }

    /// Instructions with no code of their own that are not control flow: parameters,
    /// constants, tuples and their elements, bitcasts, tokens and ordering edges, ids.
    /// The compiler's output lists no kernel for them
    /// ([`emits_no_kernel`](Self::emits_no_kernel)) and the cost model charges them
    /// nothing ([`is_zero_cost`](Self::is_zero_cost)).
    pub fn is_bookkeeping(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Parameter
                | Constant
                | GetTupleElement
                | Tuple
                | Bitcast
                | AfterAll
                | AddDependency
                | OptimizationBarrier
                | Domain
                | PartitionId
                | ReplicaId
                | GetDimensionSize
        )
    }

    /// Instructions the compiler's output does not list as kernels:
    /// [bookkeeping](Self::is_bookkeeping) and [control flow](Self::is_control_flow).
    pub fn emits_no_kernel(self) -> bool {
        self.is_bookkeeping() || self.is_control_flow()
    }

    /// Opcodes that cost nothing as stand-alone instructions in the cost model (no
    /// kernel runs): [bookkeeping](Self::is_bookkeeping), plus instructions the compiler
    /// does list as kernels (XLA keeps them as instructions of their own) whose time the
    /// model does not charge: the waiting halves of asynchronous pairs, host transfers
    /// (infeed, outfeed, send, recv), `set-dimension-size` and
    /// `rng-get-and-update-state`. That second group is why this class is wider than the
    /// one of [`emits_no_kernel`](Self::emits_no_kernel).
    pub fn is_zero_cost(self) -> bool {
        use Opcode::*;
        self.is_bookkeeping()
            || matches!(
                self,
                SetDimensionSize
                    | AsyncUpdate
                    | AsyncDone
                    | AllGatherDone
                    | AllReduceDone
                    | CollectivePermuteDone
                    | CopyDone
                    | RecvDone
                    | SendDone
                    | Infeed
                    | Outfeed
                    | Send
                    | Recv
                    | RngGetAndUpdateState
            )
    }

    /// The MXU ops: `dot` and `convolution`.
    pub fn is_mxu(self) -> bool {
        matches!(self, Opcode::Dot | Opcode::Convolution)
    }

    /// Reductions that can be the hero of a fusion: `reduce` and `reduce-window`.
    pub fn is_reduction(self) -> bool {
        matches!(self, Opcode::Reduce | Opcode::ReduceWindow)
    }

    /// Ops whose result is their first operand updated in place: `dynamic-update-slice`
    /// and `scatter`.
    pub fn updates_in_place(self) -> bool {
        matches!(self, Opcode::DynamicUpdateSlice | Opcode::Scatter)
    }

    /// The async wrapper ops: `async-start`, `async-update`, `async-done`.
    pub fn is_async_wrapper(self) -> bool {
        matches!(
            self,
            Opcode::AsyncStart | Opcode::AsyncUpdate | Opcode::AsyncDone
        )
    }

    /// Collectives that move data between devices (synchronous ones and the starting
    /// halves of asynchronous ones; the `-done` halves are
    /// [`is_collective_done`](Self::is_collective_done)).
    pub fn is_collective(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            AllGather
                | AllGatherStart
                | AllReduce
                | AllReduceStart
                | AllToAll
                | RaggedAllToAll
                | ReduceScatter
                | CollectiveBroadcast
                | CollectivePermute
                | CollectivePermuteStart
        )
    }

    /// The `-done` halves of asynchronous collectives (their result is the start's).
    pub fn is_collective_done(self) -> bool {
        matches!(
            self,
            Opcode::AllGatherDone | Opcode::AllReduceDone | Opcode::CollectivePermuteDone
        )
    }

    /// Kept even when their value is unused (dead-code elimination never removes them).
    /// A `custom-call` is kept when it is marked as having a side effect, which the
    /// instruction, not the opcode, says.
    pub fn has_side_effect(self) -> bool {
        use Opcode::*;
        self.is_collective()
            || self.is_collective_done()
            || self.is_async_wrapper()
            || matches!(
                self,
                Send | SendDone
                    | Recv
                    | RecvDone
                    | Infeed
                    | Outfeed
                    | Rng
                    | RngGetAndUpdateState
                    | RngBitGenerator
                    | While
                    | Conditional
                    | CopyStart
                    | CopyDone
                    | AfterAll
                    | AddDependency
                    | Domain
            )
    }

    /// Ops that never take part in a fusion, as producer or as consumer.
    pub fn is_never_fused(self) -> bool {
        use Opcode::*;
        self.is_control_flow()
            || self.is_collective()
            || self.is_collective_done()
            || self.is_async_wrapper()
            || matches!(
                self,
                Parameter
                    | Tuple
                    | GetTupleElement
                    | CustomCall
                    | Sort
                    | Fft
                    | Rng
                    | RngBitGenerator
                    | RngGetAndUpdateState
                    | Infeed
                    | Outfeed
                    | Send
                    | SendDone
                    | Recv
                    | RecvDone
                    | AfterAll
                    | Domain
                    | TriangularSolve
                    | Cholesky
                    | BatchNormGrad
                    | BatchNormInference
                    | BatchNormTraining
                    | CopyStart
                    | CopyDone
                    | OptimizationBarrier
                    | AddDependency
                    | PartitionId
                    | ReplicaId
                    | GetDimensionSize
                    | SetDimensionSize
                    | DynamicReshape
                    | TopK
                    | Scan
                    | RaggedDot
                    | ScaledDot
                    | Fusion
                    | Map
                    | SelectAndScatter
            )
    }

    /// Ops whose work is address arithmetic or data movement: the kernel model lowers a
    /// kernel with one of them as its hero as `KernelKind::Other`.
    pub fn is_other_hero(self) -> bool {
        use Opcode::*;
        self.is_collective()
            || matches!(
                self,
                Gather
                    | Scatter
                    | Sort
                    | TopK
                    | CustomCall
                    | Fft
                    | Rng
                    | RngBitGenerator
                    | Cholesky
                    | TriangularSolve
                    | SelectAndScatter
                    | BatchNormGrad
                    | BatchNormInference
                    | BatchNormTraining
                    | RaggedDot
                    | ScaledDot
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

    /// Every class, its members spelled out (text names in alphabetical order).
    #[test]
    fn class_members() {
        /// (method name, method, members).
        type Class = (&'static str, fn(Opcode) -> bool, &'static [&'static str]);
        let classes: &[Class] = &[
            (
                "is_elementwise",
                Opcode::is_elementwise,
                &[
                    "abs",
                    "acos",
                    "acosh",
                    "add",
                    "and",
                    "asin",
                    "asinh",
                    "atan2",
                    "atanh",
                    "bitcast-convert",
                    "cbrt",
                    "ceil",
                    "clamp",
                    "compare",
                    "complex",
                    "convert",
                    "copy",
                    "cosh",
                    "cosine",
                    "count-leading-zeros",
                    "divide",
                    "erf",
                    "exponential",
                    "exponential-minus-one",
                    "floor",
                    "imag",
                    "is-finite",
                    "log",
                    "log-plus-one",
                    "logistic",
                    "maximum",
                    "minimum",
                    "multiply",
                    "negate",
                    "not",
                    "or",
                    "popcnt",
                    "power",
                    "real",
                    "reduce-precision",
                    "remainder",
                    "round-nearest-afz",
                    "round-nearest-even",
                    "rsqrt",
                    "select",
                    "shift-left",
                    "shift-right-arithmetic",
                    "shift-right-logical",
                    "sign",
                    "sine",
                    "sinh",
                    "sqrt",
                    "stochastic-convert",
                    "subtract",
                    "tan",
                    "tanh",
                    "xor",
                ],
            ),
            (
                "is_transcendental",
                Opcode::is_transcendental,
                &[
                    "acos",
                    "acosh",
                    "asin",
                    "asinh",
                    "atan2",
                    "atanh",
                    "cbrt",
                    "cosh",
                    "cosine",
                    "erf",
                    "exponential",
                    "exponential-minus-one",
                    "log",
                    "log-plus-one",
                    "logistic",
                    "power",
                    "rsqrt",
                    "sine",
                    "sinh",
                    "sqrt",
                    "tan",
                    "tanh",
                ],
            ),
            (
                "is_elementwise_unary",
                Opcode::is_elementwise_unary,
                &[
                    "abs",
                    "acos",
                    "acosh",
                    "asin",
                    "asinh",
                    "atanh",
                    "bitcast-convert",
                    "cbrt",
                    "ceil",
                    "convert",
                    "copy",
                    "cosh",
                    "cosine",
                    "count-leading-zeros",
                    "erf",
                    "exponential",
                    "exponential-minus-one",
                    "floor",
                    "imag",
                    "is-finite",
                    "log",
                    "log-plus-one",
                    "logistic",
                    "negate",
                    "not",
                    "popcnt",
                    "real",
                    "reduce-precision",
                    "round-nearest-afz",
                    "round-nearest-even",
                    "rsqrt",
                    "sign",
                    "sine",
                    "sinh",
                    "sqrt",
                    "tan",
                    "tanh",
                ],
            ),
            (
                "calls_computations",
                Opcode::calls_computations,
                &[
                    "all-reduce",
                    "all-reduce-start",
                    "async-start",
                    "call",
                    "conditional",
                    "custom-call",
                    "fusion",
                    "map",
                    "reduce",
                    "reduce-scatter",
                    "reduce-window",
                    "scan",
                    "scatter",
                    "select-and-scatter",
                    "sort",
                    "while",
                ],
            ),
            (
                "is_control_flow",
                Opcode::is_control_flow,
                &["call", "conditional", "while"],
            ),
            (
                "is_bookkeeping",
                Opcode::is_bookkeeping,
                &[
                    "add-dependency",
                    "after-all",
                    "bitcast",
                    "constant",
                    "domain",
                    "get-dimension-size",
                    "get-tuple-element",
                    "opt-barrier",
                    "parameter",
                    "partition-id",
                    "replica-id",
                    "tuple",
                ],
            ),
            (
                "emits_no_kernel",
                Opcode::emits_no_kernel,
                &[
                    "add-dependency",
                    "after-all",
                    "bitcast",
                    "call",
                    "conditional",
                    "constant",
                    "domain",
                    "get-dimension-size",
                    "get-tuple-element",
                    "opt-barrier",
                    "parameter",
                    "partition-id",
                    "replica-id",
                    "tuple",
                    "while",
                ],
            ),
            (
                "is_zero_cost",
                Opcode::is_zero_cost,
                &[
                    "add-dependency",
                    "after-all",
                    "all-gather-done",
                    "all-reduce-done",
                    "async-done",
                    "async-update",
                    "bitcast",
                    "collective-permute-done",
                    "constant",
                    "copy-done",
                    "domain",
                    "get-dimension-size",
                    "get-tuple-element",
                    "infeed",
                    "opt-barrier",
                    "outfeed",
                    "parameter",
                    "partition-id",
                    "recv",
                    "recv-done",
                    "replica-id",
                    "rng-get-and-update-state",
                    "send",
                    "send-done",
                    "set-dimension-size",
                    "tuple",
                ],
            ),
            ("is_mxu", Opcode::is_mxu, &["convolution", "dot"]),
            (
                "is_reduction",
                Opcode::is_reduction,
                &["reduce", "reduce-window"],
            ),
            (
                "updates_in_place",
                Opcode::updates_in_place,
                &["dynamic-update-slice", "scatter"],
            ),
            (
                "is_async_wrapper",
                Opcode::is_async_wrapper,
                &["async-done", "async-start", "async-update"],
            ),
            (
                "is_collective",
                Opcode::is_collective,
                &[
                    "all-gather",
                    "all-gather-start",
                    "all-reduce",
                    "all-reduce-start",
                    "all-to-all",
                    "collective-broadcast",
                    "collective-permute",
                    "collective-permute-start",
                    "ragged-all-to-all",
                    "reduce-scatter",
                ],
            ),
            (
                "is_collective_done",
                Opcode::is_collective_done,
                &[
                    "all-gather-done",
                    "all-reduce-done",
                    "collective-permute-done",
                ],
            ),
            (
                "has_side_effect",
                Opcode::has_side_effect,
                &[
                    "add-dependency",
                    "after-all",
                    "all-gather",
                    "all-gather-done",
                    "all-gather-start",
                    "all-reduce",
                    "all-reduce-done",
                    "all-reduce-start",
                    "all-to-all",
                    "async-done",
                    "async-start",
                    "async-update",
                    "collective-broadcast",
                    "collective-permute",
                    "collective-permute-done",
                    "collective-permute-start",
                    "conditional",
                    "copy-done",
                    "copy-start",
                    "domain",
                    "infeed",
                    "outfeed",
                    "ragged-all-to-all",
                    "recv",
                    "recv-done",
                    "reduce-scatter",
                    "rng",
                    "rng-bit-generator",
                    "rng-get-and-update-state",
                    "send",
                    "send-done",
                    "while",
                ],
            ),
            (
                "is_never_fused",
                Opcode::is_never_fused,
                &[
                    "add-dependency",
                    "after-all",
                    "all-gather",
                    "all-gather-done",
                    "all-gather-start",
                    "all-reduce",
                    "all-reduce-done",
                    "all-reduce-start",
                    "all-to-all",
                    "async-done",
                    "async-start",
                    "async-update",
                    "batch-norm-grad",
                    "batch-norm-inference",
                    "batch-norm-training",
                    "call",
                    "cholesky",
                    "collective-broadcast",
                    "collective-permute",
                    "collective-permute-done",
                    "collective-permute-start",
                    "conditional",
                    "copy-done",
                    "copy-start",
                    "custom-call",
                    "domain",
                    "dynamic-reshape",
                    "fft",
                    "fusion",
                    "get-dimension-size",
                    "get-tuple-element",
                    "infeed",
                    "map",
                    "opt-barrier",
                    "outfeed",
                    "parameter",
                    "partition-id",
                    "ragged-all-to-all",
                    "ragged-dot",
                    "recv",
                    "recv-done",
                    "reduce-scatter",
                    "replica-id",
                    "rng",
                    "rng-bit-generator",
                    "rng-get-and-update-state",
                    "scaled-dot",
                    "scan",
                    "select-and-scatter",
                    "send",
                    "send-done",
                    "set-dimension-size",
                    "sort",
                    "topk",
                    "triangular-solve",
                    "tuple",
                    "while",
                ],
            ),
            (
                "is_other_hero",
                Opcode::is_other_hero,
                &[
                    "all-gather",
                    "all-gather-start",
                    "all-reduce",
                    "all-reduce-start",
                    "all-to-all",
                    "batch-norm-grad",
                    "batch-norm-inference",
                    "batch-norm-training",
                    "cholesky",
                    "collective-broadcast",
                    "collective-permute",
                    "collective-permute-start",
                    "custom-call",
                    "fft",
                    "gather",
                    "ragged-all-to-all",
                    "ragged-dot",
                    "reduce-scatter",
                    "rng",
                    "rng-bit-generator",
                    "scaled-dot",
                    "scan",
                    "scatter",
                    "select-and-scatter",
                    "sort",
                    "topk",
                    "triangular-solve",
                ],
            ),
        ];
        for &(name, class, want) in classes {
            let got: Vec<&str> = ALL_OPCODES
                .iter()
                .filter(|&&o| class(o))
                .map(|o| o.name())
                .collect();
            assert_eq!(got, want, "Opcode::{name}");
        }
    }
}
