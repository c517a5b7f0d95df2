//! SVG charts of sweeps (plotters, SVG backend, no system fonts: the same sweep gives
//! the same bytes on every machine).

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{layout_text, LayoutSweep, TileSweep};

fn err(e: impl std::fmt::Display) -> String {
    format!("drawing the chart: {e}")
}

/// A tick label: no more digits than the scale needs.
fn short(y: f64) -> String {
    if y >= 100.0 {
        format!("{y:.0}")
    } else if y >= 1.0 {
        format!("{y:.1}")
    } else {
        format!("{y:.3}")
    }
}

/// `[lo, hi]` widened to a usable log-scale range.
fn log_range(lo: f64, hi: f64) -> std::ops::Range<f64> {
    let lo = if lo.is_finite() && lo > 0.0 { lo } else { 1.0 };
    let hi = if hi.is_finite() && hi > lo {
        hi
    } else {
        lo * 10.0
    };
    lo / 1.5..hi * 1.5
}

/// Kernel time against tile size, one line per swept dim (log–log). The default tile is
/// a filled black dot; a tile that does not fit VMEM is a red cross on the top edge.
pub fn tile_svg(s: &TileSweep) -> Result<String, String> {
    let feasible: Vec<f64> = s
        .rows
        .iter()
        .filter_map(|r| r.estimate.map(|e| e.total_ns / 1e3))
        .collect();
    let ymin = feasible.iter().copied().fold(f64::INFINITY, f64::min);
    let ymax = feasible.iter().copied().fold(0.0, f64::max);
    let yr = log_range(ymin, ymax);
    let top = yr.end / 1.2;
    let tiles = s.rows.iter().map(|r| r.tile.max(1) as f64);
    let xmin = tiles.clone().fold(f64::INFINITY, f64::min);
    let xmax = tiles.fold(0.0, f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "{} on {}: time vs tile size (default {:.2} µs)",
                    s.kernel,
                    s.target,
                    s.default_ns / 1e3
                ),
                ("sans-serif", 20),
            )
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(log_range(xmin, xmax).log_scale(), yr.log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| short(*y))
            .x_desc("tile size along the swept dim (other dims at the default tile)")
            .y_desc("kernel time (µs)")
            .draw()
            .map_err(err)?;
        let mut dims: Vec<usize> = s.rows.iter().map(|r| r.dim).collect();
        dims.dedup();
        for (k, &d) in dims.iter().enumerate() {
            let color = Palette99::pick(k).to_rgba();
            let pts: Vec<(f64, f64)> = s
                .rows
                .iter()
                .filter(|r| r.dim == d)
                .filter_map(|r| r.estimate.map(|e| (r.tile as f64, e.total_ns / 1e3)))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(err)?
                .label(format!(
                    "dim {d} ({}, extent {})",
                    s.labels[d], s.extents[d]
                ))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(err)?;
        }
        if s.rows.iter().any(|r| r.estimate.is_none()) {
            chart
                .draw_series(
                    s.rows
                        .iter()
                        .filter(|r| r.estimate.is_none())
                        .map(|r| Cross::new((r.tile as f64, top), 5, RED.stroke_width(2))),
                )
                .map_err(err)?
                .label("does not fit VMEM")
                .legend(|(x, y)| Cross::new((x + 10, y), 5, RED.stroke_width(2)));
        }
        chart
            .draw_series(s.rows.iter().filter(|r| r.is_default).filter_map(|r| {
                r.estimate
                    .map(|e| Circle::new((r.tile as f64, e.total_ns / 1e3), 6, BLACK.filled()))
            }))
            .map_err(err)?
            .label("the compiler's default tile")
            .legend(|(x, y)| Circle::new((x + 10, y), 5, BLACK.filled()));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Whole-program time of every layout, one horizontal bar each, fastest on top, with
/// its ratio to the compiler's choice (the red bar). Layouts are named on the axis up to
/// 48 bars. The time axis starts just below the fastest layout, so that small
/// differences show.
pub fn layout_svg(s: &LayoutSweep) -> Result<String, String> {
    let mut order: Vec<usize> = (0..s.rows.len()).collect();
    order.sort_by(|&a, &b| {
        s.rows[a]
            .total_ns
            .total_cmp(&s.rows[b].total_ns)
            .then(a.cmp(&b))
    });
    let n = order.len().max(1) as i32;
    let ms = |i: usize| s.rows[i].total_ns / 1e6;
    let lo = order.iter().map(|&i| ms(i)).fold(f64::INFINITY, f64::min);
    let hi = order.iter().map(|&i| ms(i)).fold(0.0, f64::max);
    let (x0, x1) = if lo.is_finite() && hi > lo {
        let pad = (hi - lo) * 0.12;
        ((lo - pad).max(0.0), hi + pad * 1.5)
    } else {
        (0.0, (hi * 1.1).max(1e-6))
    };
    // Fastest on top: bar k (k-th fastest) sits in segment n - 1 - k.
    let mut label_at = vec![String::new(); n as usize];
    for (k, &i) in order.iter().enumerate() {
        label_at[n as usize - 1 - k] = layout_text(&s.rows[i].layout);
    }
    let named = n <= 48;
    let height = (120 + 20 * n).clamp(360, 1200) as u32;
    let base = s.baseline_ns();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "{} {} {:?}: program time per {} layout on {} (compiler's choice {:.3} ms)",
                    s.opcode,
                    s.node,
                    s.dims,
                    s.tensor.name(),
                    s.target,
                    base / 1e6
                ),
                ("sans-serif", 18),
            )
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(if named { 110 } else { 40 })
            .build_cartesian_2d(x0..x1, (0..n - 1).into_segmented())
            .map_err(err)?;
        let fmt = |v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(i) if named => {
                label_at.get(*i as usize).cloned().unwrap_or_default()
            }
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(if named { n as usize } else { 0 })
            .y_label_formatter(&fmt)
            .x_label_formatter(&|x| short(*x))
            .x_desc("whole-program time (ms)")
            .y_desc(if named {
                "minor_to_major, fastest on top"
            } else {
                "layouts, fastest on top"
            })
            .draw()
            .map_err(err)?;
        chart
            .draw_series(order.iter().enumerate().map(|(k, &i)| {
                let color = if s.rows[i].layout.is_empty() {
                    RED
                } else {
                    BLUE
                };
                let y = n - 1 - k as i32;
                let mut bar = Rectangle::new(
                    [
                        (x0, SegmentValue::Exact(y)),
                        (ms(i), SegmentValue::Exact(y + 1)),
                    ],
                    color.mix(0.7).filled(),
                );
                bar.set_margin(2, 2, 0, 0);
                bar
            }))
            .map_err(err)?;
        if named && base > 0.0 {
            chart
                .draw_series(order.iter().enumerate().map(|(k, &i)| {
                    let y = n - 1 - k as i32;
                    Text::new(
                        format!(" {:.3}x", s.rows[i].total_ns / base),
                        (ms(i), SegmentValue::CenterOf(y)),
                        TextStyle::from(("sans-serif", 11).into_font())
                            .pos(Pos::new(HPos::Left, VPos::Center)),
                    )
                }))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}
