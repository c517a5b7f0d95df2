//! Writing a file so that a reader finds the old file or the complete new one, never a
//! part of it: every output of tpusim (npz, `.pb`, CSV, JSON, SVG, HTML) is written
//! through [`AtomicFile`]. The bytes go to a temporary file in the destination folder,
//! named `.NAME.PID.XXXXXX.tmp` (the writer's process id, then random characters), which
//! is synced and renamed into place by [`AtomicFile::commit`] and deleted if the writer
//! is dropped first. A run killed before either leaves that file behind; the next
//! `generate` into the same tree removes it ([`crate::dataset::outdir`]).
//!
//! The temporary file is a [`tempfile::NamedTempFile`]; it is created with mode 0644
//! (not tempfile's 0600), so the files a run keeps are readable as others are.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A file being written; it appears at its path on [`AtomicFile::commit`].
#[derive(Debug)]
pub struct AtomicFile {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl AtomicFile {
    /// Starts writing what will become `path`. Fails if `path` has no file name or its
    /// folder cannot hold a new file.
    pub fn create(path: &Path) -> io::Result<AtomicFile> {
        let name = path.file_name().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "the path has no file name")
        })?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(name);
        prefix.push(format!(".{}.", std::process::id()));
        let mut b = tempfile::Builder::new();
        b.prefix(&prefix).suffix(".tmp").rand_bytes(6);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            b.permissions(std::fs::Permissions::from_mode(0o644));
        }
        Ok(AtomicFile {
            tmp: b.tempfile_in(dir)?,
            path: path.to_path_buf(),
        })
    }

    /// The open temporary file (read and write).
    pub fn file(&mut self) -> &mut File {
        self.tmp.as_file_mut()
    }

    /// A second handle on the temporary file, for a writer that owns its file.
    pub fn file_handle(&self) -> io::Result<File> {
        self.tmp.as_file().try_clone()
    }

    /// Where the bytes are until [`AtomicFile::commit`].
    pub fn temporary_path(&self) -> &Path {
        self.tmp.path()
    }

    /// The path the file will have.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Syncs the file and renames it to its path (replacing what was there), then syncs
    /// the folder (best effort) so that the rename survives a crash.
    pub fn commit(self) -> io::Result<()> {
        self.tmp.as_file().sync_all()?;
        self.tmp.persist(&self.path).map_err(|e| e.error)?;
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

/// Writes `bytes` to `path` through an [`AtomicFile`].
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.file().write_all(bytes)?;
    f.commit()
}

/// Whether `name` is one of the temporary files of [`AtomicFile`]
/// (`.NAME.PID.XXXXXX.tmp`).
pub fn is_temporary(name: &str) -> bool {
    let Some(stem) = name.strip_prefix('.').and_then(|r| r.strip_suffix(".tmp")) else {
        return false;
    };
    let mut parts = stem.rsplitn(3, '.');
    let (rand, pid, base) = (parts.next(), parts.next(), parts.next());
    matches!((rand, pid, base), (Some(r), Some(p), Some(b))
        if !r.is_empty() && r.bytes().all(|c| c.is_ascii_alphanumeric())
            && !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit())
            && !b.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_replaces_and_drop_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.csv");
        std::fs::write(&p, "old").unwrap();
        let mut f = AtomicFile::create(&p).unwrap();
        f.file().write_all(b"new").unwrap();
        let tmp = f.temporary_path().to_path_buf();
        let name = tmp.file_name().unwrap().to_string_lossy().into_owned();
        assert!(is_temporary(&name), "{name}");
        assert!(name.starts_with(&format!(".out.csv.{}.", std::process::id())));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
        f.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert!(!tmp.exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o644);
        }
        let mut g = AtomicFile::create(&p).unwrap();
        g.file().write_all(b"lost").unwrap();
        drop(g);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let e = write_atomic(&dir.path().join("no/such/dir/x"), b"x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn temporary_names() {
        assert!(is_temporary(".m_0123456789abcdef.npz.4242.a1B2c3.tmp"));
        assert!(is_temporary(".m.npz.4242.0.tmp"));
        assert!(!is_temporary("m.npz"));
        assert!(!is_temporary(".m.npz.tmp"));
        assert!(!is_temporary(".tmp42"));
        assert!(!is_temporary(".m.npz.x.0.tmp"));
        assert!(!is_temporary(".m.npz.42.a-b.tmp"));
    }
}
