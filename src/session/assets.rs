//! Assets: files under a session's `assets/`, created exclusively and made durable before any
//! record references them; capture assets carry an OS lock for the capture's whole life.
//!
//! Invariants:
//! - An asset name matches the ID pattern (no separators, no dots first); the file is created
//!   with `create_new` (which also refuses a planted symlink) and never truncated or
//!   overwritten.
//! - [`AssetWriter::finish`] fsyncs the file and the `assets/` directory before it returns the
//!   [`AssetRef`] a record may then carry.
//! - A [`CaptureAsset`] holds an exclusive advisory lock on its file until dropped: a lock that
//!   is held means "live capture", which recovery and deletion must not touch. Code that needs
//!   both locks takes the asset lock first, then the session lock.
//! - Every path from the session folder to an asset is checked the same way
//!   ([`assets_dir_of`], [`open_existing_asset`]): `assets/` must be a real folder, never a
//!   symlink, and an existing asset must be a regular file that is still the file that was
//!   checked when it was opened. Writing, recovery and deletion all go through these.
//! - New asset files are 0600 and a new `assets/` is 0700 (`fsio::create_private_*`).
//! - A capture asks to be stopped through [`CaptureAsset::stop_requested`]; the capture loop
//!   polls it and ends the recording promptly, which is how deletion stops a local capture.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest, Sha256};

use super::ASSETS_DIR;
use super::format::{AssetRef, ByteRange};
use super::fsio::{Storage, create_private_dir, create_private_file};
use super::store::{SessionHandle, StoreError, lock};
use super::validate::is_id;

/// Outcome of probing an asset's capture lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssetLockState {
    /// Nobody holds the lock.
    Free,
    /// A capture (in this or another process) holds it.
    Held,
    /// No such file.
    Missing,
}

/// An asset being written.
#[derive(Debug)]
pub struct AssetWriter {
    file: File,
    dir: PathBuf,
    name: String,
    len: u64,
    hasher: Option<Sha256>,
    storage: Arc<dyn Storage>,
}

/// `<session_dir>/assets` if it is a real folder; `None` if it does not exist. A symlink (to
/// anywhere) or any other kind of file there, or in place of the session folder itself, is
/// `store.escapes-root`: nothing under it belongs to the session. A session folder that is
/// gone is `store.stale-handle`.
pub(crate) fn assets_dir_of(session_dir: &Path) -> Result<Option<PathBuf>, StoreError> {
    // The handle's folder path is canonical when opened; a symlink there now is a swap.
    match fs::symlink_metadata(session_dir) {
        Ok(m) if m.file_type().is_dir() => {}
        Ok(_) => return Err(StoreError::EscapesRoot),
        Err(_) => return Err(StoreError::StaleHandle),
    }
    let dir = session_dir.join(ASSETS_DIR);
    match fs::symlink_metadata(&dir) {
        Ok(m) if m.file_type().is_dir() => Ok(Some(dir)),
        Ok(_) => Err(StoreError::EscapesRoot),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("stat assets dir")(e)),
    }
}

/// Opens the existing asset `assets/<name>` of `session_dir` (read and write when `write`) if
/// `assets/` is a real folder and the asset a regular file. `Ok(None)`: no such file, or not
/// a regular file (nothing the store may touch). A symlinked `assets/`, or a folder or file
/// swapped while opening, is `store.escapes-root`.
pub(crate) fn open_existing_asset(
    session_dir: &Path,
    name: &str,
    write: bool,
) -> Result<Option<File>, StoreError> {
    if !is_id(name) {
        return Err(StoreError::InvalidName);
    }
    let Some(dir) = assets_dir_of(session_dir)? else {
        return Ok(None);
    };
    let dir_before = fs::symlink_metadata(&dir).map_err(StoreError::io("stat assets dir"))?;
    let path = dir.join(name);
    let meta = match fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("stat asset")(e)),
    };
    if !meta.file_type().is_file() {
        return Ok(None);
    }
    let f = match OpenOptions::new().read(true).write(write).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("open asset")(e)),
    };
    let opened = f.metadata().map_err(StoreError::io("stat asset"))?;
    let dir_after = fs::symlink_metadata(&dir).map_err(StoreError::io("stat assets dir"))?;
    let same = |a: &fs::Metadata, b: &fs::Metadata| a.dev() == b.dev() && a.ino() == b.ino();
    if !same(&opened, &meta) || !same(&dir_before, &dir_after) || !dir_after.is_dir() {
        return Err(StoreError::EscapesRoot);
    }
    Ok(Some(f))
}

impl SessionHandle {
    fn assets_dir(&self) -> Result<PathBuf, StoreError> {
        if let Some(dir) = assets_dir_of(self.dir())? {
            return Ok(dir);
        }
        let dir = self.dir().join(ASSETS_DIR);
        create_private_dir(&dir).map_err(StoreError::io("create assets dir"))?;
        self.storage()
            .sync_dir(self.dir())
            .map_err(StoreError::io("sync session dir"))?;
        Ok(dir)
    }

    fn create_asset_file(&self, name: &str) -> Result<(File, PathBuf), StoreError> {
        if self.is_revoked() {
            return Err(StoreError::StaleHandle);
        }
        if !is_id(name) {
            return Err(StoreError::InvalidName);
        }
        let dir = self.assets_dir()?;
        let file = create_private_file(&dir.join(name)).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => StoreError::AssetExists,
            _ => StoreError::io("create asset")(e),
        })?;
        // `assets/` may have been swapped for a symlink between the check and the creation.
        if assets_dir_of(self.dir())?.is_none() {
            return Err(StoreError::EscapesRoot);
        }
        Ok((file, dir))
    }

    /// Starts a new asset `name` (exclusive creation). `sha256` computes the digest as bytes
    /// are written.
    pub fn create_asset(&self, name: &str, sha256: bool) -> Result<AssetWriter, StoreError> {
        let (file, dir) = self.create_asset_file(name)?;
        Ok(AssetWriter {
            file,
            dir,
            name: name.to_owned(),
            len: 0,
            hasher: sha256.then(Sha256::new),
            storage: self.storage().clone(),
        })
    }

    /// Writes a whole asset and makes it durable; returns the reference to put in a record.
    pub fn write_asset(
        &self,
        name: &str,
        bytes: &[u8],
        mime_type: &str,
        encoding: Option<&str>,
    ) -> Result<AssetRef, StoreError> {
        let mut w = self.create_asset(name, true)?;
        w.write(bytes)?;
        w.finish(mime_type, encoding)
    }

    /// Creates a capture asset and takes its exclusive lock for the capture's life.
    ///
    /// Runs under the session's capture registry lock, so a deletion (which holds that lock
    /// while it checks the assets and stages the folder) sees either this capture's locked
    /// file or a revoked handle here, never a capture that slipped in between.
    pub fn start_capture(&self, name: &str) -> Result<CaptureAsset, StoreError> {
        let mut captures = lock(self.captures());
        let (file, dir) = self.create_asset_file(name)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Err(StoreError::CaptureLive),
            Err(fs::TryLockError::Error(e)) => return Err(StoreError::io("lock asset")(e)),
        }
        let stop = Arc::new(AtomicBool::new(false));
        captures.push((name.to_owned(), stop.clone()));
        drop(captures);
        Ok(CaptureAsset {
            file,
            path: dir.join(name),
            name: name.to_owned(),
            handle: self.clone(),
            stop,
        })
    }

    /// Probes whether a capture holds `assets/<name>`.
    pub fn asset_lock_state(&self, name: &str) -> Result<AssetLockState, StoreError> {
        let Some(f) = open_existing_asset(self.dir(), name, false)? else {
            return Ok(AssetLockState::Missing);
        };
        match try_lock_asset(f)? {
            Some(f) => {
                let _ = f.unlock();
                Ok(AssetLockState::Free)
            }
            None => Ok(AssetLockState::Held),
        }
    }
}

impl SessionHandle {
    /// Whether a capture of this session runs on this machine: one in this process, or a
    /// recording's asset whose lock another process holds.
    pub fn capture_live(&self) -> Result<bool, StoreError> {
        if !lock(self.captures()).is_empty() {
            return Ok(true);
        }
        let started = self.with_index(|i| {
            (0..i.len() as u32)
                .filter(|&p| i.entry(p).kind() == super::index::EntryKind::RecordingStarted)
                .collect::<Vec<u32>>()
        });
        for chunk in started.chunks(256) {
            for item in self.read_positions(chunk)? {
                let super::format::EntryBody::RecordingStarted(r) = item.entry.body else {
                    continue;
                };
                let name = r.asset.strip_prefix("assets/").unwrap_or(&r.asset);
                if self
                    .asset_lock_state(name)
                    .unwrap_or(AssetLockState::Missing)
                    == AssetLockState::Held
                {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

/// Takes the exclusive lock of an opened asset without waiting: `Some(file)` holding the lock
/// (released by `unlock` or when the file is closed), `None` when a capture holds it.
pub(crate) fn try_lock_asset(f: File) -> Result<Option<File>, StoreError> {
    match f.try_lock() {
        Ok(()) => Ok(Some(f)),
        Err(fs::TryLockError::WouldBlock) => Ok(None),
        Err(fs::TryLockError::Error(e)) => Err(StoreError::io("lock asset")(e)),
    }
}

impl AssetWriter {
    /// Appends bytes (not yet durable).
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        self.storage
            .append(&mut self.file, bytes)
            .map_err(StoreError::io("write asset"))?;
        if let Some(h) = &mut self.hasher {
            h.update(bytes);
        }
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Makes the asset durable (file and directory) and returns its reference.
    pub fn finish(self, mime_type: &str, encoding: Option<&str>) -> Result<AssetRef, StoreError> {
        self.storage
            .sync_data(&self.file)
            .map_err(StoreError::io("sync asset"))?;
        self.storage
            .sync_dir(&self.dir)
            .map_err(StoreError::io("sync assets dir"))?;
        Ok(AssetRef::Available {
            path: format!("{ASSETS_DIR}/{}", self.name),
            mime_type: mime_type.to_owned(),
            byte_range: (self.len > 0 && encoding.is_some()).then_some(ByteRange {
                start: 0,
                end: self.len,
            }),
            encoding: encoding.map(str::to_owned),
            sha256: self.hasher.map(|h| {
                h.finalize()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            }),
        })
    }
}

/// A capture's asset: the file plus its exclusive lock, held until drop.
#[derive(Debug)]
pub struct CaptureAsset {
    file: File,
    path: PathBuf,
    name: String,
    handle: SessionHandle,
    stop: Arc<AtomicBool>,
}

impl CaptureAsset {
    /// The asset's name under `assets/`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `assets/<name>`, as records reference it.
    pub fn asset_path(&self) -> String {
        format!("{ASSETS_DIR}/{}", self.name)
    }

    /// A second handle on the same open file (same lock), e.g. for a WAV encoder.
    pub fn try_clone_file(&self) -> Result<File, StoreError> {
        self.file.try_clone().map_err(StoreError::io("clone asset"))
    }

    /// Writes at the end of the file.
    pub fn append(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        self.file
            .seek(SeekFrom::End(0))
            .map_err(StoreError::io("seek asset"))?;
        self.handle
            .storage()
            .append(&mut self.file, bytes)
            .map_err(StoreError::io("write asset"))
    }

    /// Makes everything written so far durable.
    pub fn sync(&self) -> Result<(), StoreError> {
        self.handle
            .storage()
            .sync_data(&self.file)
            .map_err(StoreError::io("sync asset"))?;
        self.handle
            .storage()
            .sync_dir(self.path.parent().unwrap_or(&self.path))
            .map_err(StoreError::io("sync assets dir"))
    }

    /// Whether deletion asked this capture to stop.
    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Flushes and makes the file durable.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        self.file.flush().map_err(StoreError::io("flush asset"))?;
        self.sync()
    }
}

impl Drop for CaptureAsset {
    fn drop(&mut self) {
        let _ = self.file.unlock();
        lock(self.handle.captures()).retain(|(n, _)| n != &self.name);
    }
}
