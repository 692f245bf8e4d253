//! Output files written whole or not at all: each is written under a temporary name in its
//! directory (`.<name>.csdump-<pid>.tmp`) and renamed into place once complete. A temporary
//! file is removed when its writer is dropped without [`AtomicFile::commit`], and
//! [`remove_pending`] removes those still open, for a signal handler to call before csdump exits
//! on SIGTERM or SIGINT.

use std::fs;
use std::fs::File;
use std::io;
use std::io::BufWriter;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Mutex;

/// Temporary files being written, for [`remove_pending`].
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn pending() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes every temporary file still being written; returns how many it removed.
pub fn remove_pending() -> usize {
    let mut p = pending();
    let n = p.iter().filter(|t| fs::remove_file(t).is_ok()).count();
    p.clear();
    n
}

/// Removes every temporary file still being written and exits with `code`, holding the list
/// so that no file is committed (renamed into place) or started in between.
pub fn remove_pending_and_exit(code: i32) -> ! {
    let p = pending();
    for t in p.iter() {
        let _ = fs::remove_file(t);
    }
    std::process::exit(code)
}

/// An error on an output file: the file and the reason, once.
#[derive(Debug, thiserror::Error)]
#[error("{}: {err}", path.display())]
pub struct OutputError {
    /// The file or directory.
    pub path: PathBuf,
    /// What went wrong.
    pub err: io::Error,
}

impl From<OutputError> for io::Error {
    fn from(e: OutputError) -> Self {
        io::Error::new(e.err.kind(), e.to_string())
    }
}

fn err(path: &Path, err: io::Error) -> OutputError {
    OutputError {
        path: path.to_path_buf(),
        err,
    }
}

/// A file being written under a temporary name.
pub struct AtomicFile {
    dest: PathBuf,
    tmp: PathBuf,
    w: Option<BufWriter<File>>,
}

impl AtomicFile {
    /// Starts writing `dest`.
    pub fn create(dest: &Path) -> Result<Self, OutputError> {
        let name = dest
            .file_name()
            .ok_or_else(|| err(dest, io::Error::other("not a file name")))?;
        let tmp = dest.with_file_name(format!(
            ".{}.csdump-{}.tmp",
            name.to_string_lossy(),
            std::process::id()
        ));
        pending().push(tmp.clone());
        let f = match File::create(&tmp) {
            Ok(f) => f,
            Err(e) => {
                pending().retain(|t| *t != tmp);
                return Err(err(dest, e));
            }
        };
        Ok(Self {
            dest: dest.to_path_buf(),
            tmp,
            w: Some(BufWriter::with_capacity(1 << 20, f)),
        })
    }

    /// Finishes the file: flushes it and renames it into place.
    pub fn commit(mut self) -> Result<(), OutputError> {
        let Some(w) = self.w.take() else {
            return Ok(());
        };
        let f = w
            .into_inner()
            .map_err(|e| err(&self.dest, e.into_error()))?;
        drop(f);
        // Under the list's lock: a signal handler removing the temporary files waits for the
        // rename, or the rename for the process to exit.
        let mut p = pending();
        let r = fs::rename(&self.tmp, &self.dest);
        if r.is_err() {
            let _ = fs::remove_file(&self.tmp);
        }
        p.retain(|t| *t != self.tmp);
        r.map_err(|e| err(&self.dest, e))
    }

    /// The file's final path.
    pub fn path(&self) -> &Path {
        &self.dest
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.w {
            Some(w) => w.write(buf),
            None => Err(io::Error::other("file already committed")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.w {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.w.take().is_some() {
            let _ = fs::remove_file(&self.tmp);
            pending().retain(|t| *t != self.tmp);
        }
    }
}

/// Writes `bytes` to `dest`, whole or not at all.
pub fn write(dest: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let mut f = AtomicFile::create(dest)?;
    f.write_all(bytes).map_err(|e| err(dest, e))?;
    f.commit()
}

/// Creates `dir` and its parents.
pub fn create_dir(dir: &Path) -> Result<(), OutputError> {
    fs::create_dir_all(dir).map_err(|e| err(dir, e))
}

/// The file a single sink's trace is written to (by `perf` and `snapshot`).
pub const CSTRACE_FILE: &str = "cstrace.bin";

/// Returns the file name of sink `index` of `count`: `cstrace.bin`, or `cstrace-<i>-<name>.bin`
/// when there are several.
pub fn cstrace_name(index: usize, count: usize, name: &str) -> String {
    if count <= 1 {
        CSTRACE_FILE.into()
    } else {
        format!("cstrace-{index}-{}.bin", sanitize(name.as_bytes()))
    }
}

/// Makes a file-system safe name part.
pub fn sanitize(name: &[u8]) -> String {
    let s: String = String::from_utf8_lossy(name)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let s = s.trim_start_matches('.').to_string();
    if s.is_empty() {
        "unnamed".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_or_nothing() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.bin");
        write(&p, b"one").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"one");
        {
            let mut f = AtomicFile::create(&p).unwrap();
            f.write_all(b"two, unfinished").unwrap();
            // Dropped without commit: the old file stays, no temporary is left.
        }
        assert_eq!(fs::read(&p).unwrap(), b"one");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
        let mut f = AtomicFile::create(&d.path().join("b.bin")).unwrap();
        f.write_all(b"x").unwrap();
        assert_eq!(remove_pending(), 1);
        drop(f);
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
        let e = write(&d.path().join("no/such/dir/c.bin"), b"x").unwrap_err();
        assert!(e.to_string().contains("no/such/dir/c.bin: "), "{e}");
    }
}
