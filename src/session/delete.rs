//! Whole-session deletion: the only way a session folder goes away.
//!
//! Order: ask local captures to stop (each capture loop polls
//! [`CaptureAsset::stop_requested`](super::assets::CaptureAsset::stop_requested) and ends its
//! recording) and wait, bounded; then take and *hold* the lock of every asset (a lock that is
//! held elsewhere is a live capture here or in another process: refuse); only then take the
//! session lock (asset locks before the session lock, as the contract orders it); under it,
//! with the capture registry locked so no capture can start, re-check the assets, rename the
//! folder into `<root>/.persyk-trash/` (outside discovery), revoke every handle and fsync;
//! then remove it. A crash after the rename leaves only staged data, which [`Store::new`]
//! removes on the next start. Other folders, and copies of the session elsewhere, are never
//! touched.

use std::collections::HashMap;
use std::fs::{self, File};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::assets::{assets_dir_of, open_existing_asset, try_lock_asset};
use super::fsio::create_private_dir;
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
        // 2. Own every asset: a lock held elsewhere is an external live capture. The locks
        //    are held until the folder is staged.
        let mut held: HashMap<String, File> = HashMap::new();
        lock_assets(handle, &mut held)?;
        // 3. Under the session lock: check again, stage, revoke, remove.
        handle.locked(|_, _, storage| {
            let captures = lock(handle.captures());
            if !captures.is_empty() {
                return Err(StoreError::CaptureLive);
            }
            // An asset created since step 2 (another process, or a capture that started and
            // ended meanwhile) is owned now too; `start_capture` cannot run until `captures`
            // is released, and then finds its handle revoked.
            lock_assets(handle, &mut held)?;
            let root = handle.root();
            let trash = root.join(TRASH_DIR);
            if !trash.exists() {
                create_private_dir(&trash).map_err(StoreError::io("create trash"))?;
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
            drop(captures);
            storage
                .sync_dir(root)
                .map_err(StoreError::io("sync root"))?;
            // The assets are staged with the folder; their locks can go.
            held.clear();
            // Cleanup is retryable and may race another process's start-up cleanup; staged
            // data left behind is removed by the next `Store::new`.
            remove_staged(&staged, &trash);
            Ok(())
        })
    }
}

/// Takes (and keeps in `held`) the lock of every regular file in the session's `assets/`
/// that is not held yet. `store.capture-live` if any is locked by someone else. A symlinked
/// `assets/` holds nothing of the session's: it is moved with the folder, its target is never
/// opened.
fn lock_assets(handle: &SessionHandle, held: &mut HashMap<String, File>) -> Result<(), StoreError> {
    let dir = match assets_dir_of(handle.dir()) {
        Ok(Some(dir)) => dir,
        Ok(None) | Err(StoreError::EscapesRoot) => return Ok(()),
        Err(e) => return Err(e),
    };
    let entries = fs::read_dir(&dir).map_err(StoreError::io("list assets"))?;
    for entry in entries {
        let entry = entry.map_err(StoreError::io("list assets"))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if held.contains_key(&name) || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        // Names outside the asset grammar are not assets (and never capture files).
        let file = match open_existing_asset(handle.dir(), &name, false) {
            Ok(Some(f)) => f,
            Ok(None) | Err(StoreError::InvalidName) => continue,
            Err(e) => return Err(e),
        };
        match try_lock_asset(file)? {
            Some(f) => {
                held.insert(name, f);
            }
            None => return Err(StoreError::CaptureLive),
        }
    }
    Ok(())
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
