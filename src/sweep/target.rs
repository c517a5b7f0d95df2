//! Target sweeps (`tpusim sweep target`): one compiled program estimated on several TPU
//! generations — the program's time on each, how that time splits by what bounds the
//! kernels, and the kernels whose bottleneck changes from one target to another (MXU →
//! HBM, or a default tile that no longer fits VMEM).

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

use super::plot::{bottleneck_color, err, short, BOTTLENECKS};
use crate::kernels::{LoweredProgram, ProgramError, ProgramEstimate, TileOverrides};
use crate::tpu::{Bottleneck, TpuTarget};

/// The program on one target.
#[derive(Debug, Clone, Serialize)]
pub struct TargetTotal {
    pub target: String,
    /// Program time ([`crate::tpu::Formula::ProgramTotal`]), ns.
    pub total_ns: f64,
    /// The time of the kernels with each bottleneck, in [`super::plot::BOTTLENECKS`]
    /// order.
    pub by_bottleneck: Vec<BottleneckTime>,
    /// Kernels whose default tile does not fit VMEM (timed by the untiled roofline).
    pub untiled: usize,
}

/// Σ multiplier × kernel time of the kernels one bottleneck bounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BottleneckTime {
    pub bottleneck: Bottleneck,
    /// Kernels it bounds.
    pub kernels: usize,
    /// Σ multiplier × time of those kernels, ns.
    pub ns: f64,
}

/// How a program's time splits by what bounds its kernels: one entry per bottleneck, in
/// [`super::plot::BOTTLENECKS`] order, with the kernels that run (multiplier > 0).
pub fn time_by_bottleneck(e: &ProgramEstimate) -> Vec<BottleneckTime> {
    let mut by = BOTTLENECKS.map(|bottleneck| BottleneckTime {
        bottleneck,
        kernels: 0,
        ns: 0.0,
    });
    for r in e.kernels.iter().filter(|r| r.multiplier > 0.0) {
        if let Some(slot) = by.iter_mut().find(|b| b.bottleneck == r.bottleneck) {
            slot.kernels += 1;
            slot.ns += r.multiplier * r.total_ns;
        }
    }
    by.to_vec()
}

/// One kernel on one target.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KernelOnTarget {
    /// Time of one execution, ns.
    pub total_ns: f64,
    /// Executions per program run.
    pub multiplier: f64,
    /// multiplier × time over the program's time.
    pub share: f64,
    pub bottleneck: Bottleneck,
    /// The default tile does not fit VMEM here.
    pub untiled: bool,
}

impl KernelOnTarget {
    /// What bounds the kernel, in one word: its bottleneck, or `untiled` when its tile
    /// does not fit VMEM.
    pub fn bound(&self) -> String {
        if self.untiled {
            "untiled".into()
        } else {
            format!("{:?}", self.bottleneck)
        }
    }
}

/// One kernel across the targets.
#[derive(Debug, Clone, Serialize)]
pub struct KernelAcross {
    pub kernel: String,
    pub kind: &'static str,
    /// One entry per target, in [`TargetSweep::targets`] order.
    pub on: Vec<KernelOnTarget>,
    /// Its bound (bottleneck, or untiled) is not the same on every target.
    pub changes: bool,
}

impl KernelAcross {
    /// Its largest share of the program time over the targets.
    pub fn max_share(&self) -> f64 {
        self.on.iter().map(|o| o.share).fold(0.0, f64::max)
    }
}

/// Whether black text reads better than white on `c`.
fn light(c: RGBColor) -> bool {
    0.299 * f64::from(c.0) + 0.587 * f64::from(c.1) + 0.114 * f64::from(c.2) > 140.0
}

/// A program on several targets.
#[derive(Debug, Clone, Serialize)]
pub struct TargetSweep {
    pub targets: Vec<TargetTotal>,
    /// Every kernel that runs (multiplier > 0 on some target), in program order.
    pub kernels: Vec<KernelAcross>,
}

/// Estimate `program` (with the configuration's `tiles`) on every target.
pub fn target_sweep(
    program: &LoweredProgram,
    tiles: &TileOverrides,
    targets: &[TpuTarget],
) -> Result<TargetSweep, ProgramError> {
    let mut totals = Vec::with_capacity(targets.len());
    let mut per: Vec<Vec<KernelOnTarget>> = Vec::new();
    let mut names: Vec<(String, &'static str)> = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        let e = program.estimate(t, tiles)?;
        for (k, r) in e.kernels.iter().enumerate() {
            let ns = r.multiplier * r.total_ns;
            if ti == 0 {
                names.push((r.name.clone(), r.kind));
                per.push(Vec::with_capacity(targets.len()));
            }
            if let Some(v) = per.get_mut(k) {
                v.push(KernelOnTarget {
                    total_ns: r.total_ns,
                    multiplier: r.multiplier,
                    share: if e.total_ns > 0.0 {
                        ns / e.total_ns
                    } else {
                        0.0
                    },
                    bottleneck: r.bottleneck,
                    untiled: r.untiled,
                });
            }
        }
        totals.push(TargetTotal {
            target: t.name.clone(),
            total_ns: e.total_ns,
            by_bottleneck: time_by_bottleneck(&e),
            untiled: e.kernels.iter().filter(|r| r.untiled).count(),
        });
    }
    let kernels = names
        .into_iter()
        .zip(per)
        .filter(|(_, on)| on.iter().any(|o| o.multiplier > 0.0))
        .map(|((kernel, kind), on)| {
            let first = on.first().map(|o| o.bound());
            let changes = on.iter().any(|o| Some(o.bound()) != first);
            KernelAcross {
                kernel,
                kind,
                on,
                changes,
            }
        })
        .collect();
    Ok(TargetSweep {
        targets: totals,
        kernels,
    })
}

impl TargetSweep {
    /// The kernels whose bound changes between targets, largest share first (program
    /// order among equals).
    pub fn changes(&self) -> Vec<&KernelAcross> {
        let mut v: Vec<&KernelAcross> = self.kernels.iter().filter(|k| k.changes).collect();
        v.sort_by(|a, b| b.max_share().total_cmp(&a.max_share()));
        v
    }

    /// CSV: one line per kernel and target.
    pub fn to_csv(&self) -> String {
        let mut s = crate::csv_text::CsvText::new(
            "target,program_ns,kernel,kind,multiplier,total_ns,share,bottleneck,untiled,changes",
        );
        for (ti, t) in self.targets.iter().enumerate() {
            for k in &self.kernels {
                if let Some(o) = k.on.get(ti) {
                    s.row([
                        t.target.to_string(),
                        t.total_ns.to_string(),
                        k.kernel.to_string(),
                        k.kind.to_string(),
                        o.multiplier.to_string(),
                        o.total_ns.to_string(),
                        o.share.to_string(),
                        format!("{:?}", o.bottleneck),
                        o.untiled.to_string(),
                        k.changes.to_string(),
                    ]);
                }
            }
        }
        s.finish()
    }

    /// The chart: the program's time on each target as a bar split by bottleneck, and
    /// under it the kernels whose bottleneck changes (up to `top`, largest share first),
    /// one row each, one cell per target coloured by its bottleneck.
    pub fn to_svg(
        &self,
        title: &str,
        top: usize,
    ) -> Result<String, crate::sweep::plot::ChartError> {
        let changes = self.changes();
        let shown = &changes[..changes.len().min(top)];
        let n = self.targets.len().max(1) as i32;
        let bars_h = (110 + 44 * n) as u32;
        let grid_h = if shown.is_empty() {
            40
        } else {
            90 + 22 * shown.len() as u32
        };
        let (w, h) = (960u32, bars_h + grid_h + 40);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
            root.fill(&WHITE).map_err(err)?;
            let (bars, rest) = root.split_vertically(bars_h);
            let (grid, key) = rest.split_vertically(grid_h);
            let hi = self
                .targets
                .iter()
                .map(|t| t.total_ns / 1e6)
                .fold(0.0, f64::max);
            let x1 = (hi * 1.16).max(1e-6);
            let mut label_at = vec![String::new(); n as usize];
            for (k, t) in self.targets.iter().enumerate() {
                label_at[n as usize - 1 - k] = t.target.clone();
            }
            let mut chart = ChartBuilder::on(&bars)
                .caption(title, ("sans-serif", 18))
                .margin(16)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..x1, (0..n - 1).into_segmented())
                .map_err(err)?;
            let fmt = |v: &SegmentValue<i32>| match v {
                SegmentValue::CenterOf(i) => label_at.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            };
            chart
                .configure_mesh()
                .disable_y_mesh()
                .light_line_style(TRANSPARENT)
                .y_labels(n as usize)
                .y_label_formatter(&fmt)
                .x_label_formatter(&|x| short(*x))
                .x_desc("program time (ms), split by the bottleneck of its kernels")
                .draw()
                .map_err(err)?;
            for (k, t) in self.targets.iter().enumerate() {
                let y = n - 1 - k as i32;
                let mut x = 0.0;
                for &BottleneckTime {
                    bottleneck: b, ns, ..
                } in &t.by_bottleneck
                {
                    let ms = ns / 1e6;
                    if ms <= 0.0 {
                        continue;
                    }
                    let mut bar = Rectangle::new(
                        [
                            (x, SegmentValue::Exact(y)),
                            (x + ms, SegmentValue::Exact(y + 1)),
                        ],
                        bottleneck_color(b).mix(0.85).filled(),
                    );
                    bar.set_margin(5, 5, 0, 0);
                    chart.draw_series(std::iter::once(bar)).map_err(err)?;
                    x += ms;
                }
                chart
                    .draw_series(std::iter::once(Text::new(
                        format!(" {:.3} ms", t.total_ns / 1e6),
                        (t.total_ns / 1e6, SegmentValue::CenterOf(y)),
                        TextStyle::from(("sans-serif", 12).into_font())
                            .pos(Pos::new(HPos::Left, VPos::Center)),
                    )))
                    .map_err(err)?;
            }
            // The kernels whose bound changes: one row each, a cell per target.
            let font = |size: i32| TextStyle::from(("sans-serif", size).into_font());
            let left = 16;
            let name_w = 300;
            let cell_w = ((w as i32 - left - name_w - 16) / n).min(100);
            let title = if shown.is_empty() {
                "No kernel changes bottleneck between these targets.".to_string()
            } else {
                format!(
                    "Kernels whose bottleneck changes: {} of {} (the {} with the largest share of a program time)",
                    changes.len(),
                    self.kernels.len(),
                    shown.len()
                )
            };
            grid.draw(&Text::new(
                title,
                (left, 14),
                font(14).pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(err)?;
            if !shown.is_empty() {
                let y0 = 40;
                grid.draw(&Text::new(
                    "kernel (largest share)",
                    (left, y0),
                    font(12).pos(Pos::new(HPos::Left, VPos::Center)),
                ))
                .map_err(err)?;
                for (ti, t) in self.targets.iter().enumerate() {
                    let cx = left + name_w + cell_w * ti as i32 + cell_w / 2;
                    grid.draw(&Text::new(
                        t.target.clone(),
                        (cx, y0),
                        font(12).pos(Pos::new(HPos::Center, VPos::Center)),
                    ))
                    .map_err(err)?;
                }
                for (r, k) in shown.iter().enumerate() {
                    let y = y0 + 14 + 22 * r as i32;
                    grid.draw(&Text::new(
                        format!("{} ({:.2} %)", k.kernel, 100.0 * k.max_share()),
                        (left, y + 10),
                        font(12).pos(Pos::new(HPos::Left, VPos::Center)),
                    ))
                    .map_err(err)?;
                    for (ti, o) in k.on.iter().enumerate() {
                        let x = left + name_w + cell_w * ti as i32;
                        let c = bottleneck_color(o.bottleneck);
                        let style = if o.untiled {
                            c.stroke_width(2)
                        } else {
                            c.mix(0.85).filled()
                        };
                        grid.draw(&Rectangle::new(
                            [(x + 2, y + 1), (x + cell_w - 2, y + 19)],
                            style,
                        ))
                        .map_err(err)?;
                        grid.draw(&Text::new(
                            o.bound(),
                            (x + cell_w / 2, y + 10),
                            font(11)
                                .color(if o.untiled || light(c) {
                                    &BLACK
                                } else {
                                    &WHITE
                                })
                                .pos(Pos::new(HPos::Center, VPos::Center)),
                        ))
                        .map_err(err)?;
                    }
                }
            }
            // The colour key.
            let mut x = left;
            for b in BOTTLENECKS {
                key.draw(&Rectangle::new(
                    [(x, 8), (x + 20, 22)],
                    bottleneck_color(b).mix(0.85).filled(),
                ))
                .map_err(err)?;
                let name = format!("{b:?}");
                key.draw(&Text::new(
                    name.clone(),
                    (x + 26, 15),
                    font(12).pos(Pos::new(HPos::Left, VPos::Center)),
                ))
                .map_err(err)?;
                x += 40 + 8 * name.len() as i32;
            }
            key.draw(&Text::new(
                "untiled (outlined): the default tile does not fit VMEM",
                (x + 10, 15),
                font(12).pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(err)?;
            root.present().map_err(err)?;
        }
        Ok(svg)
    }
}
