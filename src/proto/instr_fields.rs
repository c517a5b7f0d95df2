//! Field numbers of `xla.HloInstructionProto` (`proto/hlo.proto`) that the reader
//! decodes by number from the wire view ([`super::view::InstructionView`]) rather than
//! through the generated message: one name per number, each checked against the schema
//! by the test below.

pub const FUSION_KIND: u32 = 11;
pub const EXPONENT_BITS: u32 = 18;
pub const MANTISSA_BITS: u32 = 19;
pub const DYNAMIC_SLICE_SIZES: u32 = 20;
pub const OUTFEED_CONFIG: u32 = 22;
pub const DISTRIBUTION: u32 = 23;
pub const EPSILON: u32 = 24;
pub const FEATURE_INDEX: u32 = 25;
pub const CHANNEL_ID: u32 = 26;
pub const INFEED_CONFIG: u32 = 27;
pub const CUSTOM_CALL_TARGET: u32 = 28;
pub const FFT_TYPE: u32 = 31;
pub const FFT_LENGTH: u32 = 32;
pub const GATHER_SLICE_SIZES: u32 = 34;
pub const BACKEND_CONFIG: u32 = 43;
pub const IS_HOST_TRANSFER: u32 = 47;
pub const FEATURE_GROUP_COUNT: u32 = 50;
pub const CONSTRAIN_LAYOUT: u32 = 56;
pub const BATCH_GROUP_COUNT: u32 = 58;
pub const IS_STABLE: u32 = 60;
pub const COMPARISON_DIRECTION: u32 = 63;
pub const CUSTOM_CALL_HAS_SIDE_EFFECT: u32 = 65;
pub const DELTA: u32 = 66;
pub const INDICES_ARE_SORTED: u32 = 67;
pub const UNIQUE_INDICES: u32 = 69;
pub const RNG_ALGORITHM: u32 = 70;
pub const USE_GLOBAL_DEVICE_IDS: u32 = 71;
pub const COMPARISON_TYPE: u32 = 72;
pub const CUSTOM_CALL_SCHEDULE: u32 = 76;
pub const CUSTOM_CALL_API_VERSION: u32 = 77;
pub const ASYNC_EXECUTION_THREAD: u32 = 79;
pub const K: u32 = 81;
pub const LARGEST: u32 = 85;
pub const IS_COMPOSITE: u32 = 89;
pub const IS_REVERSE: u32 = 94;
pub const NUM_CARRIES: u32 = 95;

pub const METADATA: u32 = 7;
pub const LITERAL: u32 = 8;
pub const WINDOW: u32 = 15;
pub const CONVOLUTION_DIMENSION_NUMBERS: u32 = 16;
pub const SLICE_DIMENSIONS: u32 = 17;
pub const PADDING_CONFIG: u32 = 21;
pub const DOT_DIMENSION_NUMBERS: u32 = 30;
pub const REPLICA_GROUPS: u32 = 49;
pub const PRECISION_CONFIG: u32 = 51;
pub const SOURCE_TARGET_PAIRS: u32 = 52;
pub const FRONTEND_ATTRIBUTES: u32 = 68;
pub const OUTPUT_OPERAND_ALIASING: u32 = 74;
pub const COLLECTIVE_DEVICE_LIST: u32 = 87;
pub const RAGGED_DOT_DIMENSION_NUMBERS: u32 = 90;
pub const IOTA_COLLECTIVE_DEVICE_LIST: u32 = 92;

#[cfg(test)]
mod tests {
    /// Every constant is the number `proto/hlo.proto` gives the field of that name.
    #[test]
    fn numbers_are_the_schema_s() {
        let schema = include_str!("../../proto/hlo.proto");
        let start = schema.find("message HloInstructionProto {").unwrap();
        let body = &schema[start..];
        let number_of = |name: &str| -> Option<u32> {
            body.lines().find_map(|l| {
                let l = l.trim();
                let (decl, rest) = l.split_once('=')?;
                (decl.split_whitespace().last()? == name)
                    .then(|| {
                        rest.trim()
                            .trim_end_matches(';')
                            .split_whitespace()
                            .next()?
                            .parse()
                            .ok()
                    })
                    .flatten()
            })
        };
        for (name, n) in [
            ("fusion_kind", super::FUSION_KIND),
            ("exponent_bits", super::EXPONENT_BITS),
            ("mantissa_bits", super::MANTISSA_BITS),
            ("dynamic_slice_sizes", super::DYNAMIC_SLICE_SIZES),
            ("outfeed_config", super::OUTFEED_CONFIG),
            ("distribution", super::DISTRIBUTION),
            ("epsilon", super::EPSILON),
            ("feature_index", super::FEATURE_INDEX),
            ("channel_id", super::CHANNEL_ID),
            ("infeed_config", super::INFEED_CONFIG),
            ("custom_call_target", super::CUSTOM_CALL_TARGET),
            ("fft_type", super::FFT_TYPE),
            ("fft_length", super::FFT_LENGTH),
            ("gather_slice_sizes", super::GATHER_SLICE_SIZES),
            ("backend_config", super::BACKEND_CONFIG),
            ("is_host_transfer", super::IS_HOST_TRANSFER),
            ("feature_group_count", super::FEATURE_GROUP_COUNT),
            ("constrain_layout", super::CONSTRAIN_LAYOUT),
            ("batch_group_count", super::BATCH_GROUP_COUNT),
            ("is_stable", super::IS_STABLE),
            ("comparison_direction", super::COMPARISON_DIRECTION),
            (
                "custom_call_has_side_effect",
                super::CUSTOM_CALL_HAS_SIDE_EFFECT,
            ),
            ("delta", super::DELTA),
            ("indices_are_sorted", super::INDICES_ARE_SORTED),
            ("unique_indices", super::UNIQUE_INDICES),
            ("rng_algorithm", super::RNG_ALGORITHM),
            ("use_global_device_ids", super::USE_GLOBAL_DEVICE_IDS),
            ("comparison_type", super::COMPARISON_TYPE),
            ("custom_call_schedule", super::CUSTOM_CALL_SCHEDULE),
            ("custom_call_api_version", super::CUSTOM_CALL_API_VERSION),
            ("async_execution_thread", super::ASYNC_EXECUTION_THREAD),
            ("k", super::K),
            ("largest", super::LARGEST),
            ("is_composite", super::IS_COMPOSITE),
            ("is_reverse", super::IS_REVERSE),
            ("num_carries", super::NUM_CARRIES),
            ("metadata", super::METADATA),
            ("literal", super::LITERAL),
            ("window", super::WINDOW),
            (
                "convolution_dimension_numbers",
                super::CONVOLUTION_DIMENSION_NUMBERS,
            ),
            ("slice_dimensions", super::SLICE_DIMENSIONS),
            ("padding_config", super::PADDING_CONFIG),
            ("dot_dimension_numbers", super::DOT_DIMENSION_NUMBERS),
            ("replica_groups", super::REPLICA_GROUPS),
            ("precision_config", super::PRECISION_CONFIG),
            ("source_target_pairs", super::SOURCE_TARGET_PAIRS),
            ("frontend_attributes", super::FRONTEND_ATTRIBUTES),
            ("output_operand_aliasing", super::OUTPUT_OPERAND_ALIASING),
            ("collective_device_list", super::COLLECTIVE_DEVICE_LIST),
            (
                "ragged_dot_dimension_numbers",
                super::RAGGED_DOT_DIMENSION_NUMBERS,
            ),
            (
                "iota_collective_device_list",
                super::IOTA_COLLECTIVE_DEVICE_LIST,
            ),
        ] {
            assert_eq!(number_of(name), Some(n), "{name}");
        }
    }
}
