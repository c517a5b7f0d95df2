//! The roofline of a program (`tpusim roofline`): every kernel at its arithmetic
//! intensity (FLOPs per byte of HBM traffic) and its achieved FLOP/s, under the target's
//! MXU and HBM ceilings (`docs/cost-model.md` §10: `arithmetic-intensity`,
//! `roofline-ceilings`). The numbers are the program estimate's rows, the same as
//! `tpusim estimate` prints.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

use crate::kernels::ProgramEstimate;
use crate::sweep::plot::{bottleneck_color, err, log_ticks, short, BOTTLENECKS};
use crate::tpu::{Bottleneck, TpuTarget};

/// One kernel on the roofline.
#[derive(Debug, Clone, Serialize)]
pub struct RooflinePoint {
    pub kernel: String,
    pub kind: &'static str,
    pub bottleneck: Bottleneck,
    /// Timed by the untiled roofline (its default tile does not fit VMEM).
    pub untiled: bool,
    /// FLOPs of one execution.
    pub flops: f64,
    /// HBM bytes of one execution (re-fetches, padding, side outputs).
    pub bytes: f64,
    /// flops / bytes, FLOP/B.
    pub intensity: f64,
    /// flops / time, FLOP/s.
    pub flops_per_s: f64,
    /// Time of one execution, ns.
    pub total_ns: f64,
    pub multiplier: f64,
    /// multiplier × time over the program's time.
    pub share: f64,
}

/// A program's kernels on one target's roofline.
#[derive(Debug, Clone, Serialize)]
pub struct Roofline {
    pub target: String,
    /// The program's time, ns (`estimate`'s total).
    pub program_ns: f64,
    /// The MXU ceiling: the device's bf16 peak, FLOP/s.
    pub peak_flops: f64,
    /// The HBM ceiling's slope: the device's bandwidth, B/s.
    pub bandwidth: f64,
    /// The same at the target's largest DMA efficiency, B/s.
    pub achievable_bandwidth: f64,
    /// Where the ceilings meet, peak / bandwidth, FLOP/B.
    pub ridge: f64,
    /// The kernels that run and have FLOPs and bytes, in program order.
    pub points: Vec<RooflinePoint>,
    /// Kernels that run but have no FLOPs (copies, data movement): not on the chart.
    pub without_flops: usize,
    /// Their share of the program's time.
    pub without_flops_share: f64,
}

/// The roofline of the estimate `e` of a program on `target`.
pub fn roofline(e: &ProgramEstimate, target: &TpuTarget) -> Roofline {
    let mut points = Vec::new();
    let (mut without, mut without_share) = (0, 0.0);
    let share = |ns: f64| {
        if e.total_ns > 0.0 {
            ns / e.total_ns
        } else {
            0.0
        }
    };
    for r in &e.kernels {
        if r.multiplier <= 0.0 {
            continue;
        }
        let s = share(r.multiplier * r.total_ns);
        if r.flops > 0.0 && r.bytes > 0.0 && r.total_ns > 0.0 {
            points.push(RooflinePoint {
                kernel: r.name.clone(),
                kind: r.kind,
                bottleneck: r.bottleneck,
                untiled: r.untiled,
                flops: r.flops,
                bytes: r.bytes,
                intensity: r.flops / r.bytes,
                flops_per_s: r.flops / (r.total_ns * 1e-9),
                total_ns: r.total_ns,
                multiplier: r.multiplier,
                share: s,
            });
        } else {
            without += 1;
            without_share += s;
        }
    }
    let peak = target.device_peak_bf16();
    let bw = target.device_hbm_bandwidth();
    Roofline {
        target: target.name.clone(),
        program_ns: e.total_ns,
        peak_flops: peak,
        bandwidth: bw,
        achievable_bandwidth: bw * target.max_hbm_efficiency(),
        ridge: peak / bw,
        points,
        without_flops: without,
        without_flops_share: without_share,
    }
}

/// A log-axis tick label: three significant digits at most, no trailing zeros, powers of
/// ten below 0.001 (`5e-5`).
fn tick(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return "0".into();
    }
    if v < 1e-3 {
        let e = v.log10().floor();
        let m = v / 10f64.powf(e);
        let m = format!("{m:.1}");
        let m = m.trim_end_matches('0').trim_end_matches('.');
        return format!("{m}e{}", e as i32);
    }
    let decimals = (2 - v.log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Circle radius of a point, in pixels: area ∝ share of the program's time.
fn radius(share: f64) -> i32 {
    (share.max(0.0).sqrt() * 60.0).clamp(2.5, 48.0).round() as i32
}

/// One circle of the chart: the kernels at the same point with the same bottleneck
/// (structurally alike kernels, such as the blocks of a ResNet stage), their shares
/// added; named after the first in program order.
struct Marker<'a> {
    kernel: &'a str,
    count: usize,
    intensity: f64,
    flops_per_s: f64,
    bottleneck: Bottleneck,
    share: f64,
}

impl Roofline {
    /// The chart's circles, largest share first (program order among equals).
    fn markers(&self) -> Vec<Marker<'_>> {
        let mut v: Vec<Marker> = Vec::new();
        for p in &self.points {
            let same = |m: &&mut Marker| {
                m.intensity == p.intensity
                    && m.flops_per_s == p.flops_per_s
                    && m.bottleneck == p.bottleneck
            };
            match v.iter_mut().find(|m| same(m)) {
                Some(m) => {
                    m.count += 1;
                    m.share += p.share;
                }
                None => v.push(Marker {
                    kernel: &p.kernel,
                    count: 1,
                    intensity: p.intensity,
                    flops_per_s: p.flops_per_s,
                    bottleneck: p.bottleneck,
                    share: p.share,
                }),
            }
        }
        v.sort_by(|a, b| b.share.total_cmp(&a.share));
        v
    }

    /// The points, largest share first (program order among equals).
    pub fn by_share(&self) -> Vec<&RooflinePoint> {
        let mut v: Vec<&RooflinePoint> = self.points.iter().collect();
        v.sort_by(|a, b| b.share.total_cmp(&a.share));
        v
    }

    /// CSV: one line per point.
    pub fn to_csv(&self) -> String {
        let mut s = crate::csv_text::CsvText::new(
            "kernel,kind,bottleneck,untiled,flops,bytes,flop_per_byte,flop_per_s,\
             total_ns,multiplier,share",
        );
        for p in &self.points {
            s.row([
                p.kernel.to_string(),
                p.kind.to_string(),
                format!("{:?}", p.bottleneck),
                p.untiled.to_string(),
                p.flops.to_string(),
                p.bytes.to_string(),
                p.intensity.to_string(),
                p.flops_per_s.to_string(),
                p.total_ns.to_string(),
                p.multiplier.to_string(),
                p.share.to_string(),
            ]);
        }
        s.finish()
    }

    /// The chart (log–log): the HBM ceiling rising to the ridge, the MXU ceiling flat
    /// after it, the dashed achievable-bandwidth line under the HBM one; each kernel a
    /// circle coloured by its bottleneck with its area by its share of the program's
    /// time, the `top` largest labelled.
    pub fn to_svg(
        &self,
        title: &str,
        top: usize,
    ) -> Result<String, crate::sweep::plot::ChartError> {
        let tf = 1e12;
        let peak = self.peak_flops / tf;
        let (bw, abw) = (self.bandwidth / tf, self.achievable_bandwidth / tf);
        let ridge = self.ridge;
        let xs = self.points.iter().map(|p| p.intensity);
        let ys = self.points.iter().map(|p| p.flops_per_s / tf);
        let x_min = xs.clone().fold(ridge, f64::min);
        let x_max = xs.fold(ridge, f64::max);
        let y_min = ys.fold(peak, f64::min);
        let xr = x_min / 4.0..x_max * 4.0;
        let yr = y_min / 3.0..peak * 3.0;
        let (w, h) = (960u32, 680u32);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
            root.fill(&WHITE).map_err(err)?;
            let (plot_area, key) = root.split_vertically(h - 52);
            let mut chart = ChartBuilder::on(&plot_area)
                .caption(title, ("sans-serif", 18))
                .margin(16)
                .x_label_area_size(44)
                .y_label_area_size(72)
                .build_cartesian_2d(
                    xr.clone()
                        .log_scale()
                        .with_key_points(log_ticks(xr.start, xr.end)),
                    yr.clone()
                        .log_scale()
                        .with_key_points(log_ticks(yr.start, yr.end)),
                )
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_label_formatter(&|x| tick(*x))
                .y_label_formatter(&|y| tick(*y))
                .x_desc("arithmetic intensity (FLOP per byte of HBM traffic)")
                .y_desc("achieved TFLOP/s")
                .draw()
                .map_err(err)?;
            let grey = RGBColor(60, 60, 60);
            // HBM ceiling: y = bw·x, from the bottom (or left) edge to the ridge.
            let slope = |b: f64| {
                let x0 = xr.start.max(yr.start / b);
                vec![(x0, b * x0), (peak / b, peak)]
            };
            chart
                .draw_series(std::iter::once(PathElement::new(
                    slope(bw),
                    grey.stroke_width(2),
                )))
                .map_err(err)?;
            chart
                .draw_series(DashedLineSeries::new(
                    slope(abw),
                    6,
                    4,
                    grey.stroke_width(1),
                ))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(ridge, peak), (xr.end, peak)],
                    grey.stroke_width(2),
                )))
                .map_err(err)?;
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(ridge, yr.start), (ridge, peak)],
                    2,
                    4,
                    grey.stroke_width(1),
                ))
                .map_err(err)?;
            let font = |size: i32| TextStyle::from(("sans-serif", size).into_font());
            // Text on the chart: (text, anchor, horizontal position); the text sits
            // above its anchor. The HBM label sits above its ceiling, ending a little left of
            // the middle of the slope.
            let hx = (xr.start.max(yr.start / bw).ln() * 0.55 + ridge.ln() * 0.45).exp();
            let ceiling_text = [
                (
                    format!("MXU peak {} TFLOP/s", short(peak)),
                    (xr.end / 1.1, peak * 1.15),
                    HPos::Right,
                ),
                (
                    format!("ridge {} FLOP/B", short(ridge)),
                    (ridge * 1.08, yr.start * 1.4),
                    HPos::Left,
                ),
                (
                    format!(
                        "HBM {} GB/s (dashed: {} GB/s, the largest DMA efficiency)",
                        short(self.bandwidth / 1e9),
                        short(self.achievable_bandwidth / 1e9)
                    ),
                    (hx, bw * hx * 2.5),
                    HPos::Right,
                ),
            ];
            // Pixel boxes labels must not overlap: these texts, then the labels placed.
            let mut placed: Vec<(i32, i32, i32, i32)> = Vec::new();
            for (text, at, hpos) in ceiling_text {
                let (ax, ay) = chart.backend_coord(&at);
                let tw = 7 * text.chars().count() as i32;
                let x = if matches!(hpos, HPos::Right) {
                    ax - tw
                } else {
                    ax
                };
                placed.push((x, ay - 14, x + tw, ay));
                chart
                    .draw_series(std::iter::once(Text::new(
                        text,
                        at,
                        font(12).color(&grey).pos(Pos::new(hpos, VPos::Bottom)),
                    )))
                    .map_err(err)?;
            }
            // Points, largest first so that small ones stay visible on top.
            let order = self.markers();
            for p in &order {
                let c = bottleneck_color(p.bottleneck);
                let at = (p.intensity, p.flops_per_s / tf);
                let r = radius(p.share);
                chart
                    .draw_series(std::iter::once(Circle::new(at, r, c.mix(0.45).filled())))
                    .map_err(err)?;
                chart
                    .draw_series(std::iter::once(Circle::new(at, r, c.stroke_width(1))))
                    .map_err(err)?;
            }
            // Labels of the largest, placed where they overlap no other label and no
            // other labelled circle.
            let (px0, py0) = chart.backend_coord(&(xr.start, yr.end));
            let (px1, py1) = chart.backend_coord(&(xr.end, yr.start));
            let circles: Vec<(i32, i32, i32)> = order
                .iter()
                .take(top)
                .map(|p| {
                    let (cx, cy) = chart.backend_coord(&(p.intensity, p.flops_per_s / tf));
                    (cx, cy, radius(p.share))
                })
                .collect();
            for p in order.iter().take(top) {
                let (cx, cy) = chart.backend_coord(&(p.intensity, p.flops_per_s / tf));
                let r = radius(p.share);
                let text = if p.count > 1 {
                    format!("{} ×{} {:.1}%", p.kernel, p.count, 100.0 * p.share)
                } else {
                    format!("{} {:.1}%", p.kernel, 100.0 * p.share)
                };
                let tw = 7 * text.chars().count() as i32;
                let th = 14;
                let tries = [
                    (cx + r + 4, cy - th / 2),
                    (cx - r - 4 - tw, cy - th / 2),
                    (cx - tw / 2, cy - r - 4 - th),
                    (cx - tw / 2, cy + r + 4),
                    (cx + r + 4, cy - r - th),
                    (cx + r + 4, cy + r),
                    (cx - r - 4 - tw, cy - r - th),
                    (cx - r - 4 - tw, cy + r),
                ];
                let fits = |&(x, y): &(i32, i32)| {
                    x >= px0
                        && x + tw <= px1
                        && y >= py0
                        && y + th <= py1
                        && placed
                            .iter()
                            .all(|&(a, b, c, d)| x + tw <= a || x >= c || y + th <= b || y >= d)
                        && circles.iter().all(|&(qx, qy, qr)| {
                            (qx, qy) == (cx, cy)
                                || x + tw <= qx - qr
                                || x >= qx + qr
                                || y + th <= qy - qr
                                || y >= qy + qr
                        })
                };
                let (x, y) = tries.iter().copied().find(fits).unwrap_or(tries[0]);
                placed.push((x, y, x + tw, y + th));
                root.draw(&Text::new(
                    text,
                    (x, y + th / 2),
                    font(12).pos(Pos::new(HPos::Left, VPos::Center)),
                ))
                .map_err(err)?;
            }
            // The key: colours of the bottlenecks present, sizes, what is not drawn.
            let mut x = 16;
            for b in BOTTLENECKS {
                if !self.points.iter().any(|p| p.bottleneck == b) {
                    continue;
                }
                key.draw(&Circle::new(
                    (x + 7, 15),
                    6,
                    bottleneck_color(b).mix(0.45).filled(),
                ))
                .map_err(err)?;
                key.draw(&Circle::new(
                    (x + 7, 15),
                    6,
                    bottleneck_color(b).stroke_width(1),
                ))
                .map_err(err)?;
                let name = format!("{b:?}-bound");
                key.draw(&Text::new(
                    name.clone(),
                    (x + 18, 15),
                    font(12).pos(Pos::new(HPos::Left, VPos::Center)),
                ))
                .map_err(err)?;
                x += 30 + 7 * name.len() as i32;
            }
            let mut note =
                "circle area ∝ share of the program's time (alike kernels: one circle, ×n)"
                    .to_string();
            if self.without_flops > 0 {
                note.push_str(&format!(
                    "; not drawn: {} kernel{} without FLOPs ({:.1}% of the time)",
                    self.without_flops,
                    if self.without_flops == 1 { "" } else { "s" },
                    100.0 * self.without_flops_share
                ));
            }
            key.draw(&Text::new(
                note,
                (16, 38),
                font(12).pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(err)?;
            root.present().map_err(err)?;
        }
        Ok(svg)
    }
}
