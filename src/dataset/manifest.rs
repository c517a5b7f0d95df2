//! What a generation run made of each module, so that a re-run knows whether a module's
//! files are complete *and current*.
//!
//! After all files of a module are in place, `generate` writes
//! `OUT/manifest/<collection>/<module>.json`: the module's [`Recipe`] (the module's
//! content digest and every option that changes the bytes written) and the files it
//! made, relative to `OUT`. A re-run skips a module only when its manifest holds the same
//! recipe and every listed file exists. Otherwise the files the old manifest lists are
//! removed (a changed `--split` moves a module to another folder) and the module is made
//! again, with a note that says what changed. A module whose files exist without a
//! manifest (an interrupted run, an older tpusim) is made again: files are byte-identical
//! for the same recipe, so an interrupted run resumes at module granularity.
//! Options that do not change the bytes (`--threads`, `--shard`, `--quiet`, `--json`)
//! are not part of the recipe.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

use super::generate::GenOptions;
use super::kernel_module::fnv1a;
use crate::hlo::print_module;
use crate::ir::Module;

/// Everything that decides the bytes of a module's files: the run's options and the
/// module. (Serialised flat: one JSON object with the keys of both.)
#[derive(Debug, Clone, Serialize)]
pub struct Recipe {
    #[serde(flatten)]
    pub run: RunRecipe,
    pub module: String,
    /// FNV-1a of the module's canonical text, in hex.
    pub module_digest: String,
}

/// The options of a run that decide the bytes it writes, whatever the module: runs with
/// equal ones may share an output tree ([`super::outdir::claim`]).
#[derive(Debug, Clone, Serialize)]
pub struct RunRecipe {
    /// The tpusim version that wrote them (the model may change between versions).
    pub tpusim: String,
    /// `tile`, or `layout/<source>/<search>`.
    pub collection: String,
    pub configs: usize,
    pub seed: u64,
    /// The whole TPU target, parameters included (a target file may change).
    pub tpu: crate::tpu::TpuTarget,
    pub noise: f64,
    pub split: String,
    pub pad_minus_one: bool,
    pub pb: bool,
    /// Deflated npz members (`--compress`); left out of the JSON when off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compress: bool,
}

impl RunRecipe {
    /// The run options of `collection` under `o`.
    pub fn new(collection: &str, o: &GenOptions) -> RunRecipe {
        let s = o.split;
        RunRecipe {
            tpusim: env!("CARGO_PKG_VERSION").to_string(),
            collection: collection.to_string(),
            configs: o.sample.configs,
            seed: o.sample.seed,
            tpu: o.sample.target.clone(),
            noise: o.sample.noise,
            split: format!("{}/{}/{}", s.train, s.valid, s.test),
            pad_minus_one: o.sample.pad_minus_one,
            pb: o.write_pb,
            compress: o.compress,
        }
    }

    /// As JSON (what [`super::outdir::claim`] compares).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

impl Recipe {
    /// The recipe of `module` (named `name`) in `collection` under the options `o`.
    pub fn new(collection: &str, name: &str, module: &Module, o: &GenOptions) -> Recipe {
        Recipe {
            run: RunRecipe::new(collection, o),
            module: name.to_string(),
            module_digest: format!("{:016x}", fnv1a(print_module(module).as_bytes())),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ManifestFile {
    recipe: Value,
    files: Vec<Made>,
}

/// One file a module's run made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Made {
    /// Path relative to `OUT`, `/`-separated.
    pub file: String,
    /// Tile collection: the kernel of the default compilation the file holds (the file
    /// itself is named by the kernel's fingerprint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
}

/// A module's state in an output tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Same recipe, every file present: nothing to do. The number of npz files.
    Complete(usize),
    /// No manifest: never made, or interrupted.
    New,
    /// Made before, but not like this: what differs (`configs: 100 → 200`, `file … is
    /// missing`, …).
    Changed(Vec<String>),
}

/// The manifest of one module of one collection in `out`.
pub struct ModuleManifest {
    out: PathBuf,
    path: PathBuf,
    recipe: Recipe,
    old_files: Vec<Made>,
}

fn rel(out: &Path, p: &Path) -> String {
    let r = p.strip_prefix(out).unwrap_or(p);
    r.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// The differences between two recipes, key by key (`key: old → new`).
fn differences(old: &Value, new: &Value) -> Vec<String> {
    let (Value::Object(o), Value::Object(n)) = (old, new) else {
        return vec!["the manifest holds no recipe".into()];
    };
    let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
    keys.sort();
    keys.dedup();
    let show = |v: Option<&Value>| match v {
        None => "(none)".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(m)) => match m.get("name") {
            Some(Value::String(s)) => s.clone(),
            _ => "(an object)".to_string(),
        },
        Some(v) => v.to_string(),
    };
    keys.into_iter()
        .filter(|k| o.get(*k) != n.get(*k))
        .map(|k| match (o.get(k), n.get(k)) {
            (a, b) if show(a) == show(b) => format!("{k}: parameters of {} changed", show(a)),
            (a, b) => format!("{k}: {} → {}", show(a), show(b)),
        })
        .collect()
}

impl ModuleManifest {
    /// The manifest `OUT/manifest/<collection>/<module>.json` of `recipe`.
    pub fn new(out: &Path, recipe: Recipe) -> ModuleManifest {
        let path = out
            .join("manifest")
            .join(&recipe.run.collection)
            .join(format!("{}.json", recipe.module));
        ModuleManifest {
            out: out.to_path_buf(),
            path,
            recipe,
            old_files: Vec::new(),
        }
    }

    /// Whether the module's files in `out` are complete and current. Remembers the files
    /// an old manifest lists, for [`ModuleManifest::remove_old`].
    pub fn status(&mut self) -> Status {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return Status::New;
        };
        let Ok(old) = serde_json::from_str::<ManifestFile>(&text) else {
            return Status::Changed(vec![format!(
                "{} is not a manifest tpusim can read",
                self.path.display()
            )]);
        };
        self.old_files = old.files;
        let new = match serde_json::to_value(&self.recipe) {
            Ok(v) => v,
            Err(e) => return Status::Changed(vec![format!("recipe: {e}")]),
        };
        let mut diffs = differences(&old.recipe, &new);
        if diffs.is_empty() {
            diffs.extend(
                self.old_files
                    .iter()
                    .filter(|f| !self.out.join(&f.file).is_file())
                    .map(|f| format!("{} is missing", f.file)),
            );
        }
        if diffs.is_empty() {
            Status::Complete(
                self.old_files
                    .iter()
                    .filter(|f| f.file.ends_with(".npz"))
                    .count(),
            )
        } else {
            Status::Changed(diffs)
        }
    }

    /// Delete the files the old manifest lists, and the manifest itself, before the
    /// module is made again.
    pub fn remove_old(&self) -> Result<(), super::outdir::OutDirError> {
        let remove = |p: &Path| match std::fs::remove_file(p) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                Err(super::outdir::OutDirError::Io {
                    path: p.to_path_buf(),
                    op: "remove the file of an earlier run",
                    err,
                })
            }
            _ => Ok(()),
        };
        for f in &self.old_files {
            remove(&self.out.join(&f.file))?;
        }
        remove(&self.path)
    }

    /// Record the module as complete with `files` (paths absolute or relative to `OUT`,
    /// with the kernel each holds), written atomically once they are all in place.
    pub fn write(
        &self,
        files: &[(PathBuf, Option<String>)],
    ) -> Result<(), super::outdir::OutDirError> {
        let mut files: Vec<Made> = files
            .iter()
            .map(|(f, k)| Made {
                file: rel(&self.out, f),
                kernel: k.clone(),
            })
            .collect();
        files.sort_by(|a, b| a.file.cmp(&b.file));
        // Serialising plain data cannot fail; were it to, the write fails with it.
        let json =
            |e: serde_json::Error| super::outdir::io(&self.path, "write")(std::io::Error::other(e));
        let m = ManifestFile {
            recipe: serde_json::to_value(&self.recipe).map_err(json)?,
            files,
        };
        if let Some(dir) = self.path.parent() {
            super::outdir::create_dir(dir)?;
        }
        let mut text = serde_json::to_string_pretty(&m).map_err(json)?;
        text.push('\n');
        crate::atomic::write_atomic(&self.path, text.as_bytes())
            .map_err(super::outdir::io(&self.path, "write"))
    }
}

/// For a tile-collection file `OUT/npz/tile/xla/<split>/<module>_<fingerprint>.npz`
/// made by `generate`: the module and the kernel it holds, from the module's manifest
/// (`None` for files of other origins, e.g. the TpuGraphs release).
pub fn tile_file_kernel(npz: &Path) -> Option<TileOrigin> {
    // As given first (so the manifest path reads like the argument), then absolute.
    tile_origin(npz).or_else(|| tile_origin(&std::fs::canonicalize(npz).ok()?))
}

fn tile_origin(npz: &Path) -> Option<TileOrigin> {
    let stem = npz.file_stem()?.to_str()?;
    let (module, fp) = stem.rsplit_once('_')?;
    if fp.len() != 16 || !fp.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    // OUT/npz/tile/xla/<split>/file.npz
    let split_dir = npz.parent()?;
    let xla = split_dir.parent()?;
    let tile = xla.parent()?;
    let npz_dir = tile.parent()?;
    if tile.file_name()? != "tile" || npz_dir.file_name()? != "npz" {
        return None;
    }
    let out = npz_dir.parent()?;
    let manifest = out.join("manifest/tile").join(format!("{module}.json"));
    let m: ManifestFile = serde_json::from_str(&std::fs::read_to_string(&manifest).ok()?).ok()?;
    let want = rel(out, npz);
    let kernel = m.files.into_iter().find(|f| f.file == want)?.kernel?;
    Some(TileOrigin {
        module: module.to_string(),
        kernel,
        manifest,
    })
}

/// Where a tile file came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TileOrigin {
    pub module: String,
    pub kernel: String,
    pub manifest: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_name_each_changed_key() {
        let old =
            json!({"configs": 100, "seed": 0, "labels": "incremental", "tpu": {"name": "v3"}});
        let new = json!({"configs": 200, "seed": 0, "labels": "recompile", "tpu": {"name": "v5e"}});
        assert_eq!(
            differences(&old, &new),
            vec![
                "configs: 100 → 200",
                "labels: incremental → recompile",
                "tpu: v3 → v5e"
            ]
        );
        assert!(differences(&old, &old).is_empty());
        assert_eq!(
            differences(
                &json!({"tpu": {"name": "v3", "hbm": 1.0}}),
                &json!({"tpu": {"name": "v3", "hbm": 2.0}})
            ),
            vec!["tpu: parameters of v3 changed"]
        );
        assert_eq!(
            differences(&json!({"a": 1}), &json!({"a": 1, "pb": true})),
            vec!["pb: (none) → true"]
        );
    }
}
