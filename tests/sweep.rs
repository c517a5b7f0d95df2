//! `tpusim sweep`: tile sweeps are the cost model's estimates tile by tile, layout
//! sweeps are whole-program recompilations, and the CLI writes CSV and SVG files.

mod common;

use std::path::Path;
use std::process::Command;

use tpusim::dataset::layout_eval::recompiled_ns;
use tpusim::kernels::{find_kernel, LoweredProgram};
use tpusim::passes::{compile, CompilationConfig, LayoutEntry, NodeRef, PreparedModule};
use tpusim::sweep::{layout_sweep, permutations, tile_sweep, SweepError, Tensor};
use tpusim::tpu::{default_tile, estimate, tile_candidates, KernelDesc, TileConfig, TpuTarget};

use common::{load_sample as load, sample_path as sample};

/// The first MXU kernel of ResNet-18 inference under the default configuration whose
/// output dims all have a choice of tile (a 3×3 convolution), lowered.
fn resnet18_conv() -> KernelDesc {
    let m = load("resnet18_infer_b8.hlo");
    let c = compile(&m, &CompilationConfig::default()).unwrap();
    let p = LoweredProgram::new(&c.module).unwrap();
    let t = TpuTarget::v3();
    let k = p
        .kernels
        .iter()
        .map(|k| k.lowered.desc())
        .find(|d| {
            matches!(d.kind, tpusim::tpu::KernelKind::Mxu(_))
                && d.reduction_dims.len() == 3
                && tile_candidates(d, &t)[..2].iter().all(|c| c.len() > 4)
        })
        .expect("a 3x3 convolution");
    // The CLI looks kernels up by name the same way.
    let (_, _, found) = find_kernel(&c.module, &k.name).unwrap();
    assert_eq!(found.desc(), k);
    k.clone()
}

#[test]
fn tile_sweep_rows_are_the_models_estimates() {
    let desc = resnet18_conv();
    let t = TpuTarget::v3();
    let s = tile_sweep(&desc, &t, &[]).unwrap();
    let n = desc.n_iter();
    let default = estimate(&desc, &default_tile(&desc, &t), &t).unwrap();
    assert_eq!(s.default_tile, default.tile[..n].to_vec());
    assert_eq!(s.default_ns, default.total_ns);
    let cands = tile_candidates(&desc, &t);
    let swept: Vec<usize> = (0..n).filter(|&d| cands[d].len() > 1).collect();
    assert!(swept.len() >= 4, "{swept:?}");
    let mut infeasible = 0;
    for &d in &swept {
        let rows: Vec<_> = s.rows.iter().filter(|r| r.dim == d).collect();
        // every candidate, plus the default size, ascending
        let mut want = cands[d].clone();
        if !want.contains(&s.default_tile[d]) {
            want.push(s.default_tile[d]);
        }
        want.sort_unstable();
        assert_eq!(rows.iter().map(|r| r.tile).collect::<Vec<_>>(), want);
        assert_eq!(rows.iter().filter(|r| r.is_default).count(), 1);
        let mut last_bytes = f64::INFINITY;
        for r in rows {
            let mut tile = s.default_tile.clone();
            tile[d] = r.tile;
            let cfg = TileConfig::from_sizes(&desc, &tile);
            // The row's configuration is in tiles: its bound for the swept dim counts
            // the tiles of the element size the row names.
            assert_eq!(r.config, cfg);
            let (field, tiles) = r.bound.clone().expect("every swept dim has a bound");
            let (f, j) = tpusim::tpu::bound_of_dim(&desc, d).unwrap();
            assert_eq!(field, format!("{f}[{j}]"));
            assert_eq!(Some(tiles), cfg.bound(f, j));
            let direct = estimate(&desc, &cfg, &t);
            match (&r.estimate, direct) {
                (Some(e), Ok(x)) => {
                    assert_eq!(e.total_ns, x.total_ns);
                    assert_eq!(e.tile[..n], tile[..], "the tile asked for is the tile used");
                    let steps: i64 = (0..n)
                        .map(|i| (desc.iter_extent(i) + tile[i] - 1) / tile[i])
                        .product();
                    assert_eq!(e.steps, steps as u64);
                    assert!(r.vmem_bytes <= t.vmem_limit_bytes);
                    // bigger tiles of this convolution re-fetch less
                    assert!(e.hbm_bytes <= last_bytes, "dim {d} tile {}", r.tile);
                    last_bytes = e.hbm_bytes;
                    if r.is_default {
                        assert_eq!(e.total_ns, s.default_ns);
                    }
                }
                (None, Err(_)) => {
                    infeasible += 1;
                    assert!(r.vmem_bytes > t.vmem_limit_bytes);
                }
                (a, b) => panic!("dim {d} tile {}: sweep {a:?}, model {b:?}", r.tile),
            }
        }
    }
    assert!(infeasible > 0, "some of the largest tiles do not fit VMEM");
    let only = tile_sweep(&desc, &t, &[swept[1], swept[0], swept[1]]).unwrap();
    let dims: Vec<usize> = only.rows.iter().map(|r| r.dim).collect();
    let n1 = dims.iter().filter(|&&d| d == swept[1]).count();
    assert_eq!(n1, s.rows.iter().filter(|r| r.dim == swept[1]).count());
    assert_eq!(dims[0], swept[1], "in the order asked, each dim once");
    assert_eq!(dims.last(), Some(&swept[0]));
    assert!(matches!(
        tile_sweep(&desc, &t, &[n]),
        Err(SweepError::NoSuchDim { dim, .. }) if dim == n
    ));
    let csv = s.to_csv();
    assert_eq!(csv.lines().count(), s.rows.len() + 1);
    assert!(csv.starts_with("kernel,dim,label,extent,tile,bound,tiles,default,fits_vmem,total_ns,"));
}

#[test]
fn permutations_are_lexicographic() {
    assert_eq!(permutations(0), vec![Vec::<i64>::new()]);
    assert_eq!(
        permutations(3),
        vec![
            vec![0, 1, 2],
            vec![0, 2, 1],
            vec![1, 0, 2],
            vec![1, 2, 0],
            vec![2, 0, 1],
            vec![2, 1, 0]
        ]
    );
    assert_eq!(permutations(5).len(), 120);
}

fn config_with(node: &str, kernel: Vec<i64>) -> CompilationConfig {
    let mut c = CompilationConfig::default();
    c.layout.push(LayoutEntry {
        node: NodeRef::Name(node.into()),
        output: vec![],
        input: vec![],
        kernel,
    });
    c
}

#[test]
fn layout_sweep_rows_are_recompiled_programs() {
    let m = load("mlp_train.hlo");
    let t = TpuTarget::v3();
    let base = CompilationConfig::default();
    let ticks = std::sync::atomic::AtomicUsize::new(0);
    let tick = |total: usize| {
        assert_eq!(total, 3);
        ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    // The weights of the first layer, p_0_ = f32[512,1024]{1,0}, an entry parameter:
    // its layout is fixed by the entry computation layout.
    let s = layout_sweep(&m, &base, "%dot_general.5", Tensor::Kernel, &t, &tick).unwrap();
    assert_eq!(ticks.into_inner(), 3);
    assert_eq!(
        (s.node.as_str(), s.opcode.as_str()),
        ("dot_general.5", "dot")
    );
    assert_eq!(s.dims, vec![512, 1024]);
    assert_eq!(s.input_layout, vec![1, 0]);
    let layouts: Vec<Vec<i64>> = s.rows.iter().map(|r| r.layout.clone()).collect();
    assert_eq!(layouts, vec![vec![], vec![0, 1], vec![1, 0]]);
    let prepared = PreparedModule::new(&m).unwrap();
    for r in &s.rows {
        let cfg = config_with("dot_general.5", r.layout.clone());
        assert_eq!(r.total_ns, recompiled_ns(&prepared, &cfg, &t).unwrap());
    }
    // The compiler keeps the parameter's own layout: no copy. Asking the dot for the
    // transposed weights costs exactly one copy of the parameter (one more kernel).
    let (compiler, transposed, own) = (&s.rows[0], &s.rows[1], &s.rows[2]);
    assert_eq!((compiler.copies, own.copies, transposed.copies), (0, 0, 1));
    assert_eq!(transposed.kernels, compiler.kernels + 1);
    assert_eq!(own.total_ns, compiler.total_ns);
    assert!(transposed.total_ns > compiler.total_ns);
    let default_program = LoweredProgram::new(&compile(&m, &base).unwrap().module)
        .unwrap()
        .total_ns(&t, &Default::default())
        .unwrap();
    assert_eq!(s.baseline_ns(), default_program);
    let csv = s.to_csv();
    assert_eq!(
        csv.lines().nth(2).unwrap(),
        format!(
            "dot_general.5,kernel,\"{{0,1}}\",{},{},1,{}",
            transposed.total_ns,
            transposed.total_ns / compiler.total_ns,
            transposed.kernels
        )
    );

    // Every layout of a convolution input; the rows do not depend on the threads.
    let r18 = load("resnet18_infer_b8.hlo");
    let conv = "conv_general_dilated.22";
    let a = layout_sweep(&r18, &base, conv, Tensor::Input, &t, &|_| {}).unwrap();
    assert_eq!(a.rows.len(), 25);
    assert_eq!(a.dims, vec![8, 56, 56, 64]);
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let b = one
        .install(|| layout_sweep(&r18, &base, conv, Tensor::Input, &t, &|_| {}))
        .unwrap();
    assert_eq!(a.to_csv(), b.to_csv());
    // Its input module's layout costs what the compiler's choice does here.
    let own = a
        .rows
        .iter()
        .find(|r| r.layout == vec![3, 2, 1, 0])
        .unwrap();
    assert!((own.total_ns / a.baseline_ns() - 1.0).abs() < 1e-3);
    // A feature dim that is not minor makes the program slower.
    let worst = a.rows.iter().map(|r| r.total_ns).fold(0.0, f64::max);
    assert!(
        worst > 1.1 * a.baseline_ns(),
        "{worst} vs {}",
        a.baseline_ns()
    );
}

#[test]
fn layout_sweep_errors_name_the_node() {
    let m = load("mlp_train.hlo");
    let t = TpuTarget::v3();
    let base = CompilationConfig::default();
    let run = |node: &str, tensor| layout_sweep(&m, &base, node, tensor, &t, &|_| {});
    let e = run("nope.1", Tensor::Output).unwrap_err();
    assert_eq!(
        e.to_string(),
        "node `nope.1`: no instruction of that name in the module"
    );
    let e = run("reduce_sum.7", Tensor::Output).unwrap_err();
    assert_eq!(
        e.to_string(),
        "node `reduce_sum.7` is a reduce, not a configurable node (configurable: convolution, dot, reshape)"
    );
    let r18 = load("resnet18_infer_b8.hlo");
    let reshape = r18
        .computations
        .values()
        .flat_map(|c| c.order.iter().map(move |&id| c.instr(id)))
        .find(|i| i.opcode == tpusim::ir::Opcode::Reshape)
        .map(|i| i.name.to_string())
        .unwrap();
    let e = layout_sweep(&r18, &base, &reshape, Tensor::Kernel, &t, &|_| {}).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "node `{reshape}` (reshape) has no kernel array tensor to lay out \
             (the kernel is operand 1 of a convolution or dot)"
        )
    );
    // A bad layout in the starting configuration is the compiler's error.
    let mut bad = CompilationConfig::default();
    bad.layout.push(LayoutEntry {
        node: NodeRef::Name("dot_general.6".into()),
        output: vec![0, 0],
        input: vec![],
        kernel: vec![],
    });
    let e = layout_sweep(&m, &bad, "dot_general.5", Tensor::Output, &t, &|_| {}).unwrap_err();
    assert!(matches!(e, SweepError::Compile(_)), "{e}");
    assert!(e.to_string().contains("dot_general.6"), "{e}");
}

fn tpusim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tpusim"))
}

#[test]
fn cli_writes_csv_and_svg_and_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let desc = resnet18_conv();
    let file = sample("resnet18_infer_b8.hlo");
    let run = |tag: &str| {
        let csv = dir.path().join(format!("{tag}.csv"));
        let svg = dir.path().join(format!("{tag}.svg"));
        let stdout = common::run_ok(
            tpusim()
                .args(["sweep", "tile"])
                .arg(&file)
                .args(["--kernel", &desc.name, "--csv"])
                .arg(&csv)
                .arg("--plot")
                .arg(&svg),
        );
        (
            stdout,
            std::fs::read(&csv).unwrap(),
            std::fs::read_to_string(&svg).unwrap(),
        )
    };
    let (table, csv, svg) = run("a");
    let s = tile_sweep(&desc, &TpuTarget::v3(), &[]).unwrap();
    assert_eq!(csv, s.to_csv().into_bytes());
    assert!(
        table.contains(&format!("default tile {:?}", s.default_tile)),
        "{table}"
    );
    assert_eq!(
        table
            .lines()
            .filter(|l| l.contains("does not fit VMEM"))
            .count(),
        s.rows.iter().filter(|r| r.estimate.is_none()).count()
    );
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains(desc.name.as_str()) && svg.contains("does not fit VMEM"));
    // one x label per swept tile size (log axis with its own ticks), at least four
    // y labels, and the infeasible band labelled
    let labels: Vec<&str> = svg
        .split("</text>")
        .filter_map(|t| t.rsplit('>').next())
        .map(str::trim)
        .collect();
    let mut tiles: Vec<i64> = s.rows.iter().map(|r| r.tile).collect();
    tiles.sort_unstable();
    tiles.dedup();
    for t in &tiles {
        assert_eq!(
            labels.iter().filter(|l| **l == t.to_string()).count(),
            1,
            "{t}: {labels:?}"
        );
    }
    let numeric = labels.iter().filter(|l| l.parse::<f64>().is_ok()).count();
    assert!(numeric >= tiles.len() + 4, "{labels:?}");
    assert!(
        labels.contains(&"does not fit VMEM (no time)"),
        "{labels:?}"
    );
    let (_, csv2, svg2) = run("b");
    assert_eq!((&csv, &svg), (&csv2, &svg2), "same input, same bytes");

    // Layouts: the table has one line per layout.
    let lsvg = dir.path().join("l.svg");
    let out = tpusim()
        .args(["sweep", "layout"])
        .arg(sample("mlp_train.hlo"))
        .args([
            "--node",
            "dot_general.5",
            "--tensor",
            "kernel",
            "--quiet",
            "--plot",
        ])
        .arg(&lsvg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("{0,1}") && l.contains(" 1 ")),
        "{table}"
    );
    let lsvg_text = std::fs::read_to_string(&lsvg).unwrap();
    assert!(lsvg_text.contains("{0,1}"));
    // the chart says what red is
    assert!(
        lsvg_text.contains("the compiler&apos;s choice (no layout set)"),
        "{lsvg_text}"
    );

    // --json: the sweep itself, the same numbers (and the same SVG bytes beside it).
    let json = |args: &[&str], plot: &Path| {
        common::run_ok(tpusim().args(args).arg("--json").arg("--plot").arg(plot))
    };
    let f = file.to_str().unwrap();
    let tj = json(
        &["sweep", "tile", f, "--kernel", &desc.name],
        &dir.path().join("j.svg"),
    );
    assert_eq!(tj.trim_end(), serde_json::to_string_pretty(&s).unwrap());
    let v: serde_json::Value = serde_json::from_str(&tj).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), s.rows.len());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("j.svg")).unwrap(),
        svg2
    );
    let mlp = sample("mlp_train.hlo");
    let lj = json(
        &[
            "sweep",
            "layout",
            mlp.to_str().unwrap(),
            "--node",
            "dot_general.5",
            "--tensor",
            "kernel",
            "--quiet",
        ],
        &dir.path().join("lj.svg"),
    );
    let ls = layout_sweep(
        &load("mlp_train.hlo"),
        &CompilationConfig::default(),
        "dot_general.5",
        Tensor::Kernel,
        &TpuTarget::v3(),
        &|_| {},
    )
    .unwrap();
    assert_eq!(lj.trim_end(), serde_json::to_string_pretty(&ls).unwrap());
    assert_eq!(ls.rows.len(), 3);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("lj.svg")).unwrap(),
        lsvg_text
    );

    // Errors: a message naming what is wrong, exit 1, and no file written.
    let csv = dir.path().join("never.csv");
    for (args, msg) in [
        (
            vec!["sweep", "tile", "--kernel", "nope.3"],
            "no kernel named `nope.3`",
        ),
        (
            vec!["sweep", "layout", "--node", "add.9"],
            "node `add.9`: no instruction of that name",
        ),
    ] {
        let out = tpusim()
            .args(&args)
            .arg(sample("mlp_train.hlo"))
            .arg("--csv")
            .arg(&csv)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(msg), "{err}");
        assert!(!csv.exists());
    }
    let out = tpusim()
        .args(["sweep", "tile"])
        .arg(&file)
        .args(["--kernel", &desc.name, "--dim", "99"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--dim 99 is not one of them"));
}
