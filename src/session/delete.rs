//! Whole-session deletion: the only way a session folder goes away.
//!
//! Order: ask local captures to stop (and wait, bounded); refuse if any recording is still
//! locked (a live capture here or in another process); take the session lock; revoke every
//! handle; rename the folder into `<root>/.persyk-trash/` (outside discovery) and fsync; then
//! remove it. A crash after the rename leaves only staged data, which [`Store::new`] removes
//! on the next start. Other folders, and copies of the session elsewhere, are never touched.

use std::fs;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::ASSETS_DIR;
use super::assets::{AssetLockState, probe_lock};
use super::store::{SessionHandle, Store, StoreError, TRASH_DIR, lock, new_id};

/// How long deletion waits for local captures to stop.
pub const CAPTURE_STOP_DEADLINE: Duration = Duration::from_secs(5);

impl Store {
    /// Deletes the session behind `handle` (the caller has the user's confirmation).
    pub fn delete(&self, handle: &SessionHandle) -> Result<(), StoreError> {
        if handle.is_revoked() {
            return Err(StoreError::StaleHandle);
        }
        // 1. Stop local captures.
        for (_, stop) in lock(handle.captures()).iter() {
            stop.store(true, Ordering::SeqCst);
        }
        let deadline = Instant::now() + CAPTURE_STOP_DEADLINE;
        while !lock(handle.captures()).is_empty() {
            if Instant::now() >= deadline {
                return Err(StoreError::CaptureLive);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // 2. Refuse external live captures.
        let assets = handle.dir().join(ASSETS_DIR);
        if let Ok(dir) = fs::read_dir(&assets) {
            for entry in dir.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_file())
                    && probe_lock(&entry.path())? == AssetLockState::Held
                {
                    return Err(StoreError::CaptureLive);
                }
            }
        }
        // 3. Under the session lock: stage, revoke, remove.
        handle.locked(|_, _, storage| {
            let root = handle.root();
            let trash = root.join(TRASH_DIR);
            if !trash.exists() {
                fs::create_dir(&trash).map_err(StoreError::io("create trash"))?;
                storage
                    .sync_dir(root)
                    .map_err(StoreError::io("sync root"))?;
            }
            let name = handle
                .dir()
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("session");
            let staged = trash.join(format!("{name}-{}", new_id()));
            fs::rename(handle.dir(), &staged).map_err(StoreError::io("stage session"))?;
            // From here on the session is gone from discovery: revoke every handle.
            self.revoke(handle.shared_file_id());
            storage
                .sync_dir(root)
                .map_err(StoreError::io("sync root"))?;
            // Cleanup is retryable and may race another process's start-up cleanup; staged
            // data left behind is removed by the next `Store::new`.
            remove_staged(&staged, &trash);
            Ok(())
        })
    }
}

fn remove_staged(staged: &Path, trash: &Path) {
    let _ = fs::remove_dir_all(staged);
    // The trash folder goes too once it is empty.
    if fs::remove_dir(trash).is_ok()
        && let Some(root) = trash.parent()
    {
        let _ = super::fsio::sync_dir(root);
    } else {
        let _ = super::fsio::sync_dir(trash);
    }
}
