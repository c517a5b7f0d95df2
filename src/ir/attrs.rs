//! Typed instruction attributes. Everything later stages need is typed; the rest is
//! kept verbatim in [`Attrs::other`] so that nothing is lost.

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use super::shape::Dims;

/// One spatial dimension of a `window={...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WindowDim {
    pub size: i64,
    pub stride: i64,
    pub pad_low: i64,
    pub pad_high: i64,
    /// `rhs_dilate` (window dilation).
    pub window_dilation: i64,
    /// `lhs_dilate` (base dilation).
    pub base_dilation: i64,
    /// `rhs_reversal`.
    pub window_reversal: bool,
}

impl Default for WindowDim {
    fn default() -> Self {
        WindowDim {
            size: 1,
            stride: 1,
            pad_low: 0,
            pad_high: 0,
            window_dilation: 1,
            base_dilation: 1,
            window_reversal: false,
        }
    }
}

/// A convolution / reduce-window / select-and-scatter window.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Window {
    pub dims: SmallVec<[WindowDim; 4]>,
}

/// Convolution dimension numbers (from `dim_labels=b01f_01io->b01f`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct ConvDims {
    pub input_batch: i64,
    pub input_feature: i64,
    pub input_spatial: Dims,
    pub kernel_input_feature: i64,
    pub kernel_output_feature: i64,
    pub kernel_spatial: Dims,
    pub output_batch: i64,
    pub output_feature: i64,
    pub output_spatial: Dims,
    /// Ranks of lhs, rhs and output as written (dims labelled `?` are unused).
    pub ranks: [u8; 3],
}

/// Dot dimension numbers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct DotDims {
    pub lhs_batch: Dims,
    pub lhs_contracting: Dims,
    pub rhs_batch: Dims,
    pub rhs_contracting: Dims,
}

/// One dimension of `slice={[start:limit:stride], ...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SliceDim {
    pub start: i64,
    pub limit: i64,
    pub stride: i64,
}

/// One dimension of `padding=lo_hi_interior`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct PadDim {
    pub low: i64,
    pub high: i64,
    pub interior: i64,
}

/// Gather dimension numbers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct GatherDims {
    pub offset_dims: Dims,
    pub collapsed_slice_dims: Dims,
    pub start_index_map: Dims,
    pub index_vector_dim: i64,
    pub operand_batching_dims: Dims,
    pub start_indices_batching_dims: Dims,
    pub slice_sizes: Dims,
}

/// Scatter dimension numbers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct ScatterDims {
    pub update_window_dims: Dims,
    pub inserted_window_dims: Dims,
    pub scatter_dims_to_operand_dims: Dims,
    pub index_vector_dim: i64,
    pub input_batching_dims: Dims,
    pub scatter_indices_batching_dims: Dims,
}

/// Fusion kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FusionKind {
    Loop,
    Input,
    Output,
    Custom,
}

impl FusionKind {
    pub fn name(self) -> &'static str {
        match self {
            FusionKind::Loop => "kLoop",
            FusionKind::Input => "kInput",
            FusionKind::Output => "kOutput",
            FusionKind::Custom => "kCustom",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "kLoop" => FusionKind::Loop,
            "kInput" => FusionKind::Input,
            "kOutput" => FusionKind::Output,
            "kCustom" => FusionKind::Custom,
            _ => return None,
        })
    }
}

/// Comparison direction of `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Comparison {
    Eq,
    Ne,
    Ge,
    Gt,
    Le,
    Lt,
}

impl Comparison {
    pub fn name(self) -> &'static str {
        match self {
            Comparison::Eq => "EQ",
            Comparison::Ne => "NE",
            Comparison::Ge => "GE",
            Comparison::Gt => "GT",
            Comparison::Le => "LE",
            Comparison::Lt => "LT",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "EQ" => Comparison::Eq,
            "NE" => Comparison::Ne,
            "GE" => Comparison::Ge,
            "GT" => Comparison::Gt,
            "LE" => Comparison::Le,
            "LT" => Comparison::Lt,
            _ => return None,
        })
    }
}

/// The attribute through which an instruction calls a computation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CallRole {
    ToApply,
    Calls,
    Condition,
    Body,
    TrueComputation,
    FalseComputation,
    BranchComputations,
    Select,
    Scatter,
    CalledComputations,
}

impl CallRole {
    pub fn attr_name(self) -> &'static str {
        match self {
            CallRole::ToApply => "to_apply",
            CallRole::Calls => "calls",
            CallRole::Condition => "condition",
            CallRole::Body => "body",
            CallRole::TrueComputation => "true_computation",
            CallRole::FalseComputation => "false_computation",
            CallRole::BranchComputations => "branch_computations",
            CallRole::Select => "select",
            CallRole::Scatter => "scatter",
            CallRole::CalledComputations => "called_computations",
        }
    }
    pub fn from_attr_name(s: &str) -> Option<Self> {
        Some(match s {
            "to_apply" => CallRole::ToApply,
            "calls" => CallRole::Calls,
            "condition" => CallRole::Condition,
            "body" => CallRole::Body,
            "true_computation" => CallRole::TrueComputation,
            "false_computation" => CallRole::FalseComputation,
            "branch_computations" => CallRole::BranchComputations,
            "select" => CallRole::Select,
            "scatter" => CallRole::Scatter,
            "called_computations" => CallRole::CalledComputations,
            _ => return None,
        })
    }
    /// Whether the attribute takes a `{a, b}` list.
    pub fn is_list(self) -> bool {
        matches!(
            self,
            CallRole::BranchComputations | CallRole::CalledComputations
        )
    }
}

/// Index of a computation in [`crate::ir::Module::computations`].
pub type CompId = usize;

/// Typed attributes of an instruction. `None`/empty = absent in the text.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Attrs {
    /// `dimensions={...}` (broadcast, transpose, reduce, reverse, concatenate, sort, ...).
    pub dimensions: Option<Dims>,
    pub window: Option<Box<Window>>,
    /// `dim_labels=...` of convolution (and convolution-like custom-calls).
    pub conv_dims: Option<Box<ConvDims>>,
    pub dot_dims: Option<Box<DotDims>>,
    pub slice: Option<Box<[SliceDim]>>,
    pub padding: Option<Box<[PadDim]>>,
    pub fusion_kind: Option<FusionKind>,
    /// Called computations, in the order written; list attributes give several entries.
    pub called: SmallVec<[(CallRole, CompId); 2]>,
    pub comparison: Option<Comparison>,
    /// `type=` of compare (FLOAT, TOTALORDER, SIGNED, UNSIGNED).
    pub comparison_type: Option<String>,
    /// `index=` of get-tuple-element.
    pub tuple_index: Option<i64>,
    /// `parameter(N)`.
    pub parameter_number: Option<i64>,
    /// Literal text of `constant(...)`, verbatim (`{...}` when elided).
    pub literal: Option<String>,
    pub iota_dimension: Option<i64>,
    pub feature_group_count: Option<i64>,
    pub batch_group_count: Option<i64>,
    pub fft_type: Option<String>,
    pub fft_length: Option<Box<[i64]>>,
    pub gather: Option<Box<GatherDims>>,
    pub scatter: Option<Box<ScatterDims>>,
    pub dynamic_slice_sizes: Option<Box<[i64]>>,
    pub is_stable: Option<bool>,
    pub indices_are_sorted: Option<bool>,
    pub unique_indices: Option<bool>,
    pub custom_call_target: Option<String>,
    /// `custom_call_has_side_effect=` of a custom-call.
    pub custom_call_has_side_effect: Option<bool>,
    pub epsilon: Option<f32>,
    pub feature_index: Option<i64>,
    pub exponent_bits: Option<i64>,
    pub mantissa_bits: Option<i64>,
    pub distribution: Option<String>,
    pub channel_id: Option<i64>,
    pub k: Option<i64>,
    pub largest: Option<bool>,
    /// Control predecessors by instruction name (same computation).
    pub control_predecessors: Vec<String>,
    /// Raw `metadata={...}` text (without the attribute name).
    pub metadata: Option<String>,
    /// Raw `backend_config=` value (a quoted string or a `{...}` JSON text).
    pub backend_config: Option<String>,
    /// Raw `sharding={...}`.
    pub sharding: Option<String>,
    /// Raw `frontend_attributes={...}`.
    pub frontend_attributes: Option<String>,
    /// Every other attribute, `(name, raw value)`, in written order.
    pub other: Vec<(String, String)>,
}

impl Attrs {
    /// First called computation with a role.
    pub fn called_with(&self, role: CallRole) -> Option<CompId> {
        self.called
            .iter()
            .find(|(r, _)| *r == role)
            .map(|(_, c)| *c)
    }

    /// Raw value of an uncommon attribute kept verbatim.
    pub fn other(&self, name: &str) -> Option<&str> {
        self.other
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The highest `operand_precision` of a dot or convolution (`{default,high}` in
    /// text, `PrecisionConfig` in a proto, which the proto reader writes the same way);
    /// [`Precision::Default`] when absent.
    pub fn operand_precision(&self) -> Precision {
        let Some(text) = self.other("operand_precision") else {
            return Precision::Default;
        };
        text.trim_matches(|c| c == '{' || c == '}')
            .split(',')
            .map(|p| match p.trim().to_ascii_lowercase().as_str() {
                "highest" => Precision::Highest,
                "high" => Precision::High,
                _ => Precision::Default,
            })
            .max()
            .unwrap_or(Precision::Default)
    }
}

/// `PrecisionConfig.Precision` of an operand of a dot or convolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Precision {
    Default,
    High,
    Highest,
}

/// An instruction's attributes, shared copy-on-write.
///
/// Reading goes through `Deref` (absent attributes read as [`Attrs::default`]); writing
/// through `DerefMut` makes the attributes this instruction's own first (allocating
/// them if there were none, copying them if they are shared). Cloning an instruction
/// therefore costs a reference count, not a copy of ~650 bytes: the compiler clones
/// every instruction of its input once or more per configuration, and most clones keep
/// their attributes unchanged.
#[derive(Clone, Default)]
pub struct SharedAttrs(Option<std::sync::Arc<Attrs>>);

static NO_ATTRS: std::sync::OnceLock<Attrs> = std::sync::OnceLock::new();

impl SharedAttrs {
    pub fn new(attrs: Attrs) -> Self {
        SharedAttrs(Some(std::sync::Arc::new(attrs)))
    }

    /// Whether no attribute was ever set (the default attributes, unshared).
    pub fn is_unset(&self) -> bool {
        self.0.is_none()
    }

    /// Whether both hold the very same attributes (not just equal ones).
    pub fn same_as(&self, other: &SharedAttrs) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
}

impl std::ops::Deref for SharedAttrs {
    type Target = Attrs;
    fn deref(&self) -> &Attrs {
        match &self.0 {
            Some(a) => a,
            None => NO_ATTRS.get_or_init(Attrs::default),
        }
    }
}

impl std::ops::DerefMut for SharedAttrs {
    fn deref_mut(&mut self) -> &mut Attrs {
        std::sync::Arc::make_mut(self.0.get_or_insert_with(std::sync::Arc::<Attrs>::default))
    }
}

impl PartialEq for SharedAttrs {
    fn eq(&self, other: &SharedAttrs) -> bool {
        self.same_as(other) || **self == **other
    }
}

impl std::fmt::Debug for SharedAttrs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl Serialize for SharedAttrs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for SharedAttrs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Attrs::deserialize(d).map(SharedAttrs::new)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn operand_precision_is_the_highest_written() {
        let with = |t: &str| Attrs {
            other: vec![("operand_precision".into(), t.into())],
            ..Default::default()
        };
        assert_eq!(Attrs::default().operand_precision(), Precision::Default);
        assert_eq!(
            with("{default,default}").operand_precision(),
            Precision::Default
        );
        assert_eq!(with("{high,default}").operand_precision(), Precision::High);
        assert_eq!(
            with("{default,HIGHEST}").operand_precision(),
            Precision::Highest
        );
    }

    use super::*;

    #[test]
    fn shared_attrs_copy_on_write() {
        let empty = SharedAttrs::default();
        assert_eq!(empty.parameter_number, None);
        assert!(empty.called.is_empty());

        let a = SharedAttrs::new(Attrs {
            parameter_number: Some(3),
            metadata: Some("op_name=\"x\"".into()),
            ..Default::default()
        });
        let mut b = a.clone();
        assert!(b.same_as(&a));
        assert_eq!(b, a);

        // Writing to the clone leaves the original alone.
        b.parameter_number = Some(4);
        assert!(!b.same_as(&a));
        assert_eq!(a.parameter_number, Some(3));
        assert_eq!(b.parameter_number, Some(4));
        assert_eq!(b.metadata, a.metadata);
        assert_ne!(a, b);

        // Equal contents compare equal without being the same allocation.
        let c = SharedAttrs::new((*a).clone());
        assert!(!c.same_as(&a));
        assert_eq!(c, a);
        // An absent set of attributes equals an allocated default one.
        assert_eq!(SharedAttrs::default(), SharedAttrs::new(Attrs::default()));
    }

    #[test]
    fn shared_attrs_serialize_as_plain_attrs() {
        let mut a = SharedAttrs::default();
        // Written through `DerefMut`: allocates the attributes.
        a.dimensions.replace(Dims::from_slice(&[1, 0]));
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(json, serde_json::to_string(&*a).unwrap());
        let back: SharedAttrs = serde_json::from_str(&json).unwrap();
        assert_eq!(back, a);
        assert_eq!(back.dimensions.as_deref(), Some(&[1i64, 0][..]));
    }
}
