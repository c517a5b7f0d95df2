//! SVG charts of sweeps (plotters, SVG backend, no system fonts: the same sweep gives
//! the same bytes on every machine).

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{layout_text, LayoutSweep, TileSweep};
use crate::tpu::Bottleneck;

pub(crate) fn err(e: impl std::fmt::Display) -> ChartError {
    ChartError(e.to_string())
}

/// A chart that plotters could not draw (its message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("drawing the chart: {0}")]
pub struct ChartError(pub String);

/// A tick label: no more digits than the scale needs (whole numbers without decimals).
pub(crate) fn short(y: f64) -> String {
    if y == 0.0 {
        "0".into()
    } else if y >= 100.0 || (y >= 1.0 && y.fract() == 0.0) {
        format!("{y:.0}")
    } else if y >= 1.0 {
        format!("{y:.1}")
    } else {
        format!("{y:.3}")
    }
}

/// `[lo, hi]` widened to a usable log-scale range.
pub(crate) fn log_range(lo: f64, hi: f64) -> std::ops::Range<f64> {
    let lo = if lo.is_finite() && lo > 0.0 { lo } else { 1.0 };
    let hi = if hi.is_finite() && hi > lo {
        hi
    } else {
        lo * 10.0
    };
    lo / 1.5..hi * 1.5
}

/// Tick values of a log axis inside `[lo, hi]`: the first mantissa set (1-2-5, then
/// finer) that gives at least four ticks.
pub(crate) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    const SETS: [&[f64]; 3] = [
        &[1.0, 2.0, 5.0],
        &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0],
        &[1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
    ];
    let mut ticks = Vec::new();
    if !(lo > 0.0 && hi > lo && lo.is_finite() && hi.is_finite()) {
        return ticks;
    }
    for set in SETS {
        ticks.clear();
        let mut e = lo.log10().floor() as i32;
        while 10f64.powi(e) <= hi {
            for &m in set {
                let v = m * 10f64.powi(e);
                if v >= lo && v <= hi {
                    ticks.push(v);
                }
            }
            e += 1;
        }
        if ticks.len() >= 4 {
            break;
        }
    }
    ticks
}

/// The colour of a bottleneck, the same in every chart and in the report: MXU blue,
/// VPU green, XLU purple, HBM orange, overheads grey (Tableau 10).
pub fn bottleneck_color(b: Bottleneck) -> RGBColor {
    match b {
        Bottleneck::Mxu => RGBColor(31, 119, 180),
        Bottleneck::Vpu => RGBColor(44, 160, 44),
        Bottleneck::Xlu => RGBColor(148, 103, 189),
        Bottleneck::Hbm => RGBColor(255, 127, 14),
        Bottleneck::Overhead => RGBColor(127, 127, 127),
    }
}

/// Every bottleneck, in the order charts list them.
pub const BOTTLENECKS: [Bottleneck; 5] = [
    Bottleneck::Mxu,
    Bottleneck::Vpu,
    Bottleneck::Xlu,
    Bottleneck::Hbm,
    Bottleneck::Overhead,
];

/// Colours of the swept dims (Tableau 10: distinct in colour and in lightness).
const DIM_COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
];

/// The marker outline of swept dim `k`, in pixels around its point: circle, triangle,
/// square, diamond in turn, the diamond small enough to show inside the square, so that
/// points of dims with equal times stay visible.
fn marker(k: usize) -> Vec<(i32, i32)> {
    // circumradius per shape: the square's edges sit outside the diamond's corners
    let r = [8.0, 8.0, 7.0, 3.5][k % 4];
    let at = |a: f64, rr: f64| ((rr * a.cos()).round() as i32, (rr * a.sin()).round() as i32);
    let corners: Vec<f64> = match k % 4 {
        0 => (0..=16).map(|i| f64::from(i) / 16.0).collect(),
        1 => (0..=3).map(|i| 0.75 + f64::from(i) / 3.0).collect(),
        2 => (0..=4).map(|i| 0.125 + f64::from(i) / 4.0).collect(),
        _ => (0..=4).map(|i| f64::from(i) / 4.0).collect(),
    };
    corners
        .into_iter()
        .map(|t| at(t * std::f64::consts::TAU, r))
        .collect()
}

/// Kernel time against tile size, one line per swept dim (log–log), each dim with its
/// own colour, marker and dash pattern so that dims with equal times stay visible. The
/// default tile of each dim is ringed in black. A tile that does not fit VMEM has no
/// time: it is marked with its dim's colour in a band along the top edge, labelled.
pub fn tile_svg(s: &TileSweep) -> Result<String, ChartError> {
    let feasible: Vec<f64> = s
        .rows
        .iter()
        .filter_map(|r| r.estimate.map(|e| e.total_ns / 1e3))
        .collect();
    let ymin = feasible.iter().copied().fold(f64::INFINITY, f64::min);
    let ymax = feasible.iter().copied().fold(0.0, f64::max);
    let data = log_range(ymin, ymax);
    let any_infeasible = s.rows.iter().any(|r| r.estimate.is_none());
    // The band for tiles that do not fit: above the data, its own slice of the axis.
    let (band_lo, band_y, y_end) = if any_infeasible {
        (data.end, data.end * 1.13, data.end * 1.28)
    } else {
        (data.end, data.end, data.end)
    };
    let yr = data.start..y_end;
    let tiles: Vec<f64> = s.rows.iter().map(|r| r.tile.max(1) as f64).collect();
    let xmin = tiles.iter().copied().fold(f64::INFINITY, f64::min);
    let xmax = tiles.iter().copied().fold(0.0, f64::max);
    let xr = log_range(xmin, xmax);
    // x ticks: the tile sizes swept, or the powers of two when they are too many.
    let mut xt: Vec<i64> = s.rows.iter().map(|r| r.tile.max(1)).collect();
    xt.sort_unstable();
    xt.dedup();
    if xt.len() > 14 {
        xt = (0..40)
            .map(|e| 1i64 << e)
            .filter(|&v| v as f64 >= xr.start && v as f64 <= xr.end)
            .collect();
    }
    let xticks: Vec<f64> = xt.iter().map(|&v| v as f64).collect();
    let yticks = log_ticks(data.start, band_lo);
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
            .build_cartesian_2d(
                xr.clone().log_scale().with_key_points(xticks),
                yr.clone().log_scale().with_key_points(yticks),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| short(*y))
            .x_desc("tile size along the swept dim (other dims at the default tile)")
            .y_desc("kernel time (µs)")
            .draw()
            .map_err(err)?;
        if any_infeasible {
            let grey = RGBColor(120, 120, 120);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(xr.start, band_lo), (xr.end, yr.end)],
                    RGBColor(245, 245, 245).filled(),
                )))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(xr.start, band_lo), (xr.end, band_lo)],
                    grey.stroke_width(1),
                )))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    " does not fit VMEM (no time)",
                    (xr.start * 1.04, band_y),
                    TextStyle::from(("sans-serif", 11).into_font())
                        .color(&grey)
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                )))
                .map_err(err)?;
        }
        let mut dims: Vec<usize> = s.rows.iter().map(|r| r.dim).collect();
        dims.dedup();
        for (k, &d) in dims.iter().enumerate() {
            let color = DIM_COLORS[k % DIM_COLORS.len()];
            let pts: Vec<(f64, f64)> = s
                .rows
                .iter()
                .filter(|r| r.dim == d)
                .filter_map(|r| r.estimate.map(|e| (r.tile as f64, e.total_ns / 1e3)))
                .collect();
            let label = format!("dim {d} ({}, extent {})", s.labels[d], s.extents[d]);
            let legend = move |(x, y): (i32, i32)| {
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(0, 0), (24, 0)], color.stroke_width(2))
                    + PathElement::new(
                        marker(k)
                            .into_iter()
                            .map(|(a, b)| (a + 12, b))
                            .collect::<Vec<_>>(),
                        color.stroke_width(2),
                    )
            };
            let mark = move |p: (f64, f64)| {
                EmptyElement::at(p) + PathElement::new(marker(k), color.stroke_width(2))
            };
            if k == 0 {
                chart
                    .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                    .map_err(err)?
                    .label(label)
                    .legend(legend);
            } else {
                let dash = 4 + 3 * (k as u32 % 3);
                chart
                    .draw_series(DashedLineSeries::new(
                        pts.clone(),
                        dash,
                        4,
                        color.stroke_width(2),
                    ))
                    .map_err(err)?
                    .label(label)
                    .legend(legend);
            }
            chart
                .draw_series(pts.iter().map(|&p| mark(p)))
                .map_err(err)?;
            chart
                .draw_series(
                    s.rows
                        .iter()
                        .filter(|r| r.dim == d && r.estimate.is_none())
                        .map(|r| mark((r.tile as f64, band_y))),
                )
                .map_err(err)?;
        }
        chart
            .draw_series(s.rows.iter().filter(|r| r.is_default).filter_map(|r| {
                r.estimate.map(|e| {
                    Circle::new((r.tile as f64, e.total_ns / 1e3), 10, BLACK.stroke_width(2))
                })
            }))
            .map_err(err)?
            .label("the compiler's default tile (each dim)")
            .legend(|(x, y)| Circle::new((x + 12, y), 7, BLACK.stroke_width(2)));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerLeft)
            .legend_area_size(34)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Whole-program time of every layout, one horizontal bar each, fastest on top, with
/// its ratio to the compiler's choice. The compiler's choice is the red bar (a legend
/// under the axis says so); layouts are named on the axis up to 48 bars. The time axis
/// starts at 0, so bar lengths compare as times do (the ratios show small differences).
pub fn layout_svg(s: &LayoutSweep) -> Result<String, ChartError> {
    let mut order: Vec<usize> = (0..s.rows.len()).collect();
    order.sort_by(|&a, &b| {
        s.rows[a]
            .total_ns
            .total_cmp(&s.rows[b].total_ns)
            .then(a.cmp(&b))
    });
    let n = order.len().max(1) as i32;
    let ms = |i: usize| s.rows[i].total_ns / 1e6;
    let hi = order.iter().map(|&i| ms(i)).fold(0.0, f64::max);
    let (x0, x1) = (0.0, (hi * 1.12).max(1e-6));
    // Fastest on top: bar k (k-th fastest) sits in segment n - 1 - k.
    let mut label_at = vec![String::new(); n as usize];
    for (k, &i) in order.iter().enumerate() {
        label_at[n as usize - 1 - k] = layout_text(&s.rows[i].layout);
    }
    let named = n <= 48;
    let height = (150 + 20 * n).clamp(390, 1230) as u32;
    let base = s.baseline_ns();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot_area, key) = root.split_vertically(height - 30);
        let key_font =
            TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        for (x, color, text) in [
            (140, RED, "the compiler's choice (no layout set)"),
            (420, BLUE, "the layout named on the axis (minor_to_major)"),
        ] {
            key.draw(&Rectangle::new(
                [(x, 8), (x + 24, 22)],
                color.mix(0.7).filled(),
            ))
            .map_err(err)?;
            key.draw(&Text::new(text, (x + 30, 15), key_font.clone()))
                .map_err(err)?;
        }
        let mut chart = ChartBuilder::on(&plot_area)
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
            .light_line_style(TRANSPARENT)
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
