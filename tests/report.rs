//! The teaching views: `sweep target` (the program on every generation), `roofline` and
//! `report` (one HTML page), all from the program model `estimate` uses.

mod common;

use std::process::Command;

use tpusim::kernels::{estimate_program, tile_overrides, LoweredProgram};
use tpusim::passes::{compile, CompilationConfig};
use tpusim::report::roofline;
use tpusim::sweep::target::{target_sweep, time_by_bottleneck};
use tpusim::tpu::target::PRESET_NAMES;
use tpusim::tpu::TpuTarget;

use common::{load_sample, run_ok, sample_path};

fn tpusim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tpusim"))
}

fn presets() -> Vec<TpuTarget> {
    PRESET_NAMES
        .iter()
        .map(|n| TpuTarget::preset(n).unwrap())
        .collect()
}

/// The target sweep's totals and rows are the program estimate on each target; a
/// kernel "changes" exactly when its bottleneck (or untiled flag) differs somewhere.
#[test]
fn target_sweep_is_the_estimate_on_each_target() {
    let m = load_sample("resnet50_train_b8.hlo");
    let c = compile(&m, &CompilationConfig::default()).unwrap();
    let p = LoweredProgram::new(&c.module).unwrap();
    let tiles = tile_overrides(&c.kernels);
    let targets = presets();
    let s = target_sweep(&p, &tiles, &targets).unwrap();
    assert_eq!(s.targets.len(), 6);
    for (ti, t) in targets.iter().enumerate() {
        let e = p.estimate(t, &tiles).unwrap();
        assert_eq!(s.targets[ti].target, t.name);
        assert_eq!(s.targets[ti].total_ns, e.total_ns);
        let by: f64 = s.targets[ti].by_bottleneck.iter().map(|b| b.ns).sum();
        assert!(
            (by - e.total_ns).abs() <= 1e-9 * e.total_ns,
            "{by} vs {}",
            e.total_ns
        );
        assert_eq!(
            s.kernels.len(),
            e.kernels.len(),
            "every kernel of ResNet-50 runs"
        );
        for (k, r) in s.kernels.iter().zip(&e.kernels) {
            assert_eq!(k.kernel, r.name);
            assert_eq!(k.on[ti].total_ns, r.total_ns);
            assert_eq!(k.on[ti].bottleneck, r.bottleneck);
        }
    }
    for k in &s.kernels {
        let differs =
            k.on.iter()
                .any(|o| (o.bottleneck, o.untiled) != (k.on[0].bottleneck, k.on[0].untiled));
        assert_eq!(k.changes, differs, "{}", k.kernel);
    }
    // Newer generations are faster on this program, v5p the fastest.
    let ms: Vec<f64> = s.targets.iter().map(|t| t.total_ns / 1e6).collect();
    assert!(
        ms[0] > ms[1] && ms[1] > ms[2] && ms[2] > ms[3] && ms[3] > ms[4],
        "{ms:?}"
    );
    // Between v3 and v5e: 23 convolutions go from MXU- to HBM-bound (v5e has 3.2× the
    // MXU throughput of a v3 core and 1.8× its bandwidth), none the other way.
    let two = target_sweep(&p, &tiles, &[TpuTarget::v3(), TpuTarget::v5e()]).unwrap();
    let changed = two.changes();
    let mxu_to_hbm = changed
        .iter()
        .filter(|k| {
            k.on[0].bottleneck == tpusim::tpu::Bottleneck::Mxu
                && k.on[1].bottleneck == tpusim::tpu::Bottleneck::Hbm
        })
        .count();
    assert_eq!(mxu_to_hbm, 23);
    assert!(changed
        .iter()
        .all(|k| k.on[1].bottleneck != tpusim::tpu::Bottleneck::Mxu));
    // largest share first
    for w in changed.windows(2) {
        assert!(w[0].max_share() >= w[1].max_share());
    }
}

/// `sweep target` writes one CSV line per kernel and target, the same SVG twice, and
/// JSON with the same totals as `estimate` on each target.
#[test]
fn sweep_target_cli_writes_csv_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let f = sample_path("mlp_train.hlo");
    let csv = dir.path().join("t.csv");
    let svg = dir.path().join("t.svg");
    let out = run_ok(
        tpusim()
            .arg("sweep")
            .arg("target")
            .arg(&f)
            .arg("--csv")
            .arg(&csv)
            .arg("--plot")
            .arg(&svg),
    );
    assert!(out.contains("3 of 7 kernels change bottleneck"), "{out}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 1 + 7 * 6);
    let first = std::fs::read(&svg).unwrap();
    assert!(first.starts_with(b"<svg"));
    run_ok(
        tpusim()
            .arg("sweep")
            .arg("target")
            .arg(&f)
            .arg("--plot")
            .arg(&svg),
    );
    assert_eq!(
        std::fs::read(&svg).unwrap(),
        first,
        "the same chart, byte for byte"
    );
    let j: serde_json::Value =
        serde_json::from_str(&run_ok(tpusim().arg("sweep").arg("target").arg(&f).args([
            "--targets",
            "v3,v5e",
            "--json",
        ])))
        .unwrap();
    for (i, t) in ["v3", "v5e"].iter().enumerate() {
        let e: serde_json::Value = serde_json::from_str(&run_ok(
            tpusim()
                .arg("estimate")
                .arg(&f)
                .args(["--tpu", t, "--json"]),
        ))
        .unwrap();
        assert_eq!(j["targets"][i]["target"], *t);
        assert_eq!(j["targets"][i]["total_ns"], e["total_ns"]);
    }
    let bad = tpusim()
        .arg("sweep")
        .arg("target")
        .arg(&f)
        .args(["--targets", "v3,v9"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown TPU preset `v9`"));
}

/// Every kernel with FLOPs is on the roofline, under both ceilings, and the kernels
/// without FLOPs make up the rest of the time: every sample, every preset.
#[test]
fn roofline_points_are_under_the_ceilings() {
    for path in common::sample_files() {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let m = load_sample(&name);
        let c = compile(&m, &CompilationConfig::default()).unwrap();
        for t in presets() {
            let e = estimate_program(&c.module, &t, &tile_overrides(&c.kernels)).unwrap();
            let r = roofline(&e, &t);
            let running = e.kernels.iter().filter(|k| k.multiplier > 0.0).count();
            assert_eq!(
                r.points.len() + r.without_flops,
                running,
                "{name} {}",
                t.name
            );
            let share: f64 = r.points.iter().map(|p| p.share).sum::<f64>() + r.without_flops_share;
            assert!((share - 1.0).abs() < 1e-9, "{name} {}: {share}", t.name);
            assert_eq!(r.ridge, r.peak_flops / r.bandwidth);
            for p in &r.points {
                let roof = r.peak_flops.min(r.bandwidth * p.intensity);
                assert!(
                    p.flops_per_s <= roof * 1.000_001,
                    "{name} {} {}: {} FLOP/s over the roof {roof}",
                    t.name,
                    p.kernel,
                    p.flops_per_s
                );
                assert_eq!(p.intensity, p.flops / p.bytes);
            }
        }
    }
}

/// The number `data-total-ns="…"` of the report page.
fn page_total(html: &str) -> f64 {
    let at = html
        .find("data-total-ns=\"")
        .expect("the page states the total")
        + 15;
    let end = at + html[at..].find('"').unwrap();
    html[at..end].parse().unwrap()
}

/// Every number printed after `"KEY": ` in a JSON text, in order, read exactly (serde_json
/// reads floats to within an ulp, and the page must equal estimate's to the bit).
fn json_numbers(text: &str, key: &str) -> Vec<f64> {
    let pat = format!("\"{key}\": ");
    text.match_indices(&pat)
        .map(|(i, _)| {
            let rest = &text[i + pat.len()..];
            let end = rest.find([',', '\n', '}']).unwrap_or(rest.len());
            rest[..end].trim().parse().unwrap()
        })
        .collect()
}

/// The report's total is `tpusim estimate`'s, its kernel table has estimate's rows, the
/// page and the roofline are the same bytes on a second run, and nothing in the page
/// points outside it.
#[test]
fn report_total_is_the_estimate_and_the_page_is_self_contained() {
    let dir = tempfile::tempdir().unwrap();
    for (name, tpu) in [("mlp_train.hlo", "v3"), ("resnet18_infer_b8.hlo", "v5e")] {
        let f = sample_path(name);
        let page = dir.path().join(format!("{name}.html"));
        let out = run_ok(
            tpusim()
                .arg("report")
                .arg(&f)
                .args(["--tpu", tpu, "--quiet", "--out"])
                .arg(&page),
        );
        assert!(
            out.contains("tile sweep: ") && out.contains("layout sweep: "),
            "{out}"
        );
        let html = std::fs::read_to_string(&page).unwrap();
        let text = run_ok(
            tpusim()
                .arg("estimate")
                .arg(&f)
                .args(["--tpu", tpu, "--json"]),
        );
        let e: serde_json::Value = serde_json::from_str(&text).unwrap();
        // the program's total first, then each row's
        let totals = json_numbers(&text, "total_ns");
        assert_eq!(page_total(&html), totals[0], "{name}");
        let rows = e["kernels"].as_array().unwrap();
        assert_eq!(totals.len(), rows.len() + 1);
        let table = &html[html.find("id=\"kernel-table\"").unwrap()..];
        let table = &table[..table.find("</table>").unwrap()];
        assert_eq!(table.matches("<tr>").count(), rows.len() + 1, "{name}");
        for (r, t) in rows.iter().zip(&totals[1..]) {
            let cell = format!("<td>{}</td>", r["name"].as_str().unwrap());
            assert!(table.contains(&cell), "{name}: no row {cell}");
            let time = format!("data-v=\"{t}\"");
            assert!(table.contains(&time), "{name}: no time {time}");
        }
        for needed in [
            "id=\"summary\"",
            "id=\"roofline\"",
            "id=\"explained\"",
            "id=\"tile\"",
            "id=\"layout\"",
            "<svg",
            "[grid-steps]",
        ] {
            let plain = html
                .replace("<code class=\"f\">", "")
                .replace("</code>", "");
            assert!(plain.contains(needed), "{name}: no {needed}");
        }
        // Self-contained: no stylesheet, script or image from anywhere else.
        for external in ["<link", "src=", "url(", "@import", "https:", "//cdn"] {
            assert!(!html.contains(external), "{name}: {external}");
        }
        assert_eq!(
            html.matches("http:").count(),
            html.matches("http://www.w3.org/2000/svg").count()
        );
        run_ok(
            tpusim()
                .arg("report")
                .arg(&f)
                .args(["--tpu", tpu, "--quiet", "--out"])
                .arg(dir.path().join("again.html")),
        );
        assert_eq!(
            std::fs::read(dir.path().join("again.html")).unwrap(),
            html.as_bytes(),
            "{name}: the same page, byte for byte"
        );
    }
    let roof = dir.path().join("r.svg");
    let f = sample_path("resnet50_train_b8.hlo");
    let out = run_ok(tpusim().arg("roofline").arg(&f).arg("--out").arg(&roof));
    assert!(out.contains("ridge 136.7 FLOP/B"), "{out}");
    let first = std::fs::read(&roof).unwrap();
    run_ok(tpusim().arg("roofline").arg(&f).arg("--out").arg(&roof));
    assert_eq!(std::fs::read(&roof).unwrap(), first);
}

/// The report's total on the library side: `report::build` over the compiled module
/// gives the estimate of that module, and its sweeps are of its costliest kernel.
#[test]
fn report_build_uses_the_program_estimate() {
    let m = load_sample("mlp_train.hlo");
    let cfg = CompilationConfig::default();
    let c = compile(&m, &cfg).unwrap();
    let t = TpuTarget::v3();
    let input = tpusim::report::ReportInput {
        file: "mlp_train.hlo",
        config_name: None,
        module: &m,
        config: &cfg,
        compiled: &c,
        target: &t,
    };
    let r = tpusim::report::build(&input, 2, &|_| {}).unwrap();
    let e = estimate_program(&c.module, &t, &tile_overrides(&c.kernels)).unwrap();
    assert_eq!(r.estimate, e);
    let costliest = &e.kernels[tpusim::report::by_cost(&e)[0]].name;
    assert_eq!(&r.explained[0].explanation.kernel, costliest);
    assert_eq!(r.explained.len(), 2);
    assert_eq!(&r.tile.as_ref().unwrap().kernel, costliest);
    assert_eq!(r.layout_kernel.as_deref(), Some(costliest.as_str()));
    // the sweep shown is the candidate with the largest spread
    let shown = r.layout.as_ref().unwrap();
    let best = r
        .layout_candidates
        .iter()
        .fold(f64::NEG_INFINITY, |a, c| a.max(c.spread));
    let of_shown = r
        .layout_candidates
        .iter()
        .find(|c| c.node == shown.node && c.tensor == shown.tensor)
        .unwrap();
    assert_eq!(of_shown.spread, best);
    let by: f64 = time_by_bottleneck(&e).iter().map(|b| b.ns).sum();
    assert!((by - e.total_ns).abs() < 1e-6 * e.total_ns);
}

/// Headless Chromium renders the page with no console message, its script sorts the
/// kernel table (`#sort=time`: the costliest kernel first), and a screenshot is made.
#[test]
fn report_renders_in_headless_chromium() {
    if !common::has(
        common::Need::Chromium,
        "report_renders_in_headless_chromium",
    ) {
        return;
    }
    let chromium = common::chromium().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let f = sample_path("resnet18_infer_b8.hlo");
    run_ok(
        tpusim()
            .arg("report")
            .arg(&f)
            .arg("--quiet")
            .arg("--out")
            .arg(&page),
    );
    let url = format!("file://{}", page.display());
    let headless = |extra: &[&str], url: &str| {
        let mut c = Command::new(chromium);
        c.args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .args(extra)
        .arg(url);
        c.output().unwrap()
    };
    let out = headless(&["--dump-dom"], &format!("{url}#sort=time"));
    assert!(out.status.success());
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(
        console.is_empty(),
        "console messages:\n{}",
        console.join("\n")
    );
    assert!(dom.contains("data-sortable=\"3\""), "the script ran");
    let e: serde_json::Value =
        serde_json::from_str(&run_ok(tpusim().arg("estimate").arg(&f).arg("--json"))).unwrap();
    let slowest = e["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .max_by(|a, b| {
            a["total_ns"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["total_ns"].as_f64().unwrap())
        })
        .unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    let table = &dom[dom.find("id=\"kernel-table\"").unwrap()..];
    let body = &table[table.find("<tbody>").unwrap()..];
    let first_name = body
        .split("<td>")
        .nth(1)
        .unwrap()
        .split("</td>")
        .next()
        .unwrap();
    assert_eq!(first_name, slowest, "sorted by time, largest first");
    assert!(table.contains("aria-sort=\"descending\""));
    let shot = dir.path().join("report.png");
    let out = headless(
        &[
            "--hide-scrollbars",
            "--window-size=1400,2400",
            &format!("--screenshot={}", shot.display()),
        ],
        &url,
    );
    assert!(out.status.success());
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 50_000,
        "{} bytes",
        png.len()
    );
}
