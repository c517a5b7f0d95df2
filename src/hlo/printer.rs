//! Canonical HLO text printer. Output is accepted by XLA's parser and by ours, and
//! parse → print → parse gives an equal IR.

use std::fmt::Write;

use super::attrs::escape;
use crate::ir::*;

/// Print a module as canonical HLO text.
pub fn print_module(m: &Module) -> String {
    let mut out = String::with_capacity(m.instruction_count() * 96);
    out.push_str("HloModule ");
    write_bare_name(&mut out, &m.name);
    if let Some((params, result)) = &m.attrs.entry_computation_layout {
        out.push_str(", entry_computation_layout={(");
        for (i, p) in params.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write_shape(&mut out, p, true);
        }
        out.push_str(")->");
        write_shape(&mut out, result, true);
        out.push('}');
    }
    if m.attrs.is_scheduled {
        out.push_str(", is_scheduled=true");
    }
    for (k, v) in &m.attrs.other {
        let _ = write!(out, ", {k}={v}");
    }
    out.push_str("\n\n");
    if let Some(sf) = &m.stack_frames {
        out.push_str(sf);
        out.push_str("\n\n");
    }
    for (ci, c) in m.computations.values().enumerate() {
        print_computation(&mut out, m, c, ci == m.entry);
        out.push('\n');
    }
    out
}

/// A name where HLO text writes it without `%` (signatures, the module header): as is
/// when it starts with a letter or `_`, else with `%` (a name that starts with a digit,
/// which only the `%` form can hold).
fn write_bare_name(out: &mut String, name: &str) {
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.push('%');
    }
    out.push_str(name);
}

/// Print one computation.
pub fn print_computation(out: &mut String, m: &Module, c: &Computation, is_entry: bool) {
    if is_entry {
        out.push_str("ENTRY ");
    }
    out.push('%');
    out.push_str(&c.name);
    out.push_str(" (");
    for (i, &p) in c.params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let ins = c.instr(p);
        write_bare_name(out, &ins.name);
        out.push_str(": ");
        write_shape(out, &ins.shape, false);
    }
    out.push_str(") -> ");
    if let Some(r) = c.graph.node_weight(c.root) {
        write_shape(out, &r.shape, false);
    }
    out.push_str(" {\n");
    for &id in &c.order {
        out.push_str("  ");
        if id == c.root {
            out.push_str("ROOT ");
        }
        print_instruction(out, m, c, id);
        out.push('\n');
    }
    out.push('}');
    if let Some(t) = &c.execution_thread {
        let _ = write!(out, ", execution_thread=\"{}\"", escape(t));
    }
    out.push('\n');
}

/// Print one instruction (`%name = shape opcode(operands), attrs`), without indentation.
pub fn print_instruction(out: &mut String, m: &Module, c: &Computation, id: InstrId) {
    let ins = c.instr(id);
    out.push('%');
    out.push_str(&ins.name);
    out.push_str(" = ");
    write_shape(out, &ins.shape, true);
    out.push(' ');
    out.push_str(&ins.opcode_text());
    out.push('(');
    let a = &ins.attrs;
    match ins.opcode {
        Opcode::Constant => out.push_str(a.literal.as_deref().unwrap_or("0")),
        Opcode::Parameter => {
            let _ = write!(out, "{}", a.parameter_number.unwrap_or(0));
        }
        _ => {
            for (i, op) in c.operands(id).iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push('%');
                out.push_str(&c.instr(*op).name);
            }
        }
    }
    out.push(')');
    write_attrs(out, m, ins);
}

fn list(out: &mut String, v: &[i64]) {
    out.push('{');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{x}");
    }
    out.push('}');
}

fn write_attrs(out: &mut String, m: &Module, ins: &Instruction) {
    let a = &ins.attrs;
    if let Some(d) = &a.dimensions {
        out.push_str(", dimensions=");
        list(out, d);
    }
    if let Some(s) = &a.slice {
        out.push_str(", slice={");
        for (i, d) in s.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "[{}:{}", d.start, d.limit);
            if d.stride != 1 {
                let _ = write!(out, ":{}", d.stride);
            }
            out.push(']');
        }
        out.push('}');
    }
    if let Some(p) = &a.padding {
        out.push_str(", padding=");
        for (i, d) in p.iter().enumerate() {
            if i > 0 {
                out.push('x');
            }
            let _ = write!(out, "{}_{}", d.low, d.high);
            if d.interior != 0 {
                let _ = write!(out, "_{}", d.interior);
            }
        }
    }
    if let Some(w) = &a.window {
        out.push_str(", window=");
        write_window(out, w);
    }
    if let Some(d) = &a.conv_dims {
        out.push_str(", dim_labels=");
        write_dim_labels(out, d);
    }
    if let Some(d) = &a.dot_dims {
        for (name, v) in [
            ("lhs_batch_dims", &d.lhs_batch),
            ("lhs_contracting_dims", &d.lhs_contracting),
            ("rhs_batch_dims", &d.rhs_batch),
            ("rhs_contracting_dims", &d.rhs_contracting),
        ] {
            if !v.is_empty() {
                let _ = write!(out, ", {name}=");
                list(out, v);
            }
        }
    }
    if let Some(g) = &a.gather {
        for (name, v) in [
            ("offset_dims", &g.offset_dims),
            ("collapsed_slice_dims", &g.collapsed_slice_dims),
            ("start_index_map", &g.start_index_map),
            ("operand_batching_dims", &g.operand_batching_dims),
            (
                "start_indices_batching_dims",
                &g.start_indices_batching_dims,
            ),
        ] {
            if !v.is_empty()
                || name == "offset_dims"
                || name == "start_index_map"
                || name == "collapsed_slice_dims"
            {
                let _ = write!(out, ", {name}=");
                list(out, v);
            }
        }
        let _ = write!(out, ", index_vector_dim={}", g.index_vector_dim);
        out.push_str(", slice_sizes=");
        list(out, &g.slice_sizes);
    }
    if let Some(s) = &a.scatter {
        for (name, v) in [
            ("update_window_dims", &s.update_window_dims),
            ("inserted_window_dims", &s.inserted_window_dims),
            (
                "scatter_dims_to_operand_dims",
                &s.scatter_dims_to_operand_dims,
            ),
            ("input_batching_dims", &s.input_batching_dims),
            (
                "scatter_indices_batching_dims",
                &s.scatter_indices_batching_dims,
            ),
        ] {
            if !v.is_empty() || !name.contains("batching") {
                let _ = write!(out, ", {name}=");
                list(out, v);
            }
        }
        let _ = write!(out, ", index_vector_dim={}", s.index_vector_dim);
    }
    if let Some(v) = &a.dynamic_slice_sizes {
        out.push_str(", dynamic_slice_sizes=");
        list(out, v);
    }
    if let Some(v) = a.comparison {
        let _ = write!(out, ", direction={}", v.name());
    }
    if let Some(v) = &a.comparison_type {
        let _ = write!(out, ", type={v}");
    }
    if let Some(v) = a.tuple_index {
        let _ = write!(out, ", index={v}");
    }
    if let Some(v) = a.iota_dimension {
        let _ = write!(out, ", iota_dimension={v}");
    }
    if let Some(v) = a.feature_group_count {
        let _ = write!(out, ", feature_group_count={v}");
    }
    if let Some(v) = a.batch_group_count {
        let _ = write!(out, ", batch_group_count={v}");
    }
    if let Some(v) = &a.fft_type {
        let _ = write!(out, ", fft_type={v}");
    }
    if let Some(v) = &a.fft_length {
        out.push_str(", fft_length=");
        list(out, v);
    }
    for (name, v) in [
        ("is_stable", a.is_stable),
        ("indices_are_sorted", a.indices_are_sorted),
        ("unique_indices", a.unique_indices),
        ("largest", a.largest),
    ] {
        if let Some(v) = v {
            let _ = write!(out, ", {name}={v}");
        }
    }
    if let Some(v) = &a.custom_call_target {
        let _ = write!(out, ", custom_call_target=\"{}\"", escape(v));
    }
    if let Some(v) = a.epsilon {
        let _ = write!(out, ", epsilon={v:?}");
    }
    for (name, v) in [
        ("feature_index", a.feature_index),
        ("exponent_bits", a.exponent_bits),
        ("mantissa_bits", a.mantissa_bits),
        ("channel_id", a.channel_id),
        ("k", a.k),
    ] {
        if let Some(v) = v {
            let _ = write!(out, ", {name}={v}");
        }
    }
    if let Some(v) = &a.distribution {
        let _ = write!(out, ", distribution={v}");
    }
    if let Some(k) = a.fusion_kind {
        let _ = write!(out, ", kind={}", k.name());
    }
    // Called computations, grouped by role in written order.
    let mut i = 0;
    while i < a.called.len() {
        let role = a.called[i].0;
        let mut j = i;
        while j < a.called.len() && a.called[j].0 == role {
            j += 1;
        }
        let name = |c: CompId| {
            m.computations
                .get_index(c)
                .map(|(n, _)| n.as_str())
                .unwrap_or("?")
        };
        if role.is_list() {
            let _ = write!(out, ", {}={{", role.attr_name());
            for (k, (_, c)) in a.called[i..j].iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "%{}", name(*c));
            }
            out.push('}');
        } else {
            for (_, c) in &a.called[i..j] {
                let _ = write!(out, ", {}=%{}", role.attr_name(), name(*c));
            }
        }
        i = j;
    }
    // `custom_call_has_side_effect` among the verbatim attributes where XLA prints it
    // (and the proto reader puts it): after those below, before the rest.
    let (before, after) = a.other.split_at(
        a.other
            .iter()
            .position(|(k, _)| {
                !matches!(
                    k.as_str(),
                    "replica_groups"
                        | "constrain_layout"
                        | "use_global_device_ids"
                        | "source_target_pairs"
                        | "operand_precision"
                        | "operand_layout_constraints"
                )
            })
            .unwrap_or(a.other.len()),
    );
    for (k, v) in before {
        let _ = write!(out, ", {k}={v}");
    }
    if let Some(v) = a.custom_call_has_side_effect {
        let _ = write!(out, ", custom_call_has_side_effect={v}");
    }
    for (k, v) in after {
        let _ = write!(out, ", {k}={v}");
    }
    if let Some(v) = &a.sharding {
        let _ = write!(out, ", sharding={v}");
    }
    if let Some(v) = &a.frontend_attributes {
        let _ = write!(out, ", frontend_attributes={v}");
    }
    if !a.control_predecessors.is_empty() {
        out.push_str(", control-predecessors={");
        for (k, p) in a.control_predecessors.iter().enumerate() {
            if k > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "%{p}");
        }
        out.push('}');
    }
    if let Some(v) = &a.metadata {
        let _ = write!(out, ", metadata={v}");
    }
    if let Some(v) = &a.backend_config {
        let _ = write!(out, ", backend_config={v}");
    }
}

/// Print a window (`{size=3x3 stride=2x2 pad=1_1x1_1}`).
pub fn write_window(out: &mut String, w: &Window) {
    out.push('{');
    let d = &w.dims;
    let mut first = true;
    let mut field = |out: &mut String, name: &str, f: &dyn Fn(&WindowDim) -> String, show: bool| {
        if !show {
            return;
        }
        if !first {
            out.push(' ');
        }
        first = false;
        out.push_str(name);
        out.push('=');
        for (i, x) in d.iter().enumerate() {
            if i > 0 {
                out.push('x');
            }
            out.push_str(&f(x));
        }
    };
    field(out, "size", &|x| x.size.to_string(), !d.is_empty());
    field(
        out,
        "stride",
        &|x| x.stride.to_string(),
        d.iter().any(|x| x.stride != 1),
    );
    field(
        out,
        "pad",
        &|x| format!("{}_{}", x.pad_low, x.pad_high),
        d.iter().any(|x| x.pad_low != 0 || x.pad_high != 0),
    );
    field(
        out,
        "lhs_dilate",
        &|x| x.base_dilation.to_string(),
        d.iter().any(|x| x.base_dilation != 1),
    );
    field(
        out,
        "rhs_dilate",
        &|x| x.window_dilation.to_string(),
        d.iter().any(|x| x.window_dilation != 1),
    );
    field(
        out,
        "rhs_reversal",
        &|x| (x.window_reversal as i64).to_string(),
        d.iter().any(|x| x.window_reversal),
    );
    out.push('}');
}

/// Print convolution dimension numbers as `dim_labels`.
pub fn write_dim_labels(out: &mut String, d: &ConvDims) {
    let render = |rank: u8, a: i64, ac: char, b: i64, bc: char, sp: &[i64]| -> String {
        let mut v = vec!['?'; rank as usize];
        let mut put = |i: i64, c: char| {
            if let Some(slot) = usize::try_from(i).ok().and_then(|i| v.get_mut(i)) {
                *slot = c;
            }
        };
        put(a, ac);
        put(b, bc);
        for (k, &i) in sp.iter().enumerate() {
            put(i, char::from_digit(k as u32 % 10, 10).unwrap_or('0'));
        }
        v.into_iter().collect()
    };
    out.push_str(&render(
        d.ranks[0],
        d.input_batch,
        'b',
        d.input_feature,
        'f',
        &d.input_spatial,
    ));
    out.push('_');
    out.push_str(&render(
        d.ranks[1],
        d.kernel_input_feature,
        'i',
        d.kernel_output_feature,
        'o',
        &d.kernel_spatial,
    ));
    out.push_str("->");
    out.push_str(&render(
        d.ranks[2],
        d.output_batch,
        'b',
        d.output_feature,
        'f',
        &d.output_spatial,
    ));
}

/// Print a shape; `with_layout = false` drops layouts (as in signatures).
pub fn write_shape(out: &mut String, s: &Shape, with_layout: bool) {
    match s {
        Shape::Tuple(v) => {
            out.push('(');
            for (i, e) in v.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_shape(out, e, with_layout);
            }
            out.push(')');
        }
        Shape::Buffer(b) => {
            out.push_str("b(");
            write_shape(out, b, with_layout);
            out.push(')');
        }
        Shape::Array(a) => {
            out.push_str(a.element_type.name());
            out.push('[');
            for (i, &d) in a.dims.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if d == UNBOUNDED_DIM {
                    out.push('?');
                } else {
                    if a.is_dynamic_dim(i) {
                        out.push_str("<=");
                    }
                    let _ = write!(out, "{d}");
                }
            }
            out.push(']');
            if with_layout {
                if let Some(l) = &a.layout {
                    write_layout(out, l, a.dims.is_empty());
                }
            }
        }
    }
}

/// Print a layout; nothing for a plain scalar layout.
pub fn write_layout(out: &mut String, l: &Layout, scalar: bool) {
    if scalar && l.is_plain() {
        return;
    }
    out.push('{');
    for (i, d) in l.minor_to_major.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{d}");
    }
    if l.is_plain() {
        out.push('}');
        return;
    }
    out.push(':');
    for e in l.extra.iter().filter(|e| e.starts_with('D')) {
        out.push_str(e);
    }
    // XLA writes the `T` once: `T(8,128)(2,1)`.
    if !l.tiles.is_empty() {
        out.push('T');
    }
    for t in &l.tiles {
        out.push('(');
        for (i, d) in t.dims.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if *d == -1 {
                out.push('*');
            } else {
                let _ = write!(out, "{d}");
            }
        }
        out.push(')');
    }
    if l.tail_padding_alignment != 0 {
        let _ = write!(out, "L({})", l.tail_padding_alignment);
    }
    for e in l
        .extra
        .iter()
        .filter(|e| e.starts_with('#') || e.starts_with('*'))
    {
        out.push_str(e);
    }
    if l.element_size_in_bits != 0 {
        let _ = write!(out, "E({})", l.element_size_in_bits);
    }
    if l.memory_space != 0 {
        let _ = write!(out, "S({})", l.memory_space);
    }
    for e in l
        .extra
        .iter()
        .filter(|e| e.starts_with("SC") || e.starts_with('P') || e.starts_with('M'))
    {
        out.push_str(e);
    }
    out.push('}');
}
