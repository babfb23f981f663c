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

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

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

/// fsyncs a directory so entries created or renamed in it survive a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    let d = OpenOptions::new().read(true).open(dir)?;
    d.sync_all()
}
