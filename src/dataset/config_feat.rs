//! Configuration features (spec §4): the 24 tile-config floats of `config_feat` and the
//! 18 layout-config floats per configurable node of `node_config_feat`.

use serde::{Deserialize, Serialize};

/// Width of a tile `config_feat` row.
pub const TILE_CONFIG_FEATURE_COUNT: usize = 24;
/// Width of one `node_config_feat[j, k]` entry.
pub const LAYOUT_CONFIG_FEATURE_COUNT: usize = 18;

/// `tpu_graphs.TileSizeConfig` (`proto/tuning.proto`); `iteration_bounds` is not
/// featurised and therefore not modelled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TileSizeConfig {
    /// Convolution kernel tile (empty for non-convolution kernels).
    pub kernel_bounds: Vec<i64>,
    /// Output tile sizes.
    pub output_bounds: Vec<i64>,
    /// Input tile sizes (usually empty).
    pub input_bounds: Vec<i64>,
}

/// One configurable node's layout choice: a minor_to_major prefix per tensor (the
/// most-minor dims first, up to the whole permutation, written as given); `None` = "let
/// the compiler choose" (all −1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LayoutConfig {
    pub output: Option<Vec<i64>>,
    pub input: Option<Vec<i64>>,
    /// Kernel (convolution only).
    pub kernel: Option<Vec<i64>>,
}

/// `FixedNumericSequenceFeatures<6>` with `zero_product_on_empty_source = true`.
fn bounds_features(out: &mut [f32], vals: &[i64]) {
    let (lead, tail) = out.split_at_mut(6);
    lead.fill(0.0);
    for (s, &v) in lead.iter_mut().zip(vals) {
        *s = v as f32;
    }
    let sum = vals.iter().fold(0i64, |a, &v| a.wrapping_add(v));
    let product = if vals.is_empty() {
        0
    } else {
        vals.iter().fold(1i64, |a, &v| a.wrapping_mul(v))
    };
    if let [s, p, ..] = tail {
        *s = sum as f32;
        *p = product as f32;
    }
}

/// Write the 24 tile features (`FeaturizeTileSizeConfig`): kernel_bounds 0..5, sum,
/// product; output_bounds 0..5, sum, product; input_bounds 0..5, sum, product. Padding
/// 0; the product of an empty list is 0 here.
pub fn write_tile_config_features(
    cfg: &TileSizeConfig,
    out: &mut [f32; TILE_CONFIG_FEATURE_COUNT],
) {
    let (k, rest) = out.split_at_mut(8);
    let (o, i) = rest.split_at_mut(8);
    bounds_features(k, &cfg.kernel_bounds);
    bounds_features(o, &cfg.output_bounds);
    bounds_features(i, &cfg.input_bounds);
}

/// The 24 tile features of a config.
pub fn tile_config_features(cfg: &TileSizeConfig) -> [f32; TILE_CONFIG_FEATURE_COUNT] {
    let mut out = [0.0; TILE_CONFIG_FEATURE_COUNT];
    write_tile_config_features(cfg, &mut out);
    out
}

/// Write the 18 layout features (`FeaturizeLayoutConfig`): output 0..5, input 0..5,
/// kernel 0..5, each the tensor's list (a minor_to_major prefix, at most 6 entries), −1
/// padded; `None` → six −1. `LayoutEntry::from_tpugraphs_row` reads a row back.
pub fn write_layout_config_features(
    cfg: &LayoutConfig,
    out: &mut [f32; LAYOUT_CONFIG_FEATURE_COUNT],
) {
    write_layout_tensor_features(
        [
            cfg.output.as_deref(),
            cfg.input.as_deref(),
            cfg.kernel.as_deref(),
        ],
        out,
    );
}

/// [`write_layout_config_features`] of the lists of a node's three tensors (output,
/// input, kernel), borrowed.
pub fn write_layout_tensor_features(
    tensors: [Option<&[i64]>; 3],
    out: &mut [f32; LAYOUT_CONFIG_FEATURE_COUNT],
) {
    out.fill(-1.0);
    for (chunk, tensor) in out.chunks_exact_mut(6).zip(tensors) {
        if let Some(dims) = tensor {
            for (s, &v) in chunk.iter_mut().zip(dims) {
                *s = v as f32;
            }
        }
    }
}

/// The 18 layout features of one configurable node.
pub fn layout_config_features(cfg: &LayoutConfig) -> [f32; LAYOUT_CONFIG_FEATURE_COUNT] {
    let mut out = [0.0; LAYOUT_CONFIG_FEATURE_COUNT];
    write_layout_config_features(cfg, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_features_of_the_sample_proto_defaults() {
        // op_tuning_data.pb: a conv kernel's default run (spec §4.1).
        let cfg = TileSizeConfig {
            kernel_bounds: vec![3, 1, 24, 3],
            output_bounds: vec![12, 4, 4, 3],
            input_bounds: vec![],
        };
        let f = tile_config_features(&cfg);
        assert_eq!(&f[0..8], &[3.0, 1.0, 24.0, 3.0, 0.0, 0.0, 31.0, 216.0]);
        assert_eq!(&f[8..16], &[12.0, 4.0, 4.0, 3.0, 0.0, 0.0, 23.0, 576.0]);
        assert_eq!(&f[16..24], &[0.0; 8]);
        let long = TileSizeConfig {
            output_bounds: vec![1, 2, 3, 4, 5, 6, 7],
            ..Default::default()
        };
        let f = tile_config_features(&long);
        assert_eq!(&f[0..8], &[0.0; 8]);
        assert_eq!(&f[8..16], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 28.0, 5040.0]);
    }

    #[test]
    fn layout_features_pad_with_minus_one() {
        let cfg = LayoutConfig {
            output: Some(vec![2, 1, 0]),
            input: Some(vec![3, 2, 1, 0]),
            kernel: None,
        };
        let f = layout_config_features(&cfg);
        assert_eq!(
            f,
            [
                2.0, 1.0, 0.0, -1.0, -1.0, -1.0, 3.0, 2.0, 1.0, 0.0, -1.0, -1.0, -1.0, -1.0, -1.0,
                -1.0, -1.0, -1.0
            ]
        );
        let mut borrowed = [0.0; LAYOUT_CONFIG_FEATURE_COUNT];
        write_layout_tensor_features([Some(&[2, 1, 0]), Some(&[3, 2, 1, 0]), None], &mut borrowed);
        assert_eq!(borrowed, f);
        assert_eq!(layout_config_features(&LayoutConfig::default()), [-1.0; 18]);
        let seven = LayoutConfig {
            kernel: Some(vec![6, 5, 4, 3, 2, 1, 0]),
            ..Default::default()
        };
        assert_eq!(
            &layout_config_features(&seven)[12..],
            &[6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
        );
    }
}
