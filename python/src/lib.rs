//! `tpusim._tpusim`: the Python bindings of the tpusim library.
//!
//! Every function takes a module *source* — HLO text (`str`), a path (`os.PathLike`, or a
//! `str` naming an existing file) or the bytes of a module file (HLO text or any of the
//! binary forms `tpusim` reads) — and returns what the CLI's `--json` prints, parsed into
//! Python objects (the JSON text is made by the same serde code and read with
//! `json.loads`, so the two are equal by construction). Samples in memory are dicts of
//! numpy arrays made from the library's member list of a sample
//! (`tpusim::dataset::write::Member`), the same list the npz writer writes. Errors are
//! `tpusim.TpusimError` with the CLI's message; the GIL is released while Rust works.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use numpy::{PyArray1, PyArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use tpusim::dataset::generate::{
    self as gen, module_names, GenOptions, GenProgress, Input, SampleOptions, Search,
};
use tpusim::dataset::plan::{Shard, SplitRatios};
use tpusim::dataset::write::{Member, Values};
use tpusim::ir::Module;
use tpusim::passes::{CompilationConfig, CompiledModule};
use tpusim::tpu::TpuTarget;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

create_exception!(
    tpusim,
    TpusimError,
    PyException,
    "A tpusim error: bad input, a module that cannot be compiled or costed, an output \
     tree that cannot be written. The message is the one the `tpusim` command prints."
);

fn err(msg: impl std::fmt::Display) -> PyErr {
    TpusimError::new_err(msg.to_string())
}

/// A module source, read on the Python side (under the GIL) into owned data.
enum Source {
    Path(PathBuf),
    Text(String),
    Bytes(Vec<u8>),
}

impl Source {
    fn extract(obj: &Bound<'_, PyAny>) -> PyResult<Source> {
        if let Ok(b) = obj.downcast::<PyBytes>() {
            return Ok(Source::Bytes(b.as_bytes().to_vec()));
        }
        if let Ok(s) = obj.extract::<String>() {
            // One line that is not the start of a module names a file (which may be
            // missing: the error then says so); anything else is HLO text.
            if !s.contains('\n') && !s.trim_start().starts_with("HloModule") {
                return Ok(Source::Path(PathBuf::from(s)));
            }
            return Ok(Source::Text(s));
        }
        if let Ok(p) = obj.extract::<PathBuf>() {
            return Ok(Source::Path(p));
        }
        Err(pyo3::exceptions::PyTypeError::new_err(
            "a module source is HLO text (str), a path (str or os.PathLike) or bytes",
        ))
    }

    /// The label errors and names use: the path, or `<string>` / `<bytes>`.
    fn label(&self) -> String {
        match self {
            Source::Path(p) => p.display().to_string(),
            Source::Text(_) => "<string>".into(),
            Source::Bytes(_) => "<bytes>".into(),
        }
    }

    fn load(&self, split: bool) -> Result<Vec<tpusim::cli::LoadedModule>, String> {
        match self {
            Source::Path(p) => tpusim::cli::load_modules(p, split).map_err(|e| e.to_string()),
            Source::Text(t) => {
                tpusim::cli::modules_from_bytes(&self.label(), t.clone().into_bytes(), split)
                    .map_err(|e| e.to_string())
            }
            Source::Bytes(b) => tpusim::cli::modules_from_bytes(&self.label(), b.clone(), split)
                .map_err(|e| e.to_string()),
        }
    }

    /// The first module (what the single-module commands read).
    fn module(&self) -> Result<Module, String> {
        self.load(false)?
            .into_iter()
            .next()
            .map(|m| m.module)
            .ok_or_else(|| format!("{}: no module", self.label()))
    }

    /// The modules with the names `generate` gives them: by file name for a path
    /// ([`module_names`]), else `name` or the module's own name.
    fn inputs(&self, name: Option<&str>) -> Result<Vec<Input>, String> {
        let mods = self.load(false)?;
        let names = match (self, name) {
            (_, Some(n)) => module_names(Path::new(n), mods.len()),
            (Source::Path(p), None) => module_names(p, mods.len()),
            (_, None) => {
                let n = mods
                    .first()
                    .map(|m| m.module.name.to_string())
                    .unwrap_or_default();
                module_names(Path::new(&n), mods.len())
            }
        };
        Ok(mods
            .into_iter()
            .zip(names)
            .map(|(m, name)| Input {
                name,
                module: m.module,
            })
            .collect())
    }
}

/// A JSON text (made by the library's serde code) as Python objects.
fn from_json(py: Python<'_>, text: &str) -> PyResult<PyObject> {
    let json = py.import("json")?;
    Ok(json.call_method1("loads", (text,))?.unbind())
}

fn target(tpu: &str, host_dispatch: bool) -> Result<TpuTarget, String> {
    tpusim::cli::target(tpu, host_dispatch).map_err(|e| format!("{e:#}"))
}

/// A configuration: `None` (the compiler's default), a path to a JSON/TOML file, or a
/// dict (the JSON form).
fn config(py: Python<'_>, cfg: Option<&Bound<'_, PyAny>>) -> PyResult<CompilationConfig> {
    let Some(c) = cfg else {
        return Ok(CompilationConfig::default());
    };
    if c.is_none() {
        return Ok(CompilationConfig::default());
    }
    if c.downcast::<PyDict>().is_ok() {
        let text: String = py.import("json")?.call_method1("dumps", (c,))?.extract()?;
        return CompilationConfig::from_json_str(&text).map_err(err);
    }
    let p: PathBuf = c.extract()?;
    CompilationConfig::from_path(&p).map_err(|e| err(format!("reading {}: {e}", p.display())))
}

/// Load, compile and self-check, as `tpusim compile` / `estimate` / `explain` do.
fn compiled(src: &Source, cfg: &CompilationConfig) -> Result<CompiledModule, String> {
    let m = src.module()?;
    let label = src.label();
    let c = tpusim::passes::compile(&m, cfg).map_err(|e| format!("{label}: error: {e}"))?;
    tpusim::passes::verify::verify(&c.module)
        .map_err(|e| format!("{label}: error: compiled module fails its self-check: {e}"))?;
    Ok(c)
}

/// parse(source, *, split_modules=False, verify=True) -> dict
#[pyfunction]
#[pyo3(signature = (source, *, split_modules=false, verify=true))]
fn parse(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    split_modules: bool,
    verify: bool,
) -> PyResult<PyObject> {
    let src = Source::extract(source)?;
    let text = py
        .allow_threads(|| {
            let mods = src.load(split_modules)?;
            let mut warnings = 0usize;
            if verify {
                for m in &mods {
                    if let Err(errors) = tpusim::analysis::verify_module(&m.module) {
                        warnings += errors.len();
                    }
                }
            }
            let comps: usize = mods.iter().map(|m| m.module.computations.len()).sum();
            let instrs: usize = mods.iter().map(|m| m.module.instruction_count()).sum();
            Ok::<_, String>(
                serde_json::json!({"file": src.label(), "ok": true, "modules": mods.len(),
                "computations": comps, "instructions": instrs, "verifier_warnings": warnings})
                .to_string(),
            )
        })
        .map_err(err)?;
    from_json(py, &text)
}

/// print_module(source) -> str: canonical HLO text.
#[pyfunction]
fn print_module(py: Python<'_>, source: &Bound<'_, PyAny>) -> PyResult<String> {
    let src = Source::extract(source)?;
    py.allow_threads(|| {
        let mods = src.load(false)?;
        Ok::<_, String>(
            mods.iter()
                .map(|m| tpusim::hlo::print_module(&m.module))
                .collect::<Vec<_>>()
                .join("// -----\n"),
        )
    })
    .map_err(err)
}

/// analyze(source) -> dict
#[pyfunction]
fn analyze(py: Python<'_>, source: &Bound<'_, PyAny>) -> PyResult<PyObject> {
    let src = Source::extract(source)?;
    let text = py
        .allow_threads(|| {
            let m = src.module()?;
            let r = tpusim::analysis::analyze_module(&m);
            serde_json::to_string(&r).map_err(|e| e.to_string())
        })
        .map_err(err)?;
    from_json(py, &text)
}

/// compile(source, config=None, *, emit="json") -> dict | str
#[pyfunction]
#[pyo3(signature = (source, config=None, *, emit="json"))]
fn compile(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    config: Option<&Bound<'_, PyAny>>,
    emit: &str,
) -> PyResult<PyObject> {
    let src = Source::extract(source)?;
    let cfg = self::config(py, config)?;
    let hlo = match emit {
        "json" => false,
        "hlo" => true,
        _ => return Err(err(format!("emit must be 'json' or 'hlo', not '{emit}'"))),
    };
    let text = py
        .allow_threads(|| {
            let c = compiled(&src, &cfg)?;
            Ok::<_, String>(if hlo {
                tpusim::hlo::print_module(&c.module)
            } else {
                c.kernels_json()
            })
        })
        .map_err(err)?;
    if hlo {
        Ok(text.into_pyobject(py)?.into_any().unbind())
    } else {
        from_json(py, &text)
    }
}

/// estimate(source, tpu="v3", config=None, *, host_dispatch=False) -> dict
#[pyfunction]
#[pyo3(signature = (source, tpu="v3", config=None, *, host_dispatch=false))]
fn estimate(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    tpu: &str,
    config: Option<&Bound<'_, PyAny>>,
    host_dispatch: bool,
) -> PyResult<PyObject> {
    let src = Source::extract(source)?;
    let cfg = self::config(py, config)?;
    let text = py
        .allow_threads(|| {
            let t = target(tpu, host_dispatch)?;
            let m = src.module()?;
            let label = src.label();
            // what `tpusim estimate` costs: the program compiled from the input
            let e = tpusim::passes::PreparedModule::new(&m)
                .map_err(tpusim::kernels::ProgramError::from)
                .and_then(|p| tpusim::kernels::compile_program(&p, &cfg))
                .and_then(|c| c.estimate(&t))
                .map_err(|e| format!("{label}: error: {e}"))?;
            serde_json::to_string_pretty(&e).map_err(|e| e.to_string())
        })
        .map_err(err)?;
    from_json(py, &text)
}

/// explain(source, kernel, tpu="v3", config=None) -> dict
#[pyfunction]
#[pyo3(signature = (source, kernel, tpu="v3", config=None))]
fn explain(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    kernel: &str,
    tpu: &str,
    config: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyObject> {
    let src = Source::extract(source)?;
    let cfg = self::config(py, config)?;
    let text = py
        .allow_threads(|| {
            let t = target(tpu, false)?;
            let c = compiled(&src, &cfg)?;
            let tile = tpusim::kernels::tile_overrides(&c.kernels).remove(kernel);
            let x = tpusim::kernels::explain_kernel(&c.module, &t, kernel, tile.as_ref())
                .map_err(|e| format!("{}: error: {e}", src.label()))?;
            serde_json::to_string_pretty(&x).map_err(|e| e.to_string())
        })
        .map_err(err)?;
    from_json(py, &text)
}

/// Progress for Python: counters, and a callback `progress(done, total)` called at most
/// every 0.2 s from whichever worker thread passes that mark (under the GIL), and once
/// at the end. The first exception it raises is kept and raised when the run ends.
struct PyProgress {
    callback: Option<Py<PyAny>>,
    done: AtomicU64,
    total: AtomicU64,
    last: Mutex<Instant>,
    error: Mutex<Option<PyErr>>,
}

impl PyProgress {
    fn new(callback: Option<Py<PyAny>>) -> Self {
        PyProgress {
            callback,
            done: AtomicU64::new(0),
            total: AtomicU64::new(0),
            last: Mutex::new(Instant::now()),
            error: Mutex::new(None),
        }
    }

    fn call(&self) {
        let Some(cb) = &self.callback else {
            return;
        };
        let (d, t) = (
            self.done.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        );
        Python::with_gil(|py| {
            if let Err(e) = cb.call1(py, (d, t.max(d))) {
                let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert(e);
            }
        });
    }

    fn maybe_call(&self) {
        if self.callback.is_none() {
            return;
        }
        let Ok(mut last) = self.last.try_lock() else {
            return;
        };
        if last.elapsed() < Duration::from_millis(200) {
            return;
        }
        *last = Instant::now();
        drop(last);
        self.call();
    }

    /// The last call, and the callback's error if it raised one.
    fn finish(&self) -> PyResult<()> {
        self.call();
        match self.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl GenProgress for PyProgress {
    fn grow(&self, n: u64) {
        self.total.fetch_add(n, Ordering::Relaxed);
    }
    fn shrink(&self, n: u64) {
        let _ = self
            .total
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_sub(n))
            });
    }
    fn advance(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
        self.maybe_call();
    }
}

/// Run `f` on a pool of `threads` workers (default: rayon's global pool, all cores).
fn on_pool<R: Send>(threads: Option<usize>, f: impl FnOnce() -> R + Send) -> Result<R, String> {
    match threads {
        None => Ok(f()),
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build()
            .map(|p| p.install(f))
            .map_err(|e| e.to_string()),
    }
}

fn sample_options(
    configs: usize,
    seed: u64,
    tpu: &str,
    noise: f64,
    pad_minus_one: bool,
    search: &str,
) -> PyResult<SampleOptions> {
    let o = SampleOptions {
        configs,
        seed,
        target: target(tpu, false).map_err(err)?,
        noise,
        pad_minus_one,
        search: search.parse::<Search>().map_err(err)?,
    };
    o.check().map_err(err)?;
    Ok(o)
}

/// A member's values, owned (made without the GIL).
enum Owned {
    F32(Vec<f32>),
    U8(Vec<u8>),
    I64(Vec<i64>),
}

type OwnedSample = Vec<(&'static str, Vec<usize>, Owned)>;

fn own(members: Vec<Member<'_>>) -> OwnedSample {
    members
        .into_iter()
        .map(|m| {
            let v = match m.values {
                Values::F32(v) => Owned::F32(v.to_vec()),
                Values::U8(v) => Owned::U8(v.to_vec()),
                Values::I64(v) => Owned::I64(v.to_vec()),
                Values::F32Rows(mut rows) => {
                    let count = m.shape.first().copied().unwrap_or(0);
                    let per: usize = m.shape.iter().skip(1).product();
                    let mut all = Vec::with_capacity(count * per);
                    let mut row = Vec::with_capacity(per);
                    for j in 0..count {
                        row.clear();
                        rows(j, &mut row);
                        all.extend_from_slice(&row);
                    }
                    Owned::F32(all)
                }
            };
            (m.name, m.shape, v)
        })
        .collect()
}

fn to_dict<'py>(py: Python<'py>, s: OwnedSample) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, shape, v) in s {
        let a = match v {
            Owned::F32(v) => PyArray1::from_vec(py, v).reshape(shape)?.into_any(),
            Owned::U8(v) => PyArray1::from_vec(py, v).reshape(shape)?.into_any(),
            Owned::I64(v) => PyArray1::from_vec(py, v).reshape(shape)?.into_any(),
        };
        d.set_item(name, a)?;
    }
    Ok(d)
}

/// tile_samples(source, *, name=None, configs=100, seed=0, tpu="v3", noise=0.0,
/// pad_minus_one=False, threads=None, progress=None) -> dict[str, dict[str, ndarray]]
#[pyfunction]
#[pyo3(signature = (source, *, name=None, configs=100, seed=0, tpu="v3", noise=0.0,
    pad_minus_one=false, threads=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn tile_samples<'py>(
    py: Python<'py>,
    source: &Bound<'py, PyAny>,
    name: Option<&str>,
    configs: usize,
    seed: u64,
    tpu: &str,
    noise: f64,
    pad_minus_one: bool,
    threads: Option<usize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let src = Source::extract(source)?;
    let o = sample_options(configs, seed, tpu, noise, pad_minus_one, "random")?;
    let pr = PyProgress::new(progress);
    let samples = py
        .allow_threads(|| {
            on_pool(threads, || {
                let mut out = Vec::new();
                for input in src.inputs(name)? {
                    for s in gen::tile_samples(&input, &o, &pr).map_err(|e| e.to_string())? {
                        out.push((s.stem.clone(), own(s.members())));
                    }
                }
                Ok::<_, String>(out)
            })?
        })
        .map_err(err)?;
    pr.finish()?;
    samples_dict(py, samples)
}

/// `{name: {array name: ndarray}}` of samples made in memory.
fn samples_dict<'py>(
    py: Python<'py>,
    samples: Vec<(String, OwnedSample)>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (stem, s) in samples {
        d.set_item(stem, to_dict(py, s)?)?;
    }
    Ok(d)
}

/// layout_samples(source, *, name=None, configs=100, seed=0, tpu="v3", noise=0.0,
/// pad_minus_one=False, search="random", threads=None, progress=None)
/// -> dict[str, dict[str, ndarray]]
#[pyfunction]
#[pyo3(signature = (source, *, name=None, configs=100, seed=0, tpu="v3", noise=0.0,
    pad_minus_one=false, search="random", threads=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn layout_samples<'py>(
    py: Python<'py>,
    source: &Bound<'py, PyAny>,
    name: Option<&str>,
    configs: usize,
    seed: u64,
    tpu: &str,
    noise: f64,
    pad_minus_one: bool,
    search: &str,
    threads: Option<usize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let src = Source::extract(source)?;
    let o = sample_options(configs, seed, tpu, noise, pad_minus_one, search)?;
    let pr = PyProgress::new(progress);
    let samples = py
        .allow_threads(|| {
            on_pool(threads, || {
                let mut out = Vec::new();
                for input in src.inputs(name)? {
                    if let Some(s) =
                        gen::layout_sample(&input, &o, &pr).map_err(|e| e.to_string())?
                    {
                        out.push((s.name.clone(), own(s.members())));
                    }
                }
                Ok::<_, String>(out)
            })?
        })
        .map_err(err)?;
    pr.finish()?;
    samples_dict(py, samples)
}

/// generate(collection, inputs, out, ...) -> dict: `tpusim generate COLLECTION` (the
/// report its `--json` prints).
#[pyfunction]
#[pyo3(signature = (collection, inputs, out, *, configs=100, seed=0, tpu="v3",
    split="80/10/10", noise=0.0, shard="0/1", pad_minus_one=false, pb=false,
    search="random", source="xla", threads=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn generate(
    py: Python<'_>,
    collection: &str,
    inputs: Vec<PathBuf>,
    out: PathBuf,
    configs: usize,
    seed: u64,
    tpu: &str,
    split: &str,
    noise: f64,
    shard: &str,
    pad_minus_one: bool,
    pb: bool,
    search: &str,
    source: &str,
    threads: Option<usize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<PyObject> {
    let tile = match collection {
        "tile" => true,
        "layout" => false,
        _ => {
            return Err(err(format!(
                "collection must be 'tile' or 'layout', not '{collection}'"
            )))
        }
    };
    let o = GenOptions {
        out,
        sample: SampleOptions {
            configs,
            seed,
            target: target(tpu, false).map_err(err)?,
            noise,
            pad_minus_one,
            search: search.parse::<Search>().map_err(err)?,
        },
        split: split
            .parse::<SplitRatios>()
            .map_err(|e| err(format!("invalid split '{split}': {e}")))?,
        shard: shard
            .parse::<Shard>()
            .map_err(|e| err(format!("invalid shard '{shard}': {e}")))?,
        source: source.to_string(),
        write_pb: pb,
        compress: false,
    };
    o.check().map_err(err)?;
    let pr = PyProgress::new(progress);
    let text = py
        .allow_threads(|| {
            on_pool(threads, || {
                // No inputs: no modules (the command would take hlo_samples/); the run
                // still claims the tree and clears what dead runs left in it.
                let ins = if inputs.is_empty() {
                    Vec::new()
                } else {
                    tpusim::cli::generate_inputs(&inputs).map_err(|e| format!("{e:#}"))?
                };
                let r = if tile {
                    gen::generate_tile(&ins, &o, &pr)
                } else {
                    gen::generate_layout(&ins, &o, &pr)
                }
                .map_err(|e| e.to_string())?;
                serde_json::to_string_pretty(&r).map_err(|e| e.to_string())
            })?
        })
        .map_err(err)?;
    pr.finish()?;
    from_json(py, &text)
}

/// module_names(path, count) -> list[str]: the names `generate` gives the modules of a
/// file.
#[pyfunction(name = "module_names")]
fn py_module_names(py: Python<'_>, path: PathBuf, count: usize) -> PyResult<Bound<'_, PyList>> {
    PyList::new(py, module_names(&path, count))
}

#[pymodule]
fn _tpusim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TpusimError", m.py().get_type::<TpusimError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(parse, m)?)?;
    m.add_function(wrap_pyfunction!(print_module, m)?)?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(estimate, m)?)?;
    m.add_function(wrap_pyfunction!(explain, m)?)?;
    m.add_function(wrap_pyfunction!(tile_samples, m)?)?;
    m.add_function(wrap_pyfunction!(layout_samples, m)?)?;
    m.add_function(wrap_pyfunction!(generate, m)?)?;
    m.add_function(wrap_pyfunction!(py_module_names, m)?)?;
    Ok(())
}
