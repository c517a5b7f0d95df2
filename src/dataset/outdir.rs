//! The output tree of `generate` (`--out DIR`): who may write into it, and what dead
//! runs left there.
//!
//! * **Lock.** A run holds `DIR/.tpusim-generate/<collection>.lock` (an advisory file
//!   lock, released by the kernel when the process ends, however it ends) for as long
//!   as it writes that collection. Runs with the same options (the shards of one job,
//!   `--shard i/n`) share it; a run whose options differ (another `--seed`,
//!   `--configs`, …) while one is writing is refused, naming the options that differ,
//!   so a tree is never a mix of two recipes. The options of the holders are in
//!   `<collection>.json` beside the lock.
//! * **Leftovers.** A run that finds itself alone in the collection removes the
//!   temporary files (`.NAME.PID.XXXXXX.tmp`, [`crate::atomic`]) that
//!   runs killed mid-file left in the collection's folders: no live writer owns them.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Why the output tree cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum OutDirError {
    #[error("{}: {op}: {err}", path.display())]
    Io {
        path: PathBuf,
        op: &'static str,
        err: std::io::Error,
    },
    #[error(
        "{}: another tpusim generate is writing collection '{collection}' of this tree \
         with other options ({differ}); wait for it to end, or give another --out",
        out.display()
    )]
    Busy {
        out: PathBuf,
        collection: String,
        differ: String,
    },
}

pub(crate) fn io<'a>(
    path: &'a Path,
    op: &'static str,
) -> impl FnOnce(std::io::Error) -> OutDirError + 'a {
    move |err| OutDirError::Io {
        path: path.to_path_buf(),
        op,
        err,
    }
}

/// `create_dir_all`, with the folder named in the error.
pub fn create_dir(dir: &Path) -> Result<(), OutDirError> {
    std::fs::create_dir_all(dir).map_err(io(dir, "create folder"))
}

/// A run's hold on one collection of an output tree; released when dropped (or when
/// the process ends).
#[derive(Debug)]
pub struct Claim {
    _lock: File,
    /// Temporary files of dead runs removed when the claim was taken.
    pub removed: Vec<PathBuf>,
}

/// Takes collection `collection` (`tile`, `layout/xla/random`) of the tree `out` for a
/// run with `options` (what decides the bytes it writes; runs with equal options may
/// share the tree). When no other run holds it, the temporary files of dead runs below
/// the folders `dirs` are removed first.
pub fn claim(
    out: &Path,
    collection: &str,
    options: &serde_json::Value,
    dirs: &[PathBuf],
) -> Result<Claim, OutDirError> {
    let meta = out.join(".tpusim-generate");
    create_dir(&meta)?;
    let stem = collection.replace('/', "-");
    let lock_path = meta.join(format!("{stem}.lock"));
    let opts_path = meta.join(format!("{stem}.json"));
    // Contenders take the mutex first, so that checking the holders' options and
    // joining them is one step.
    let mutex_path = meta.join(format!("{stem}.mutex"));
    let mutex = open_rw(&mutex_path)?;
    mutex.lock().map_err(io(&mutex_path, "lock"))?;
    let lock = open_rw(&lock_path)?;
    let mut removed = Vec::new();
    match lock.try_lock() {
        Ok(()) => {
            // Alone: record our options, clean up, then share the lock with equals.
            let mut text = serde_json::to_string_pretty(options).unwrap_or_default();
            text.push('\n');
            crate::atomic::write_atomic(&opts_path, text.as_bytes())
                .map_err(io(&opts_path, "write"))?;
            for d in dirs {
                remove_temporaries(d, &mut removed)?;
            }
            lock.unlock().map_err(io(&lock_path, "unlock"))?;
            lock.lock_shared().map_err(io(&lock_path, "lock"))?;
        }
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            File::open(&opts_path)
                .and_then(|mut f| f.read_to_string(&mut text))
                .map_err(io(&opts_path, "read"))?;
            let theirs: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            if &theirs != options {
                return Err(OutDirError::Busy {
                    out: out.to_path_buf(),
                    collection: collection.to_string(),
                    differ: differences(&theirs, options),
                });
            }
            lock.lock_shared().map_err(io(&lock_path, "lock"))?;
        }
        Err(TryLockError::Error(e)) => return Err(io(&lock_path, "lock")(e)),
    }
    drop(mutex);
    Ok(Claim {
        _lock: lock,
        removed,
    })
}

fn open_rw(path: &Path) -> Result<File, OutDirError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io(path, "open"))
}

/// `key: theirs → ours` for the top-level keys that differ.
fn differences(theirs: &serde_json::Value, ours: &serde_json::Value) -> String {
    let empty = serde_json::Map::new();
    let t = theirs.as_object().unwrap_or(&empty);
    let o = ours.as_object().unwrap_or(&empty);
    let mut keys: Vec<&String> = t.keys().chain(o.keys()).collect();
    keys.sort();
    keys.dedup();
    let show = |v: Option<&serde_json::Value>| match v {
        None => "(none)".to_string(),
        Some(serde_json::Value::Object(m)) => m
            .get("name")
            .map_or("(an object)".to_string(), |n| n.to_string()),
        Some(v) => v.to_string(),
    };
    let d: Vec<String> = keys
        .into_iter()
        .filter(|k| t.get(*k) != o.get(*k))
        .map(|k| format!("{k}: {} there, {} here", show(t.get(k)), show(o.get(k))))
        .collect();
    if d.is_empty() {
        "unreadable options".into()
    } else {
        d.join(", ")
    }
}

/// Removes every temporary file (see [`crate::atomic::is_temporary`]) below `dir` (absent: nothing).
fn remove_temporaries(dir: &Path, removed: &mut Vec<PathBuf>) -> Result<(), OutDirError> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(&d, "read folder")(e)),
        };
        for e in entries {
            let e = e.map_err(io(&d, "read folder"))?;
            let p = e.path();
            let ft = e.file_type().map_err(io(&p, "stat"))?;
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() && crate::atomic::is_temporary(&e.file_name().to_string_lossy())
            {
                std::fs::remove_file(&p).map_err(io(&p, "remove leftover temporary file"))?;
                removed.push(p);
            }
        }
    }
    removed.sort();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_options_share_other_options_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let a = serde_json::json!({"seed": 1, "configs": 10});
        let b = serde_json::json!({"seed": 2, "configs": 10});
        let leftover = d.path().join("npz/.x.npz.1.0.tmp");
        std::fs::create_dir_all(leftover.parent().unwrap()).unwrap();
        std::fs::write(&leftover, b"partial").unwrap();
        let first = claim(d.path(), "tile", &a, &[d.path().join("npz")]).unwrap();
        assert_eq!(first.removed, vec![leftover.clone()]);
        assert!(!leftover.exists());
        let shard = claim(d.path(), "tile", &a, &[]).unwrap();
        assert!(shard.removed.is_empty());
        let e = claim(d.path(), "tile", &b, &[]).unwrap_err().to_string();
        assert!(e.contains("seed: 1 there, 2 here"), "{e}");
        // Another collection is another lock.
        claim(d.path(), "layout/xla/random", &b, &[]).unwrap();
        drop((first, shard));
        claim(d.path(), "tile", &b, &[]).unwrap();
    }
}
