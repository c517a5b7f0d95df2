//! The 140 TpuGraphs node features (`node_feat[:, i]`), spec §2.
//!
//! Reproduces `FeaturizeHloInstruction` of `tpu_graphs/process_data/xla/featurizers.h`
//! with `FEATURE_OP_NON_ZERO` (the 113 minimal + 27 op-level features), reading from the
//! IR what XLA's `HloInstruction::ToProto` would have written into the proto fields the
//! featurizer reads:
//!
//! * `_0.._k` lists keep the first k values and pad with 0; `_sum` / `_product` cover the
//!   whole list (int64 arithmetic, wrapping like the C++ code on overflow), the product
//!   of an empty list is 1.
//! * "No aggregate" lists (dimensions, conv spatial dims, layout) pad with 0, or with −1
//!   when [`FeatureOptions::pad_minus_one`] is set (the 1st-place Kaggle regeneration).
//! * Absent fields are proto defaults (0). `feature_group_count` / `batch_group_count`
//!   are written by XLA for every convolution and custom-call (1 unless the text says
//!   otherwise), 0 elsewhere. `dimensions` holds the `dimensions={..}` attribute, or
//!   `[iota_dimension]` for iota (XLA stores it there).
//! * `layout_minor_to_major` is the layout of the output shape; tuples, tokens and
//!   array shapes without a layout give an empty list.

use crate::ir::{Instruction, Opcode, PrimitiveType, Shape};

/// Number of node features per row.
pub const NODE_FEATURE_COUNT: usize = 140;

/// Column names, as the official featurizer names them (README "Node Features").
pub static FEATURE_NAMES: [&str; NODE_FEATURE_COUNT] = [
    "is_root",
    "element_size_in_bits",
    "shape_element_type_is_invalid_type",
    "shape_element_type_is_pred",
    "shape_element_type_is_s8",
    "shape_element_type_is_s16",
    "shape_element_type_is_s32",
    "shape_element_type_is_s64",
    "shape_element_type_is_u8",
    "shape_element_type_is_u16",
    "shape_element_type_is_u32",
    "shape_element_type_is_u64",
    "shape_element_type_is_f16",
    "shape_element_type_is_f32",
    "shape_element_type_is_f64",
    "shape_element_type_is_bf16",
    "shape_element_type_is_c64",
    "shape_element_type_is_c128",
    "shape_element_type_is_tuple",
    "shape_element_type_is_opaque_type",
    "shape_element_type_is_token",
    "shape_dimensions_0",
    "shape_dimensions_1",
    "shape_dimensions_2",
    "shape_dimensions_3",
    "shape_dimensions_4",
    "shape_dimensions_5",
    "shape_dimensions_sum",
    "shape_dimensions_product",
    "shape_tuple_shapes_size",
    "parameter_number",
    "dimensions_0",
    "dimensions_1",
    "dimensions_2",
    "dimensions_3",
    "dimensions_4",
    "dimensions_5",
    "window_size_0",
    "window_size_1",
    "window_size_2",
    "window_size_3",
    "window_size_4",
    "window_size_5",
    "window_size_sum",
    "window_size_product",
    "window_stride_0",
    "window_stride_1",
    "window_stride_2",
    "window_stride_3",
    "window_stride_4",
    "window_stride_5",
    "window_stride_sum",
    "window_stride_product",
    "window_padding_low_0",
    "window_padding_low_1",
    "window_padding_low_2",
    "window_padding_low_3",
    "window_padding_low_4",
    "window_padding_low_5",
    "window_padding_low_sum",
    "window_padding_low_product",
    "window_padding_high_0",
    "window_padding_high_1",
    "window_padding_high_2",
    "window_padding_high_3",
    "window_padding_high_4",
    "window_padding_high_5",
    "window_padding_high_sum",
    "window_padding_high_product",
    "window_window_dilation_0",
    "window_window_dilation_1",
    "window_window_dilation_2",
    "window_window_dilation_3",
    "window_window_dilation_4",
    "window_window_dilation_5",
    "window_window_dilation_sum",
    "window_window_dilation_product",
    "window_base_dilation_0",
    "window_base_dilation_1",
    "window_base_dilation_2",
    "window_base_dilation_3",
    "window_base_dilation_4",
    "window_base_dilation_5",
    "window_base_dilation_sum",
    "window_base_dilation_product",
    "window_window_reversal_0",
    "window_window_reversal_1",
    "window_window_reversal_2",
    "window_window_reversal_3",
    "window_window_reversal_4",
    "window_window_reversal_5",
    "window_window_reversal_true_count",
    "window_window_reversal_false_count",
    "convolution_dim_numbers_input_batch_dim",
    "convolution_dim_numbers_input_feature_dim",
    "convolution_dim_numbers_input_spatial_dims_0",
    "convolution_dim_numbers_input_spatial_dims_1",
    "convolution_dim_numbers_input_spatial_dims_2",
    "convolution_dim_numbers_input_spatial_dims_3",
    "convolution_dim_numbers_kernel_input_feature_dim",
    "convolution_dim_numbers_kernel_output_feature_dim",
    "convolution_dim_numbers_kernel_spatial_dims_0",
    "convolution_dim_numbers_kernel_spatial_dims_1",
    "convolution_dim_numbers_kernel_spatial_dims_2",
    "convolution_dim_numbers_kernel_spatial_dims_3",
    "convolution_dim_numbers_output_batch_dim",
    "convolution_dim_numbers_output_feature_dim",
    "feature_group_count",
    "batch_group_count",
    "slice_dims_start_0",
    "slice_dims_start_1",
    "slice_dims_start_sum",
    "slice_dims_start_product",
    "slice_dims_stride_0",
    "slice_dims_stride_1",
    "slice_dims_stride_sum",
    "slice_dims_stride_product",
    "slice_dims_limit_0",
    "slice_dims_limit_1",
    "slice_dims_limit_sum",
    "slice_dims_limit_product",
    "dynamic_slice_sizes_0",
    "dynamic_slice_sizes_1",
    "dynamic_slice_sizes_sum",
    "dynamic_slice_sizes_product",
    "padding_config_edge_padding_low_0",
    "padding_config_edge_padding_low_1",
    "padding_config_edge_padding_low_sum",
    "padding_config_edge_padding_low_product",
    "padding_config_edge_padding_high_0",
    "padding_config_edge_padding_high_1",
    "padding_config_edge_padding_high_sum",
    "padding_config_edge_padding_high_product",
    "is_stable",
    "layout_minor_to_major_0",
    "layout_minor_to_major_1",
    "layout_minor_to_major_2",
    "layout_minor_to_major_3",
    "layout_minor_to_major_4",
    "layout_minor_to_major_5",
];

/// Column index of a feature name.
pub fn feature_index(name: &str) -> Option<usize> {
    FEATURE_NAMES.iter().position(|n| *n == name)
}

/// First column of each feature group (spec §2 table).
pub mod col {
    pub const IS_ROOT: usize = 0;
    pub const ELEMENT_SIZE_IN_BITS: usize = 1;
    /// 19 one-hot columns in the order of [`super::PRIMITIVE_TYPE_FEATURES`].
    pub const ELEMENT_TYPE: usize = 2;
    pub const SHAPE_DIMS: usize = 21;
    pub const SHAPE_DIMS_SUM: usize = 27;
    pub const SHAPE_DIMS_PRODUCT: usize = 28;
    pub const TUPLE_SHAPES_SIZE: usize = 29;
    pub const PARAMETER_NUMBER: usize = 30;
    pub const DIMENSIONS: usize = 31;
    pub const WINDOW_SIZE: usize = 37;
    pub const WINDOW_STRIDE: usize = 45;
    pub const WINDOW_PADDING_LOW: usize = 53;
    pub const WINDOW_PADDING_HIGH: usize = 61;
    pub const WINDOW_DILATION: usize = 69;
    pub const WINDOW_BASE_DILATION: usize = 77;
    pub const WINDOW_REVERSAL: usize = 85;
    pub const WINDOW_REVERSAL_TRUE_COUNT: usize = 91;
    pub const WINDOW_REVERSAL_FALSE_COUNT: usize = 92;
    pub const CONV_INPUT_BATCH: usize = 93;
    pub const CONV_INPUT_FEATURE: usize = 94;
    pub const CONV_INPUT_SPATIAL: usize = 95;
    pub const CONV_KERNEL_INPUT_FEATURE: usize = 99;
    pub const CONV_KERNEL_OUTPUT_FEATURE: usize = 100;
    pub const CONV_KERNEL_SPATIAL: usize = 101;
    pub const CONV_OUTPUT_BATCH: usize = 105;
    pub const CONV_OUTPUT_FEATURE: usize = 106;
    pub const FEATURE_GROUP_COUNT: usize = 107;
    pub const BATCH_GROUP_COUNT: usize = 108;
    pub const SLICE_START: usize = 109;
    pub const SLICE_STRIDE: usize = 113;
    pub const SLICE_LIMIT: usize = 117;
    pub const DYNAMIC_SLICE_SIZES: usize = 121;
    pub const PADDING_LOW: usize = 125;
    pub const PADDING_HIGH: usize = 129;
    pub const IS_STABLE: usize = 133;
    pub const LAYOUT_MINOR_TO_MAJOR: usize = 134;
}

/// Element types of the one-hot block (columns 2..=20), in the featurizer's order
/// (`PRIMITIVE_TYPE_FEATURES`); other types (f8, s4, ...) leave the block all zero.
pub const PRIMITIVE_TYPE_FEATURES: [PrimitiveType; 19] = [
    PrimitiveType::Invalid,
    PrimitiveType::Pred,
    PrimitiveType::S8,
    PrimitiveType::S16,
    PrimitiveType::S32,
    PrimitiveType::S64,
    PrimitiveType::U8,
    PrimitiveType::U16,
    PrimitiveType::U32,
    PrimitiveType::U64,
    PrimitiveType::F16,
    PrimitiveType::F32,
    PrimitiveType::F64,
    PrimitiveType::Bf16,
    PrimitiveType::C64,
    PrimitiveType::C128,
    PrimitiveType::Tuple,
    PrimitiveType::OpaqueType,
    PrimitiveType::Token,
];

/// Options of the node featurizer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeatureOptions {
    /// Pad the no-aggregate lists (columns 31–36, 95–98, 101–104, 134–139) with −1
    /// instead of the official 0 (spec §2 "known defect").
    pub pad_minus_one: bool,
}

/// `FixedNumericSequenceFeatures<K>`: K leading values (0-padded), sum, product
/// (product of an empty list = 1). Writes `K + 2` values.
#[inline]
fn seq_agg<const K: usize>(out: &mut [f32], vals: impl IntoIterator<Item = i64>) {
    let (lead, tail) = out.split_at_mut(K);
    lead.fill(0.0);
    let mut sum: i64 = 0;
    let mut product: i64 = 1;
    let mut slots = lead.iter_mut();
    for v in vals {
        sum = sum.wrapping_add(v);
        product = product.wrapping_mul(v);
        if let Some(s) = slots.next() {
            *s = v as f32;
        }
    }
    if let [s, p, ..] = tail {
        *s = sum as f32;
        *p = product as f32;
    }
}

/// `FixedNumericSequenceFeaturesNoAggregate<K>`: `out.len()` leading values, padded.
#[inline]
fn seq_no_agg(out: &mut [f32], vals: impl IntoIterator<Item = i64>, pad: f32) {
    out.fill(pad);
    for (s, v) in out.iter_mut().zip(vals) {
        *s = v as f32;
    }
}

/// `FeaturizeVariableLengthBools<6>`: 6 leading 0/1 values, true count, false count.
#[inline]
fn bools6(out: &mut [f32], vals: impl IntoIterator<Item = bool>) {
    let (lead, tail) = out.split_at_mut(6);
    lead.fill(0.0);
    let (mut t, mut f) = (0i64, 0i64);
    let mut slots = lead.iter_mut();
    for b in vals {
        if let Some(s) = slots.next() {
            *s = if b { 1.0 } else { 0.0 };
        }
        if b {
            t += 1;
        } else {
            f += 1;
        }
    }
    if let [a, b, ..] = tail {
        *a = t as f32;
        *b = f as f32;
    }
}

/// Fill one 140-wide feature row for `instr`. `is_root` = the instruction is the root
/// of its computation. Every column is written (the buffer need not be zeroed).
/// Allocation-free.
pub fn write_node_features(
    instr: &Instruction,
    is_root: bool,
    opts: FeatureOptions,
    out: &mut [f32; NODE_FEATURE_COUNT],
) {
    let pad = if opts.pad_minus_one { -1.0 } else { 0.0 };
    let a = &instr.attrs;
    out[col::IS_ROOT] = if is_root { 1.0 } else { 0.0 };
    out[col::ELEMENT_SIZE_IN_BITS] = 0.0;

    // Shape: element type one-hot, dims, tuple size.
    let ety = instr.shape.element_type();
    for (slot, t) in out[col::ELEMENT_TYPE..col::SHAPE_DIMS]
        .iter_mut()
        .zip(PRIMITIVE_TYPE_FEATURES.iter())
    {
        *slot = if *t == ety { 1.0 } else { 0.0 };
    }
    seq_agg::<6>(
        &mut out[col::SHAPE_DIMS..col::TUPLE_SHAPES_SIZE],
        instr.shape.dims().iter().copied(),
    );
    out[col::TUPLE_SHAPES_SIZE] = match &*instr.shape {
        Shape::Tuple(v) => v.len() as f32,
        _ => 0.0,
    };
    out[col::PARAMETER_NUMBER] = match instr.opcode {
        Opcode::Parameter => a.parameter_number.unwrap_or(0) as f32,
        _ => 0.0,
    };

    // `dimensions` proto field.
    let dims_field: &[i64] = match (&a.dimensions, instr.opcode, &a.iota_dimension) {
        (Some(d), _, _) => d,
        (None, Opcode::Iota, Some(d)) => std::slice::from_ref(d),
        _ => &[],
    };
    seq_no_agg(
        &mut out[col::DIMENSIONS..col::WINDOW_SIZE],
        dims_field.iter().copied(),
        pad,
    );

    // Window.
    let wd: &[crate::ir::WindowDim] = match &a.window {
        Some(w) => &w.dims,
        None => &[],
    };
    seq_agg::<6>(
        &mut out[col::WINDOW_SIZE..col::WINDOW_STRIDE],
        wd.iter().map(|d| d.size),
    );
    seq_agg::<6>(
        &mut out[col::WINDOW_STRIDE..col::WINDOW_PADDING_LOW],
        wd.iter().map(|d| d.stride),
    );
    seq_agg::<6>(
        &mut out[col::WINDOW_PADDING_LOW..col::WINDOW_PADDING_HIGH],
        wd.iter().map(|d| d.pad_low),
    );
    seq_agg::<6>(
        &mut out[col::WINDOW_PADDING_HIGH..col::WINDOW_DILATION],
        wd.iter().map(|d| d.pad_high),
    );
    seq_agg::<6>(
        &mut out[col::WINDOW_DILATION..col::WINDOW_BASE_DILATION],
        wd.iter().map(|d| d.window_dilation),
    );
    seq_agg::<6>(
        &mut out[col::WINDOW_BASE_DILATION..col::WINDOW_REVERSAL],
        wd.iter().map(|d| d.base_dilation),
    );
    bools6(
        &mut out[col::WINDOW_REVERSAL..col::CONV_INPUT_BATCH],
        wd.iter().map(|d| d.window_reversal),
    );

    // Convolution dimension numbers (all 0 when absent; spatial lists padded).
    let cd = a.conv_dims.as_deref();
    let field = |f: fn(&crate::ir::ConvDims) -> i64| cd.map(f).unwrap_or(0) as f32;
    out[col::CONV_INPUT_BATCH] = field(|c| c.input_batch);
    out[col::CONV_INPUT_FEATURE] = field(|c| c.input_feature);
    seq_no_agg(
        &mut out[col::CONV_INPUT_SPATIAL..col::CONV_KERNEL_INPUT_FEATURE],
        cd.map(|c| &c.input_spatial[..])
            .unwrap_or(&[])
            .iter()
            .copied(),
        pad,
    );
    out[col::CONV_KERNEL_INPUT_FEATURE] = field(|c| c.kernel_input_feature);
    out[col::CONV_KERNEL_OUTPUT_FEATURE] = field(|c| c.kernel_output_feature);
    seq_no_agg(
        &mut out[col::CONV_KERNEL_SPATIAL..col::CONV_OUTPUT_BATCH],
        cd.map(|c| &c.kernel_spatial[..])
            .unwrap_or(&[])
            .iter()
            .copied(),
        pad,
    );
    out[col::CONV_OUTPUT_BATCH] = field(|c| c.output_batch);
    out[col::CONV_OUTPUT_FEATURE] = field(|c| c.output_feature);

    // Group counts: XLA writes them for convolution and custom-call only.
    let (fgc, bgc) = match instr.opcode {
        Opcode::Convolution | Opcode::CustomCall => (
            a.feature_group_count.unwrap_or(1),
            a.batch_group_count.unwrap_or(1),
        ),
        _ => (0, 0),
    };
    out[col::FEATURE_GROUP_COUNT] = fgc as f32;
    out[col::BATCH_GROUP_COUNT] = bgc as f32;

    // Slice dimensions.
    let sl: &[crate::ir::SliceDim] = a.slice.as_deref().unwrap_or(&[]);
    seq_agg::<2>(
        &mut out[col::SLICE_START..col::SLICE_STRIDE],
        sl.iter().map(|d| d.start),
    );
    seq_agg::<2>(
        &mut out[col::SLICE_STRIDE..col::SLICE_LIMIT],
        sl.iter().map(|d| d.stride),
    );
    seq_agg::<2>(
        &mut out[col::SLICE_LIMIT..col::DYNAMIC_SLICE_SIZES],
        sl.iter().map(|d| d.limit),
    );
    seq_agg::<2>(
        &mut out[col::DYNAMIC_SLICE_SIZES..col::PADDING_LOW],
        a.dynamic_slice_sizes
            .as_deref()
            .unwrap_or(&[])
            .iter()
            .copied(),
    );

    // Padding config (edge padding only).
    let pd: &[crate::ir::PadDim] = a.padding.as_deref().unwrap_or(&[]);
    seq_agg::<2>(
        &mut out[col::PADDING_LOW..col::PADDING_HIGH],
        pd.iter().map(|d| d.low),
    );
    seq_agg::<2>(
        &mut out[col::PADDING_HIGH..col::IS_STABLE],
        pd.iter().map(|d| d.high),
    );
    out[col::IS_STABLE] = if a.is_stable == Some(true) { 1.0 } else { 0.0 };

    // Layout of the output shape.
    let m2m: &[i64] = match &*instr.shape {
        Shape::Array(arr) => arr
            .layout
            .as_ref()
            .map(|l| &l.minor_to_major[..])
            .unwrap_or(&[]),
        _ => &[],
    };
    seq_no_agg(
        &mut out[col::LAYOUT_MINOR_TO_MAJOR..],
        m2m.iter().copied(),
        pad,
    );
}

/// The feature row of one instruction (convenience wrapper of [`write_node_features`]).
pub fn node_features(
    instr: &Instruction,
    is_root: bool,
    opts: FeatureOptions,
) -> [f32; NODE_FEATURE_COUNT] {
    let mut row = [0.0f32; NODE_FEATURE_COUNT];
    write_node_features(instr, is_root, opts, &mut row);
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_column_constants() {
        assert_eq!(FEATURE_NAMES.len(), 140);
        assert_eq!(feature_index("is_root"), Some(col::IS_ROOT));
        assert_eq!(feature_index("shape_element_type_is_f32"), Some(13));
        assert_eq!(feature_index("shape_element_type_is_token"), Some(20));
        assert_eq!(
            feature_index("shape_dimensions_product"),
            Some(col::SHAPE_DIMS_PRODUCT)
        );
        assert_eq!(feature_index("window_size_0"), Some(col::WINDOW_SIZE));
        assert_eq!(feature_index("window_stride_0"), Some(col::WINDOW_STRIDE));
        assert_eq!(
            feature_index("window_padding_low_0"),
            Some(col::WINDOW_PADDING_LOW)
        );
        assert_eq!(
            feature_index("window_padding_high_0"),
            Some(col::WINDOW_PADDING_HIGH)
        );
        assert_eq!(
            feature_index("window_window_dilation_0"),
            Some(col::WINDOW_DILATION)
        );
        assert_eq!(
            feature_index("window_base_dilation_0"),
            Some(col::WINDOW_BASE_DILATION)
        );
        assert_eq!(
            feature_index("window_window_reversal_0"),
            Some(col::WINDOW_REVERSAL)
        );
        assert_eq!(
            feature_index("convolution_dim_numbers_kernel_spatial_dims_0"),
            Some(col::CONV_KERNEL_SPATIAL)
        );
        assert_eq!(
            feature_index("batch_group_count"),
            Some(col::BATCH_GROUP_COUNT)
        );
        assert_eq!(feature_index("slice_dims_limit_product"), Some(120));
        assert_eq!(
            feature_index("dynamic_slice_sizes_0"),
            Some(col::DYNAMIC_SLICE_SIZES)
        );
        assert_eq!(
            feature_index("padding_config_edge_padding_high_product"),
            Some(132)
        );
        assert_eq!(feature_index("layout_minor_to_major_5"), Some(139));
        let mut uniq: Vec<&str> = FEATURE_NAMES.to_vec();
        uniq.sort_unstable();
        uniq.dedup();
        assert_eq!(uniq.len(), 140);
    }

    #[test]
    fn sequence_helpers() {
        let mut o = [9.0f32; 8];
        seq_agg::<6>(&mut o, [2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(o, [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 35.0, 40320.0]);
        seq_agg::<6>(&mut o, []);
        assert_eq!(o, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
        let mut n = [9.0f32; 4];
        seq_no_agg(&mut n, [3, 1], -1.0);
        assert_eq!(n, [3.0, 1.0, -1.0, -1.0]);
        let mut b = [9.0f32; 8];
        bools6(&mut b, [true, false, true]);
        assert_eq!(b, [1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 1.0]);
    }
}
