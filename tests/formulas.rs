//! From number to formula: every figure `explain` prints names its formulas, and each
//! name has its section in `docs/cost-model.md` (§10, "Formulas by name").

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use tpusim::kernels::explain_kernel;
use tpusim::passes::{compile, CompilationConfig};
use tpusim::tpu::{names_in_line, Formula, TpuTarget};

/// The section names of §10 of docs/cost-model.md (its `### NAME` headings).
fn documented() -> Vec<String> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cost-model.md"))
            .unwrap();
    let mut inside = false;
    let mut names = Vec::new();
    for line in text.lines() {
        if line.starts_with("## ") {
            inside = line.starts_with("## 10. Formulas by name");
        } else if inside {
            if let Some(n) = line.strip_prefix("### ") {
                names.push(n.trim().to_string());
            }
        }
    }
    names
}

#[test]
fn every_formula_has_one_section_and_every_section_is_a_formula() {
    let docs = documented();
    let want: Vec<String> = Formula::ALL.iter().map(|f| f.name().to_string()).collect();
    assert_eq!(
        docs, want,
        "§10 of docs/cost-model.md, in Formula::ALL order"
    );
}

/// Every kernel of every `hlo_samples/` module, explained on v3 and on v4 (megacore):
/// each name at the end of a line is a documented formula, the JSON's `figures` carry
/// the same names as the text, and the lines with figures have names.
#[test]
fn every_name_explain_prints_has_its_section() {
    let docs: BTreeSet<String> = documented().into_iter().collect();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut explained = 0;
    for path in common::sample_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let m = tpusim::hlo::parse_module(&path.display().to_string(), &text).unwrap();
        let c = compile(&m, &CompilationConfig::default()).unwrap();
        for t in [TpuTarget::v3(), TpuTarget::v4()] {
            for k in &c.kernels {
                let Ok(x) = explain_kernel(&c.module, &t, &k.name, None) else {
                    continue; // zero-cost instructions are not kernels
                };
                explained += 1;
                let printed = x.to_string();
                let mut in_text = BTreeSet::new();
                for line in printed.lines() {
                    if let Some(names) = names_in_line(line) {
                        for n in names {
                            assert!(
                                docs.contains(n),
                                "{}: kernel {} prints formula `{n}`, which has no section \
                                 in docs/cost-model.md §10:\n{line}",
                                path.display(),
                                k.name
                            );
                            in_text.insert(n.to_string());
                        }
                    }
                }
                // The figures of the derivation's sections all name a formula.
                for line in x.derivation.to_string().lines() {
                    let figure = line.starts_with("   ") || line.starts_with("2. ");
                    if figure && !line.contains("Not evaluable") {
                        assert!(names_in_line(line).is_some(), "no formula: {line}");
                    }
                }
                let j = serde_json::to_value(&x).unwrap();
                let mut in_json = BTreeSet::new();
                for figs in [&j["figures"], &j["derivation"]["figures"]] {
                    for f in figs.as_array().unwrap() {
                        for n in f["formulas"].as_array().unwrap() {
                            in_json.insert(n.as_str().unwrap().to_string());
                        }
                    }
                }
                assert_eq!(in_text, in_json, "{}", k.name);
                seen.extend(in_text);
            }
        }
    }
    assert!(explained > 2000, "{explained} explanations");
    // The samples reach every formula of a kernel's derivation (the megacore factor on
    // v4; the untiled roofline and the side outputs only where a sample has them).
    for f in [
        Formula::TilesPerDim,
        Formula::VmemFootprint,
        Formula::Fetches,
        Formula::MxuFolds,
        Formula::MegacoreFactor,
        Formula::KernelTotal,
        Formula::AchievedFlops,
        Formula::TileCounts,
        Formula::KernelFlops,
    ] {
        assert!(seen.contains(f.name()), "no explanation printed {f}");
    }
}

/// The derivation's text is its figures, one a line.
#[test]
fn the_derivation_text_is_its_figures() {
    let m = common::load_sample("mlp_train.hlo");
    let c = compile(&m, &CompilationConfig::default()).unwrap();
    let x = explain_kernel(&c.module, &TpuTarget::v3(), "fusion.16", None).unwrap();
    let figs = x.derivation.figures();
    let joined: String = figs.iter().map(|f| format!("{f}\n")).collect();
    assert_eq!(joined, x.derivation.to_string());
    let total = figs
        .iter()
        .find(|f| f.text.starts_with("6. Total"))
        .unwrap();
    assert_eq!(total.formulas, [Formula::KernelTotal, Formula::Bottleneck]);
    assert!(x
        .to_string()
        .contains("grid steps = Π tiles = 1  [grid-steps]"));
}
