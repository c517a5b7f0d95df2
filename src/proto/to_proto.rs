//! IR → `HloModuleProto`, for writing raw TpuGraphs `ModuleTuningData` files.
//!
//! Written: computations (callees first, entry last), instructions in program order
//! with module-wide ids, operands, control predecessors, called computations (a
//! `while` stores `[body, condition]` as XLA does), shapes with layouts and tiles,
//! and every typed attribute of the IR but one. Not written: metadata, sharding,
//! frontend attributes, custom-call side effects and the other verbatim attributes; constants carry their value only for
//! scalars of the common element types (others read back as `{...}`).

use std::collections::HashMap;

use super::xla;
use crate::ir::{CallRole, Comparison, Computation, InstrId, Module, Opcode, PrimitiveType, Shape};

fn shape_proto(s: &Shape) -> xla::ShapeProto {
    match s {
        Shape::Array(a) => xla::ShapeProto {
            element_type: a.element_type.proto_number(),
            dimensions: a.dims.iter().map(|&d| d.max(0)).collect(),
            is_dynamic_dimension: if a.dynamic_mask == 0 {
                Vec::new()
            } else {
                (0..a.rank()).map(|i| a.is_dynamic_dim(i)).collect()
            },
            layout: a.layout.as_ref().map(|l| xla::LayoutProto {
                minor_to_major: l.minor_to_major.to_vec(),
                tiles: l
                    .tiles
                    .iter()
                    .map(|t| xla::TileProto {
                        dimensions: t
                            .dims
                            .iter()
                            .map(|&d| if d == -1 { i64::MIN } else { d })
                            .collect(),
                    })
                    .collect(),
                element_size_in_bits: l.element_size_in_bits,
                memory_space: l.memory_space,
                tail_padding_alignment_in_elements: l.tail_padding_alignment,
            }),
            ..Default::default()
        },
        Shape::Tuple(v) => xla::ShapeProto {
            element_type: PrimitiveType::Tuple.proto_number(),
            tuple_shapes: v.iter().map(shape_proto).collect(),
            ..Default::default()
        },
        Shape::Buffer(b) => xla::ShapeProto {
            element_type: PrimitiveType::Buffer.proto_number(),
            tuple_shapes: vec![shape_proto(b)],
            ..Default::default()
        },
    }
}

/// A scalar literal's value, for the common element types.
fn scalar_literal(text: &str, s: &Shape) -> Option<xla::LiteralProto> {
    let a = s.as_array()?;
    if a.rank() != 0 {
        return None;
    }
    let t = text.trim();
    let mut lit = xla::LiteralProto {
        shape: Some(shape_proto(s)),
        ..Default::default()
    };
    match a.element_type {
        PrimitiveType::F32 => lit.f32s = vec![parse_float(t)? as f32],
        PrimitiveType::F64 => lit.f64s = vec![parse_float(t)?],
        PrimitiveType::S32 => lit.s32s = vec![t.parse().ok()?],
        PrimitiveType::S64 => lit.s64s = vec![t.parse().ok()?],
        PrimitiveType::U32 => lit.u32s = vec![t.parse().ok()?],
        PrimitiveType::Pred => lit.preds = vec![matches!(t, "true" | "1")],
        _ => return None,
    }
    Some(lit)
}

fn parse_float(t: &str) -> Option<f64> {
    match t {
        "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        _ if t.trim_start_matches('-').starts_with("nan") => Some(f64::NAN),
        _ => t.parse().ok(),
    }
}

fn comparison_name(c: Comparison) -> String {
    c.name().to_string()
}

/// Build the proto of a module.
pub fn module_to_proto(m: &Module) -> xla::HloModuleProto {
    let mut next_id: i64 = 1;
    let mut computations = Vec::with_capacity(m.computations.len());
    // Fused computations are those called through `calls` by a fusion.
    let mut is_fusion = vec![false; m.computations.len()];
    for c in m.computations.values() {
        for &n in &c.order {
            let ins = c.instr(n);
            if ins.opcode == Opcode::Fusion {
                for (r, cid) in &ins.attrs.called {
                    if *r == CallRole::Calls {
                        if let Some(f) = is_fusion.get_mut(*cid) {
                            *f = true;
                        }
                    }
                }
            }
        }
    }
    let comp_id = |i: usize| i as i64 + 1;
    for (ci, c) in m.computations.values().enumerate() {
        computations.push(computation_proto(
            c,
            comp_id(ci),
            is_fusion[ci],
            &mut next_id,
            &comp_id,
        ));
    }
    let entry = m.entry();
    xla::HloModuleProto {
        name: m.name.clone(),
        entry_computation_name: entry.name.clone(),
        entry_computation_id: comp_id(m.entry),
        host_program_shape: computations
            .get(m.entry)
            .and_then(|c| c.program_shape.clone()),
        computations,
        ..Default::default()
    }
}

fn computation_proto(
    c: &Computation,
    id: i64,
    is_fusion: bool,
    next_id: &mut i64,
    comp_id: &dyn Fn(usize) -> i64,
) -> xla::HloComputationProto {
    let mut ids: HashMap<InstrId, i64> = HashMap::with_capacity(c.len());
    for &n in &c.order {
        ids.insert(n, *next_id);
        *next_id += 1;
    }
    let by_name: HashMap<&str, i64> = c
        .order
        .iter()
        .map(|&n| (c.instr(n).name.as_str(), ids[&n]))
        .collect();
    let mut instructions = Vec::with_capacity(c.len());
    for &n in &c.order {
        let ins = c.instr(n);
        let a = &ins.attrs;
        let mut p = xla::HloInstructionProto {
            name: ins.name.to_string(),
            opcode: ins.opcode.name().to_string(),
            shape: Some(shape_proto(&ins.shape)),
            id: ids[&n],
            operand_ids: c.operands(n).iter().map(|o| ids[o]).collect(),
            control_predecessor_ids: a
                .control_predecessors
                .iter()
                .filter_map(|p| by_name.get(p.as_str()).copied())
                .collect(),
            ..Default::default()
        };
        // Called computations: `while` is [body, condition], conditionals
        // [true, false] or the branches in order, everything else as written.
        let mut called: Vec<(CallRole, usize)> = a.called.iter().copied().collect();
        let rank = |r: CallRole| match r {
            CallRole::Body | CallRole::TrueComputation => 0,
            CallRole::Condition | CallRole::FalseComputation => 1,
            _ => 2,
        };
        called.sort_by_key(|(r, _)| rank(*r));
        p.called_computation_ids = called.iter().map(|(_, cid)| comp_id(*cid)).collect();
        if let Some(d) = &a.dimensions {
            p.dimensions = d.to_vec();
        }
        if let Some(d) = a.iota_dimension {
            p.dimensions = vec![d];
        }
        if let Some(w) = &a.window {
            p.window = Some(Box::new(xla::Window {
                dimensions: w
                    .dims
                    .iter()
                    .map(|d| xla::WindowDimension {
                        size: d.size,
                        stride: d.stride,
                        padding_low: d.pad_low,
                        padding_high: d.pad_high,
                        window_dilation: d.window_dilation,
                        base_dilation: d.base_dilation,
                        window_reversal: d.window_reversal,
                    })
                    .collect(),
            }));
        }
        if let Some(d) = &a.conv_dims {
            p.convolution_dimension_numbers = Some(Box::new(xla::ConvolutionDimensionNumbers {
                input_batch_dimension: d.input_batch,
                input_feature_dimension: d.input_feature,
                input_spatial_dimensions: d.input_spatial.to_vec(),
                kernel_input_feature_dimension: d.kernel_input_feature,
                kernel_output_feature_dimension: d.kernel_output_feature,
                kernel_spatial_dimensions: d.kernel_spatial.to_vec(),
                output_batch_dimension: d.output_batch,
                output_feature_dimension: d.output_feature,
                output_spatial_dimensions: d.output_spatial.to_vec(),
            }));
        }
        if let Some(d) = &a.dot_dims {
            p.dot_dimension_numbers = Some(Box::new(xla::DotDimensionNumbers {
                lhs_contracting_dimensions: d.lhs_contracting.to_vec(),
                rhs_contracting_dimensions: d.rhs_contracting.to_vec(),
                lhs_batch_dimensions: d.lhs_batch.to_vec(),
                rhs_batch_dimensions: d.rhs_batch.to_vec(),
            }));
        }
        if let Some(s) = &a.slice {
            p.slice_dimensions = s
                .iter()
                .map(|d| xla::hlo_instruction_proto::SliceDimensions {
                    start: d.start,
                    limit: d.limit,
                    stride: d.stride,
                })
                .collect();
        }
        if let Some(pd) = &a.padding {
            p.padding_config = Some(Box::new(xla::PaddingConfig {
                dimensions: pd
                    .iter()
                    .map(|d| xla::padding_config::PaddingConfigDimension {
                        edge_padding_low: d.low,
                        edge_padding_high: d.high,
                        interior_padding: d.interior,
                    })
                    .collect(),
            }));
        }
        if let Some(k) = a.fusion_kind {
            p.fusion_kind = k.name().to_string();
        }
        if let Some(c) = a.comparison {
            p.comparison_direction = comparison_name(c);
        }
        if let Some(t) = &a.comparison_type {
            p.comparison_type = t.clone();
        }
        p.tuple_index = a.tuple_index.unwrap_or(0);
        p.parameter_number = a.parameter_number.unwrap_or(0);
        if let (Opcode::Constant, Some(text)) = (ins.opcode, &a.literal) {
            p.literal = scalar_literal(text, &ins.shape).map(Box::new);
        }
        p.feature_group_count = a.feature_group_count.unwrap_or(0);
        p.batch_group_count = a.batch_group_count.unwrap_or(0);
        if let Some(l) = &a.fft_length {
            p.fft_length = l.to_vec();
        }
        if let Some(g) = &a.gather {
            p.gather_dimension_numbers = Some(Box::new(xla::GatherDimensionNumbers {
                offset_dims: g.offset_dims.to_vec(),
                collapsed_slice_dims: g.collapsed_slice_dims.to_vec(),
                start_index_map: g.start_index_map.to_vec(),
                index_vector_dim: g.index_vector_dim,
                operand_batching_dims: g.operand_batching_dims.to_vec(),
                start_indices_batching_dims: g.start_indices_batching_dims.to_vec(),
            }));
            p.gather_slice_sizes = g.slice_sizes.to_vec();
        }
        if let Some(s) = &a.scatter {
            p.scatter_dimension_numbers = Some(Box::new(xla::ScatterDimensionNumbers {
                update_window_dims: s.update_window_dims.to_vec(),
                inserted_window_dims: s.inserted_window_dims.to_vec(),
                scatter_dims_to_operand_dims: s.scatter_dims_to_operand_dims.to_vec(),
                index_vector_dim: s.index_vector_dim,
                input_batching_dims: s.input_batching_dims.to_vec(),
                scatter_indices_batching_dims: s.scatter_indices_batching_dims.to_vec(),
            }));
        }
        if let Some(d) = &a.dynamic_slice_sizes {
            p.dynamic_slice_sizes = d.to_vec();
        }
        p.is_stable = a.is_stable.unwrap_or(false);
        p.indices_are_sorted = a.indices_are_sorted.unwrap_or(false);
        p.unique_indices = a.unique_indices.unwrap_or(false);
        if let Some(t) = &a.custom_call_target {
            p.custom_call_target = t.clone();
        }
        p.epsilon = a.epsilon.unwrap_or(0.0);
        p.feature_index = a.feature_index.unwrap_or(0);
        p.exponent_bits = a.exponent_bits.unwrap_or(0) as i32;
        p.mantissa_bits = a.mantissa_bits.unwrap_or(0) as i32;
        p.channel_id = a.channel_id.unwrap_or(0);
        instructions.push(p);
    }
    let params: Vec<xla::ShapeProto> = c
        .params
        .iter()
        .map(|&p| shape_proto(&c.instr(p).shape))
        .collect();
    let names: Vec<String> = c
        .params
        .iter()
        .map(|&p| c.instr(p).name.to_string())
        .collect();
    xla::HloComputationProto {
        name: c.name.clone(),
        root_id: ids.get(&c.root).copied().unwrap_or(0),
        id,
        is_fusion_computation: is_fusion,
        execution_thread: c.execution_thread.clone().unwrap_or_default(),
        program_shape: Some(xla::ProgramShapeProto {
            parameters: params,
            result: c.graph.node_weight(c.root).map(|r| shape_proto(&r.shape)),
            parameter_names: names,
        }),
        instructions,
    }
}
