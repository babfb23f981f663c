//! The storage seam: every durability-relevant file-system call the store makes.
//!
//! Production uses [`RealStorage`]. Tests plug in their own [`Storage`] (see
//! `tests/support`) that fails or "freezes" durable state at the Nth sync, redb-style, to
//! exercise crash and recovery paths deterministically.
//!
//! Invariants:
//! - A record is acknowledged only after `sync_data` of the file that holds it returned Ok.
//! - Creating or renaming a directory entry is followed by `sync_dir` of its parent.
//! - On macOS, `File::sync_all`/`sync_data` issue `F_FULLFSYNC` (Rust's std does), so an
//!   acknowledged record survives power loss, not only a process crash.
//! - Everything the store creates is private to the user whatever the process umask:
//!   folders 0700, files 0600. Every creation goes through [`create_private_dir`],
//!   [`create_private_dir_all`] or [`create_private_file`]; existing files keep their mode.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// Mode of every folder the store creates (before the umask, which can only narrow it).
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// Mode of every file the store creates.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// Creates one folder, readable only by the user (0700).
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    DirBuilder::new().mode(PRIVATE_DIR_MODE).create(path)
}

/// Creates a folder and any missing parents, each new one 0700. Existing folders are left
/// as they are.
pub fn create_private_dir_all(path: &Path) -> io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(path)
}

/// Creates a new file exclusively (`create_new`, which also refuses a planted symlink),
/// readable and writable only by the user (0600), opened for reading and writing.
pub fn create_private_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(PRIVATE_FILE_MODE)
        .open(path)
}

/// File-system operations whose failure or reordering matters for durability.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Writes all of `buf` at the end of `file`.
    fn append(&self, file: &mut File, buf: &[u8]) -> io::Result<()> {
        file.write_all(buf)
    }
    /// Makes the file's data (and the size needed to read it) durable.
    fn sync_data(&self, file: &File) -> io::Result<()> {
        file.sync_data()
    }
    /// Makes a directory's entries durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        sync_dir(dir)
    }
    /// Truncates `file` to `len` bytes.
    fn set_len(&self, file: &File, len: u64) -> io::Result<()> {
        file.set_len(len)
    }
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealStorage;

impl Storage for RealStorage {}

/// Replaces the file `name` in `dir` with `bytes` as a whole: written to a private temporary
/// file beside it (a dot name with this process's id, never a session's name), fsynced,
/// renamed over `name`. A reader sees the old file or the new one, never part of one; the
/// temporary file is removed on failure. The folder is not fsynced (the caller decides).
pub fn replace_file(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let written = create_private_file(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, dir.join(name)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// fsyncs a directory so entries created or renamed in it survive a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    let d = OpenOptions::new().read(true).open(dir)?;
    d.sync_all()
}
