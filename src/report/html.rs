//! The report as one self-contained HTML page: inline CSS, inline SVG charts and a few
//! lines of inline JavaScript that sort the tables (no network, no files beside it).
//! The same report gives the same bytes.

use std::fmt::Write as _;

use super::{Explained, Report, ReportError};
use crate::sweep::plot::{bottleneck_color, layout_svg, tile_svg};
use crate::sweep::target::time_by_bottleneck;
use crate::sweep::{layout_text, LayoutSweep, TileSweep};
use crate::tpu::{names_in_line, Bottleneck, Figure, Formula};

/// `s` with `&`, `<`, `>` and `"` escaped.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            _ => o.push(c),
        }
    }
    o
}

fn hex(b: Bottleneck) -> String {
    let c = bottleneck_color(b);
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// A formula's name as the page shows it (the section of docs/cost-model.md §10).
fn cite(f: &[Formula]) -> String {
    let names: Vec<String> = f
        .iter()
        .map(|f| format!("<code class=\"f\">{f}</code>"))
        .collect();
    format!("<span class=\"cite\">[{}]</span>", names.join(", "))
}

/// A line of an explanation, its formula names set apart.
fn figure_line(out: &mut String, line: &str) {
    match names_in_line(line) {
        Some(names) => {
            let text = line.trim_end();
            let cut = text.rfind("  [").unwrap_or(text.len());
            let tags: Vec<String> = names
                .iter()
                .map(|n| format!("<code class=\"f\">{}</code>", escape(n)))
                .collect();
            let _ = writeln!(
                out,
                "{}  <span class=\"cite\">[{}]</span>",
                escape(&text[..cut]),
                tags.join(", ")
            );
        }
        None => {
            let _ = writeln!(out, "{}", escape(line));
        }
    }
}

fn figures(out: &mut String, figs: &[Figure]) {
    for f in figs {
        figure_line(out, &f.to_string());
    }
}

const STYLE: &str = r##"
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1d2330;background:#fafbfc;line-height:1.45}
header{background:#1d2330;color:#fff;padding:18px 32px}
header h1{margin:0;font-size:22px;font-weight:600}
header p{margin:4px 0 0;color:#c8cfdb}
nav{padding:8px 32px;background:#eef1f5;border-bottom:1px solid #d8dde5;font-size:14px}
nav a{margin-right:18px;color:#24509a;text-decoration:none}
main{padding:8px 32px 40px;max-width:1400px}
section{margin:26px 0}
h2{font-size:19px;border-bottom:2px solid #d8dde5;padding-bottom:4px}
h3{font-size:16px;margin:18px 0 6px}
p.note{color:#4a5262;font-size:14px;max-width:1000px}
table{border-collapse:collapse;font-size:13px;background:#fff}
th,td{border:1px solid #dde2ea;padding:3px 8px;text-align:left;white-space:nowrap}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
thead th{background:#eef1f5;position:sticky;top:0}
table.sortable thead th{cursor:pointer;user-select:none}
table.sortable thead th[aria-sort=ascending]::after{content:" \25B2";font-size:10px}
table.sortable thead th[aria-sort=descending]::after{content:" \25BC";font-size:10px}
.scroll{max-height:560px;overflow:auto;border:1px solid #d8dde5;display:inline-block;max-width:100%}
.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:6px;vertical-align:-1px}
.chart{background:#fff;border:1px solid #d8dde5;display:inline-block;max-width:100%}
.chart svg{display:block;max-width:100%;height:auto}
pre{background:#fff;border:1px solid #d8dde5;padding:10px 12px;font-size:12px;overflow-x:auto;line-height:1.35}
.cite{color:#8a5a00}
code.f{font-size:11px;background:#fff4dc;border-radius:3px;padding:0 3px;color:#7a4d00}
.kv td:first-child{color:#4a5262}
.bar{display:flex;height:16px;width:600px;border:1px solid #d8dde5;margin:6px 0}
.bar span{display:block;height:100%}
details summary{cursor:pointer;color:#24509a;font-size:14px}
tr.default td{font-weight:600}
"##;

const SCRIPT: &str = r##"
(function () {
  "use strict";
  function key(td) {
    var v = td.getAttribute("data-v");
    return v === null ? td.textContent : parseFloat(v);
  }
  function sortTable(table, col, desc) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var pos = new Map();
    rows.forEach(function (r, i) { pos.set(r, i); });
    rows.sort(function (a, b) {
      var x = key(a.cells[col]), y = key(b.cells[col]);
      var c = (typeof x === "number" && typeof y === "number") ? x - y : String(x).localeCompare(String(y));
      if (desc) { c = -c; }
      return c !== 0 ? c : pos.get(a) - pos.get(b);
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.setAttribute("aria-sort", i === col ? (desc ? "descending" : "ascending") : "none");
    });
  }
  var tables = document.querySelectorAll("table.sortable");
  Array.prototype.forEach.call(tables, function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.addEventListener("click", function () {
        var now = th.getAttribute("aria-sort");
        var desc = (now === null || now === "none") ? th.classList.contains("n") : now === "ascending";
        sortTable(table, i, desc);
      });
    });
  });
  var m = /^#sort=([a-z_]+)$/.exec(window.location.hash);
  if (m) {
    var th = document.querySelector("#kernel-table th[data-key=\"" + m[1] + "\"]");
    if (th) { th.click(); }
  }
  document.documentElement.setAttribute("data-sortable", String(tables.length));
})();
"##;

fn num(x: f64, digits: usize) -> String {
    format!("{x:.digits$}")
}

/// A number cell that sorts by its exact value.
fn ncell(v: f64, shown: &str) -> String {
    format!("<td class=\"n\" data-v=\"{v}\">{shown}</td>")
}

fn bcell(b: Bottleneck, untiled: bool) -> String {
    format!(
        "<td><span class=\"sw\" style=\"background:{}\"></span>{b:?}{}</td>",
        hex(b),
        if untiled { " (untiled)" } else { "" }
    )
}

impl Report {
    /// The page.
    pub fn to_html(&self) -> Result<String, ReportError> {
        let e = &self.estimate;
        let t = &self.target;
        let mut h = String::new();
        let title = format!("{} on TPU {}", self.file, t.name);
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>tpusim report: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
            escape(&title)
        );
        let _ = writeln!(
            h,
            "<header><h1>tpusim report: {}</h1><p>Every number below is the analytical model's, the same as <code>tpusim estimate</code>, <code>explain</code> and <code>sweep</code> print; the names in brackets are the formulas' sections in <code>docs/cost-model.md</code> §10.</p></header>",
            escape(&title)
        );
        h.push_str(
            "<nav><a href=\"#summary\">Summary</a><a href=\"#kernels\">Kernels</a><a href=\"#roofline\">Roofline</a><a href=\"#explained\">Costliest kernels explained</a><a href=\"#tile\">Tile sweep</a><a href=\"#layout\">Layout sweep</a></nav>\n<main>\n",
        );
        self.summary(&mut h);
        self.kernel_table(&mut h);
        self.roofline_section(&mut h)?;
        self.explained_section(&mut h);
        self.tile_section(&mut h)?;
        self.layout_section(&mut h)?;
        let _ = writeln!(
            h,
            "<p class=\"note\">tpusim {} · {} kernels · target {} · configuration {}</p>",
            env!("CARGO_PKG_VERSION"),
            e.kernels.len(),
            escape(&t.name),
            escape(
                self.config_name
                    .as_deref()
                    .unwrap_or("the compiler's defaults")
            )
        );
        let _ = write!(h, "</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n");
        Ok(h)
    }

    fn summary(&self, h: &mut String) {
        let e = &self.estimate;
        let t = &self.target;
        let running = e.kernels.iter().filter(|r| r.multiplier > 0.0).count();
        let _ = writeln!(h, "<section id=\"summary\"><h2>Summary</h2>");
        let _ = writeln!(
            h,
            "<p id=\"program-total\" data-total-ns=\"{}\" style=\"font-size:18px\">Program time: <b>{:.3} ms</b> on TPU {} {}</p>",
            e.total_ns,
            e.total_ns / 1e6,
            escape(&t.name),
            cite(&[Formula::ProgramTotal])
        );
        let _ = writeln!(h, "<table class=\"kv\">");
        let rows = [
            ("module file", escape(&self.file)),
            (
                "configuration",
                escape(self.config_name.as_deref().unwrap_or("none (the compiler's defaults)")),
            ),
            (
                "kernels",
                format!(
                    "{} in the program, {} run ({} fusions made, {} copies inserted by layout assignment)",
                    e.kernels.len(),
                    running,
                    self.stats.fusions,
                    self.stats.copies_inserted
                ),
            ),
            (
                "target",
                format!(
                    "{}: {} TensorCore(s) per chip{}, {} × {}×{} MXUs per core, {:.1} TFLOP/s bf16 and {:.0} GB/s HBM per chip, {} MiB scoped VMEM",
                    escape(&t.name),
                    t.cores_per_chip,
                    if t.megacore { " (megacore: one kernel runs on both)" } else { "" },
                    t.mxus_per_core,
                    t.mxu_size,
                    t.mxu_size,
                    t.peak_bf16_flops / 1e12,
                    t.hbm_bandwidth / 1e9,
                    t.vmem_limit_bytes >> 20
                ),
            ),
        ];
        for (k, v) in rows {
            let _ = writeln!(h, "<tr><td>{k}</td><td>{v}</td></tr>");
        }
        let _ = writeln!(h, "</table>");
        let by = time_by_bottleneck(e);
        let _ = writeln!(
            h,
            "<h3>What bounds the program {}</h3><div class=\"bar\">",
            cite(&[Formula::Bottleneck])
        );
        for b in &by {
            if b.ns > 0.0 && e.total_ns > 0.0 {
                let _ = write!(
                    h,
                    "<span style=\"width:{:.3}%;background:{}\" title=\"{:?}\"></span>",
                    100.0 * b.ns / e.total_ns,
                    hex(b.bottleneck),
                    b.bottleneck
                );
            }
        }
        let _ = writeln!(h, "</div>");
        let _ = writeln!(
            h,
            "<table><thead><tr><th>bottleneck</th><th class=\"n\">kernels</th><th class=\"n\">time (ms)</th><th class=\"n\">share</th></tr></thead><tbody>"
        );
        for b in &by {
            let share = if e.total_ns > 0.0 {
                b.ns / e.total_ns
            } else {
                0.0
            };
            let _ = writeln!(
                h,
                "<tr>{}<td class=\"n\">{}</td><td class=\"n\">{:.3}</td><td class=\"n\">{:.1} %</td></tr>",
                bcell(b.bottleneck, false),
                b.kernels,
                b.ns / 1e6,
                100.0 * share
            );
        }
        let _ = writeln!(h, "</tbody></table>");
        let order = super::by_cost(e);
        let _ = writeln!(h, "<h3>The costliest kernels</h3><table><thead><tr><th>kernel</th><th>kind</th><th class=\"n\">time × executions (µs)</th><th class=\"n\">share</th><th>bottleneck</th></tr></thead><tbody>");
        for &i in order.iter().take(8) {
            let r = &e.kernels[i];
            let ns = r.multiplier * r.total_ns;
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td class=\"n\">{:.2}</td><td class=\"n\">{:.1} %</td>{}</tr>",
                escape(&r.name),
                r.kind,
                ns / 1e3,
                if e.total_ns > 0.0 { 100.0 * ns / e.total_ns } else { 0.0 },
                bcell(r.bottleneck, r.untiled)
            );
        }
        let _ = writeln!(h, "</tbody></table>");
        if !e.warnings.is_empty() {
            let _ = writeln!(h, "<h3>Notes</h3><ul>");
            for w in &e.warnings {
                let _ = writeln!(h, "<li>{}</li>", escape(w));
            }
            let _ = writeln!(h, "</ul>");
        }
        let _ = writeln!(h, "</section>");
    }

    fn kernel_table(&self, h: &mut String) {
        let e = &self.estimate;
        let _ = writeln!(
            h,
            "<section id=\"kernels\"><h2>Every kernel</h2><p class=\"note\">In program order; click a column to sort by it (numbers largest first, click again to reverse). Times are of one execution; × is the executions per program run, share the part of the program time (× · time / total). FLOP/B is the arithmetic intensity {} of the kernel's HBM traffic.</p>",
            cite(&[Formula::ArithmeticIntensity])
        );
        let cols: [(&str, &str, bool); 15] = [
            ("index", "#", true),
            ("kernel", "kernel", false),
            ("kind", "kind", false),
            ("hero", "hero", false),
            ("multiplier", "×", true),
            ("time", "time (µs)", true),
            ("share", "share", true),
            ("flops", "FLOPs", true),
            ("bytes", "HBM bytes", true),
            ("intensity", "FLOP/B", true),
            ("tflops", "TFLOP/s", true),
            ("mxu", "MXU (µs)", true),
            ("vpu", "VPU (µs)", true),
            ("hbm", "DMA (µs)", true),
            ("bottleneck", "bottleneck", false),
        ];
        let _ = write!(
            h,
            "<div class=\"scroll\"><table id=\"kernel-table\" class=\"sortable\"><thead><tr>"
        );
        for (key, label, numeric) in cols {
            let _ = write!(
                h,
                "<th data-key=\"{key}\"{}>{label}</th>",
                if numeric { " class=\"n\"" } else { "" }
            );
        }
        let _ = writeln!(h, "</tr></thead><tbody>");
        for (i, r) in e.kernels.iter().enumerate() {
            let share = if e.total_ns > 0.0 {
                r.multiplier * r.total_ns / e.total_ns
            } else {
                0.0
            };
            let ai = if r.bytes > 0.0 {
                r.flops / r.bytes
            } else {
                0.0
            };
            let tflops = if r.total_ns > 0.0 {
                r.flops / r.total_ns / 1e3
            } else {
                0.0
            };
            let _ = writeln!(
                h,
                "<tr>{}<td>{}</td><td>{}</td><td>{}</td>{}{}{}{}{}{}{}{}{}{}{}</tr>",
                ncell(i as f64, &i.to_string()),
                escape(&r.name),
                r.kind,
                r.hero,
                ncell(r.multiplier, &r.multiplier.to_string()),
                ncell(r.total_ns, &num(r.total_ns / 1e3, 2)),
                ncell(share, &format!("{:.2} %", 100.0 * share)),
                ncell(r.flops, &format!("{:.3e}", r.flops)),
                ncell(r.bytes, &format!("{:.3e}", r.bytes)),
                ncell(ai, &num(ai, 2)),
                ncell(tflops, &num(tflops, 2)),
                ncell(r.mxu_ns, &num(r.mxu_ns / 1e3, 2)),
                ncell(r.vpu_ns, &num(r.vpu_ns / 1e3, 2)),
                ncell(r.hbm_ns, &num(r.hbm_ns / 1e3, 2)),
                bcell(r.bottleneck, r.untiled)
            );
        }
        let _ = writeln!(h, "</tbody></table></div></section>");
    }

    fn roofline_section(&self, h: &mut String) -> Result<(), ReportError> {
        let r = &self.roofline;
        let svg = r.to_svg(&roofline_title(&self.file, r), 8)?;
        let _ = writeln!(
            h,
            "<section id=\"roofline\"><h2>Roofline {}</h2><p class=\"note\">Each kernel with FLOPs at its arithmetic intensity and the FLOP/s it achieves; the ceilings are the device's bf16 peak ({:.1} TFLOP/s) and its HBM bandwidth ({:.0} GB/s), meeting at the ridge, {:.1} FLOP/B. A kernel left of the ridge cannot reach the MXU peak however well it is tiled; one far under both ceilings loses its time to padding, re-fetches or overheads.</p><div class=\"chart\">{svg}</div></section>",
            cite(&[Formula::ArithmeticIntensity, Formula::RooflineCeilings]),
            r.peak_flops / 1e12,
            r.bandwidth / 1e9,
            r.ridge
        );
        Ok(())
    }

    fn explained_section(&self, h: &mut String) {
        let _ = writeln!(
            h,
            "<section id=\"explained\"><h2>The costliest kernels, explained</h2><p class=\"note\">What <code>tpusim explain</code> prints for each: how the kernel was lowered, its tile grid, VMEM footprint, HBM traffic, compute and pipeline; each figure ends with the names of its formulas.</p>"
        );
        for (
            k,
            Explained {
                share,
                explanation: x,
            },
        ) in self.explained.iter().enumerate()
        {
            let est = x.derivation.estimate();
            let _ = writeln!(
                h,
                "<h3>{}. {} — {:.1} % of the program{}</h3>",
                k + 1,
                escape(&x.kernel),
                100.0 * share,
                match (est, x.total_ns) {
                    (Some(e), Some(t)) => format!(", {:.2} µs, {:?}-bound", t / 1e3, e.bottleneck),
                    (_, Some(t)) => format!(", {:.2} µs (untiled)", t / 1e3),
                    _ => String::new(),
                }
            );
            let _ = writeln!(
                h,
                "<details><summary>HLO of the kernel</summary><pre>{}</pre></details>",
                escape(&x.hlo)
            );
            let mut pre = String::new();
            figures(&mut pre, &x.head_figures());
            figures(&mut pre, &x.derivation.figures());
            figures(&mut pre, &x.tail_figures());
            let _ = writeln!(h, "<pre>{pre}</pre>");
        }
        let _ = writeln!(h, "</section>");
    }

    fn tile_section(&self, h: &mut String) -> Result<(), ReportError> {
        let _ = writeln!(
            h,
            "<section id=\"tile\"><h2>Tile sweep of the costliest kernel</h2>"
        );
        for (k, why) in &self.tile_skipped {
            let _ = writeln!(
                h,
                "<p class=\"note\">{} has no tile sweep: {}</p>",
                escape(k),
                escape(why)
            );
        }
        match &self.tile {
            Some(s) => {
                let svg = tile_svg(s)?;
                let _ = writeln!(
                    h,
                    "<p class=\"note\">What <code>tpusim sweep tile {} --kernel {}</code> gives: the kernel under every candidate tile size of each iteration dim, the other dims at the compiler's default tile (ringed); tiles that do not fit VMEM have no time.</p><div class=\"chart\">{svg}</div>",
                    escape(&self.file),
                    escape(&s.kernel)
                );
                tile_table(h, s);
            }
            None => {
                let _ = writeln!(h, "<p class=\"note\">No kernel could be swept.</p>");
            }
        }
        let _ = writeln!(h, "</section>");
        Ok(())
    }

    fn layout_section(&self, h: &mut String) -> Result<(), ReportError> {
        let _ = writeln!(
            h,
            "<section id=\"layout\"><h2>Layout sweep of the most sensitive node</h2>"
        );
        match (&self.layout, &self.layout_kernel) {
            (Some(s), Some(k)) => {
                let _ = writeln!(
                    h,
                    "<p class=\"note\">The configurable nodes of {} (the costliest kernel that has one), each of their tensors under every layout, the whole program recompiled and estimated each time; shown is the tensor whose layouts move the program time most (spread = (slowest − fastest) / the compiler's choice):</p>",
                    escape(k)
                );
                let _ = writeln!(
                    h,
                    "<table><thead><tr><th>node</th><th>tensor</th><th class=\"n\">spread</th></tr></thead><tbody>"
                );
                for c in &self.layout_candidates {
                    let _ = writeln!(
                        h,
                        "<tr{}><td>{}</td><td>{}</td><td class=\"n\">{:.1} %</td></tr>",
                        if c.node == s.node && c.tensor == s.tensor {
                            " class=\"default\""
                        } else {
                            ""
                        },
                        escape(&c.node),
                        c.tensor.name(),
                        100.0 * c.spread
                    );
                }
                let _ = writeln!(h, "</tbody></table>");
                let svg = layout_svg(s)?;
                let _ = writeln!(
                    h,
                    "<p class=\"note\">What <code>tpusim sweep layout {} --node {} --tensor {}</code> gives:</p><div class=\"chart\">{svg}</div>",
                    escape(&self.file),
                    escape(&s.node),
                    s.tensor.name()
                );
                layout_table(h, s);
            }
            _ => {
                let _ = writeln!(
                    h,
                    "<p class=\"note\">None of the costliest kernels has a configurable node (convolution, dot or reshape).</p>"
                );
            }
        }
        let _ = writeln!(h, "</section>");
        Ok(())
    }
}

/// The roofline chart's title.
pub fn roofline_title(file: &str, r: &super::Roofline) -> String {
    format!(
        "{file} on {}: roofline of {} kernels ({:.3} ms)",
        r.target,
        r.points.len(),
        r.program_ns / 1e6
    )
}

fn tile_table(h: &mut String, s: &TileSweep) {
    let _ = writeln!(
        h,
        "<table class=\"sortable\"><thead><tr><th class=\"n\">dim</th><th>label</th><th class=\"n\">extent</th><th class=\"n\">tile</th><th class=\"n\">time (µs)</th><th class=\"n\">HBM bytes</th><th class=\"n\">steps</th><th class=\"n\">VMEM bytes</th><th>bottleneck</th></tr></thead><tbody>"
    );
    for r in &s.rows {
        let lead = format!(
            "{}<td>{}</td>{}{}",
            ncell(r.dim as f64, &r.dim.to_string()),
            escape(&s.labels[r.dim]),
            ncell(s.extents[r.dim] as f64, &s.extents[r.dim].to_string()),
            ncell(
                r.tile as f64,
                &format!("{}{}", r.tile, if r.is_default { " (default)" } else { "" })
            ),
        );
        let rest = match &r.estimate {
            Some(e) => format!(
                "{}{}{}{}{}",
                ncell(e.total_ns, &num(e.total_ns / 1e3, 3)),
                ncell(e.hbm_bytes, &format!("{:.4e}", e.hbm_bytes)),
                ncell(e.steps as f64, &e.steps.to_string()),
                ncell(r.vmem_bytes as f64, &r.vmem_bytes.to_string()),
                bcell(e.bottleneck, false)
            ),
            None => format!(
                "<td class=\"n\" data-v=\"1e300\">-</td><td class=\"n\" data-v=\"1e300\">-</td><td class=\"n\" data-v=\"1e300\">-</td>{}<td>does not fit VMEM</td>",
                ncell(r.vmem_bytes as f64, &r.vmem_bytes.to_string())
            ),
        };
        let _ = writeln!(
            h,
            "<tr{}>{lead}{rest}</tr>",
            if r.is_default {
                " class=\"default\""
            } else {
                ""
            }
        );
    }
    let _ = writeln!(h, "</tbody></table>");
}

fn layout_table(h: &mut String, s: &LayoutSweep) {
    let b = s.baseline_ns();
    let _ = writeln!(
        h,
        "<table class=\"sortable\"><thead><tr><th>layout</th><th class=\"n\">program (ms)</th><th class=\"n\">vs compiler</th><th class=\"n\">copies</th><th class=\"n\">kernels</th></tr></thead><tbody>"
    );
    for r in &s.rows {
        let ratio = if b > 0.0 { r.total_ns / b } else { 0.0 };
        let _ = writeln!(
            h,
            "<tr{}><td>{}</td>{}{}{}{}</tr>",
            if r.layout.is_empty() {
                " class=\"default\""
            } else {
                ""
            },
            layout_text(&r.layout),
            ncell(r.total_ns, &num(r.total_ns / 1e6, 4)),
            ncell(ratio, &format!("{ratio:.3}×")),
            ncell(r.copies as f64, &r.copies.to_string()),
            ncell(r.kernels as f64, &r.kernels.to_string())
        );
    }
    let _ = writeln!(h, "</tbody></table>");
}
