//! The session store: roots, opaque handles, locked durable appends, paged reads, continuations.
//!
//! Invariants:
//! - Writes go only through [`SessionHandle`]s, which only [`Store`] hands out, for direct
//!   children of a configured root whose `session.jsonl` is a regular file. No public API takes
//!   a raw path for a write.
//! - Before every write the handle re-checks the (device, inode) of the session directory and
//!   file it opened; a swapped, moved or deleted session makes the handle stale.
//! - An append holds the in-process writer mutex and the OS advisory lock on `session.jsonl`
//!   across catch-up → validate → write → fsync, and acknowledges nothing before the fsync.
//! - A failed write or fsync poisons the handle's writer: every later call fails with
//!   `store.previous-io`; a fresh open (after explicit recovery, if needed) is the way on.
//! - Open and read never repair or write anything.
//! - One lock order everywhere: capture asset locks → a session's writer mutex → its capture
//!   list → the store's handle registry. The registry is held for map operations only: no
//!   scan, no I/O and no other lock under it, so opening a session can never deadlock with
//!   a deletion revoking it.
//! - Only the default write root is created by [`Store::create_session`]; an explicit one
//!   ([`Roots::explicit`]) that is missing is `store.root-missing`. What the store creates is
//!   private (folders 0700, files 0600; see `fsio`).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use time::OffsetDateTime;

use super::diag::{Code, Diagnostic};
use super::format::{Entry, EntryBody, Header};
use super::fsio::{
    RealStorage, Storage, create_private_dir, create_private_dir_all, create_private_file,
};
use super::history::{self, HistoryItem};
use super::index::SessionIndex;
use super::project::LeafSelector;
use super::record;
use super::validate::{Scanner, feed_lines};
use super::{ASSETS_DIR, SESSION_FILE};

/// Most records one append batch may carry.
pub const MAX_BATCH_RECORDS: usize = 256;
/// Most bytes (records plus their newlines) one append batch may carry.
pub const MAX_BATCH_BYTES: usize = 4 << 20;
/// Most entries one paged read returns.
pub const MAX_PAGE: usize = 256;
/// Folder under each root where deleted sessions are staged before removal.
pub const TRASH_DIR: &str = ".persyk-trash";
/// Prefix of the temporary folder a new session is built in before it appears.
pub const NEW_PREFIX: &str = ".persyk-new-";

/// Why a store operation failed. Every variant has a stable [`StoreError::code`]; none carries
/// file content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("store.io: {op} failed: {source}")]
    Io {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(
        "store.previous-io: an earlier write or fsync on this handle failed; reopen the session"
    )]
    PreviousIo,
    #[error("store.stale-handle: the session was deleted, moved or replaced since it was opened")]
    StaleHandle,
    #[error("store.invalid-name: a session or asset name must be one plain path component")]
    InvalidName,
    #[error("store.root-not-absolute: configured roots must be absolute paths")]
    RootNotAbsolute,
    #[error("store.unknown-root: no configured root with that number")]
    UnknownRoot,
    #[error("store.escapes-root: the path leads outside its root")]
    EscapesRoot,
    #[error("store.not-a-session: no regular session.jsonl in that directory")]
    NotASession,
    #[error("store.not-authoritative: the session has contract violations; see `persyk check`")]
    NotAuthoritative { diagnostics: Vec<Diagnostic> },
    #[error("store.needs-recovery: the session ends in an incomplete record; run `persyk recover`")]
    NeedsRecovery,
    #[error("store.lock-timeout: another writer held the session lock too long")]
    LockTimeout,
    #[error("store.batch-too-large: at most 256 records and 4 MiB per append")]
    BatchTooLarge,
    #[error("store.conflicting-retry: the record reuses a committed id with different content")]
    ConflictingRetry { index: usize },
    #[error(
        "store.invalid-record: record {index} is invalid ({})",
        first_code(diagnostics)
    )]
    InvalidRecord {
        index: usize,
        diagnostics: Vec<Diagnostic>,
    },
    #[error("store.capture-live: a capture holds a recording of this session")]
    CaptureLive,
    #[error("store.asset-exists: an asset with that name already exists")]
    AssetExists,
    #[error("store.leaf-not-found: the selected leaf is not an entry of this session")]
    LeafNotFound,
    #[error(
        "store.root-missing: the configured sessions folder does not exist (an unmounted drive?); nothing was created"
    )]
    RootMissing,
    /// Another Mac is recording this session now (its marker is fresh: `session::presence`);
    /// nothing was written. `device_name` is that Mac's name, to say who.
    #[error("sync.recording-elsewhere: another Mac is recording this session; nothing was written")]
    RecordingElsewhere { device_name: String },
}

fn first_code(d: &[Diagnostic]) -> &'static str {
    d.first().map_or("unknown", |d| d.code.as_str())
}

impl StoreError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Io { .. } => "store.io",
            StoreError::PreviousIo => "store.previous-io",
            StoreError::StaleHandle => "store.stale-handle",
            StoreError::InvalidName => "store.invalid-name",
            StoreError::RootNotAbsolute => "store.root-not-absolute",
            StoreError::UnknownRoot => "store.unknown-root",
            StoreError::EscapesRoot => "store.escapes-root",
            StoreError::NotASession => "store.not-a-session",
            StoreError::NotAuthoritative { .. } => "store.not-authoritative",
            StoreError::NeedsRecovery => "store.needs-recovery",
            StoreError::LockTimeout => "store.lock-timeout",
            StoreError::BatchTooLarge => "store.batch-too-large",
            StoreError::ConflictingRetry { .. } => "store.conflicting-retry",
            StoreError::InvalidRecord { .. } => "store.invalid-record",
            StoreError::CaptureLive => "store.capture-live",
            StoreError::AssetExists => "store.asset-exists",
            StoreError::LeafNotFound => "store.leaf-not-found",
            StoreError::RootMissing => "store.root-missing",
            StoreError::RecordingElsewhere { .. } => "sync.recording-elsewhere",
        }
    }

    pub(crate) fn io(op: &'static str) -> impl FnOnce(io::Error) -> StoreError {
        move |source| StoreError::Io { op, source }
    }
}

/// Configured session roots: the write root first, then additional discovery roots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    roots: Vec<PathBuf>,
    /// Whether the first session may create a missing write root (the default root only).
    create_write_root: bool,
}

impl Roots {
    /// `write` is where new sessions go; `additional` are discovery-only roots. All must be
    /// absolute. Nothing is created or moved now; the first new session creates a missing
    /// write root, as the contract wants for the *default* root (use [`Roots::explicit`] for
    /// a root the user configured).
    pub fn new(write: PathBuf, additional: Vec<PathBuf>) -> Result<Roots, StoreError> {
        let mut roots = vec![write];
        for r in additional {
            if !roots.contains(&r) {
                roots.push(r);
            }
        }
        if roots.iter().any(|r| !r.is_absolute()) {
            return Err(StoreError::RootNotAbsolute);
        }
        Ok(Roots {
            roots,
            create_write_root: true,
        })
    }

    /// Like [`Roots::new`], but the write root is one the user named (`sessions.directory`,
    /// `--root`): if it is missing (an unmounted drive, a typo) creating a session fails with
    /// `store.root-missing` instead of re-creating the folder and its parents.
    pub fn explicit(write: PathBuf, additional: Vec<PathBuf>) -> Result<Roots, StoreError> {
        Ok(Roots {
            create_write_root: false,
            ..Roots::new(write, additional)?
        })
    }

    /// Whether a missing write root is created by the first new session (only the default).
    pub fn creates_write_root(&self) -> bool {
        self.create_write_root
    }

    /// The root new sessions are created in.
    pub fn write_root(&self) -> &Path {
        &self.roots[0]
    }

    /// Every root, write root first.
    pub fn all(&self) -> &[PathBuf] {
        &self.roots
    }
}

/// Whether `name` is a single, plain path component usable as a session folder name.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && !name.starts_with('.')
}

/// (device, inode) of a file-system object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    pub(crate) fn of(m: &fs::Metadata) -> FileId {
        FileId {
            dev: m.dev(),
            ino: m.ino(),
        }
    }
}

/// Handles sessions under configured roots.
#[derive(Debug)]
pub struct Store {
    roots: Roots,
    storage: Arc<dyn Storage>,
    lock_timeout: Duration,
    /// This Mac's device id, against which recording markers are read (`presence`).
    device: Option<Arc<str>>,
    registry: Mutex<HashMap<FileId, Weak<Shared>>>,
}

/// One open session, shared by its handles.
///
/// Lock order (never the reverse): capture asset locks → `writer` → `captures` →
/// `Store::registry`. `registry` is only ever held for map operations: no scan, no file I/O
/// and no other lock is taken under it, so it can sit at the end of every chain. Asset locks
/// are only ever *tried* (`try_lock`, never waited for), which is why `start_capture` may
/// lock its brand-new file while it holds `captures`.
#[derive(Debug)]
struct Shared {
    root: PathBuf,
    dir: PathBuf,
    dir_id: FileId,
    file_id: FileId,
    header_id: String,
    revoked: AtomicBool,
    /// A write or fsync failed (or a rescan after recovery did): the writer is unusable.
    /// An atomic rather than a `Writer` field so that `open_session` can see it without
    /// taking the writer lock.
    poisoned: AtomicBool,
    writer: Mutex<Writer>,
    /// Asset names with a live capture in this process.
    pub(crate) captures: Mutex<Vec<(String, Arc<AtomicBool>)>>,
    /// This process records the session and holds its marker (`presence`): its own writes
    /// need not read it.
    claimed: Arc<AtomicBool>,
}

#[derive(Debug)]
struct Writer {
    file: File,
    scanner: Scanner,
}

/// An opaque, revocable authorization to read and append one session.
#[derive(Debug, Clone)]
pub struct SessionHandle {
    shared: Arc<Shared>,
    storage: Arc<dyn Storage>,
    lock_timeout: Duration,
    device: Option<Arc<str>>,
}

/// Acknowledgement of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub id: String,
    pub status: AckStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckStatus {
    /// Written and fsynced by this call.
    Committed,
    /// An identical record with this id was already committed.
    AlreadyCommitted,
}

impl AckStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AckStatus::Committed => "committed",
            AckStatus::AlreadyCommitted => "already-committed",
        }
    }
}

/// The result of an append: the acknowledged prefix, and why it stopped short, if it did.
#[derive(Debug)]
pub struct AppendReport {
    /// One ack per record of the committed prefix, in order.
    pub acks: Vec<Ack>,
    pub error: Option<StoreError>,
}

impl AppendReport {
    fn failed(error: StoreError) -> AppendReport {
        AppendReport {
            acks: Vec::new(),
            error: Some(error),
        }
    }
    /// Ok with the acks when everything committed.
    pub fn into_result(self) -> Result<Vec<Ack>, StoreError> {
        match self.error {
            None => Ok(self.acks),
            Some(e) => Err(e),
        }
    }
}

/// The current UTC time as RFC 3339 with exactly three fractional digits
/// (`2026-01-01T00:00:00.000Z`).
pub fn now_iso() -> String {
    let t = OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

/// The UTC time a preserved fragment's file name carries (`20260101T000000.000Z`).
pub(crate) fn fragment_stamp() -> String {
    let now = OffsetDateTime::now_utc();
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}.{:03}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.millisecond()
    )
}

/// A new collision-resistant id (UUIDv7: time-ordered, 74 random bits).
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

impl Store {
    /// A store over `roots`, writing through the real file system. Finishes the cleanup of
    /// any deletion that a crash interrupted (staged folders under `.persyk-trash`).
    pub fn new(roots: Roots) -> Store {
        Store::with_storage(roots, Arc::new(RealStorage))
    }

    /// A store with a custom storage seam (tests).
    pub fn with_storage(roots: Roots, storage: Arc<dyn Storage>) -> Store {
        let store = Store {
            roots,
            storage,
            lock_timeout: Duration::from_secs(10),
            device: None,
            registry: Mutex::new(HashMap::new()),
        };
        for root in store.roots.all() {
            // Best effort: staged data is outside discovery either way.
            let _ = fs::remove_dir_all(root.join(TRASH_DIR));
            remove_abandoned_creations(root);
        }
        store
    }

    /// How long an append waits for another process's lock.
    pub fn set_lock_timeout(&mut self, timeout: Duration) {
        self.lock_timeout = timeout;
    }

    /// Names this Mac's device id: a write to a session that another device's fresh
    /// recording marker names is refused (`sync.recording-elsewhere`), this device's own
    /// markers never stop it. A store without one treats every fresh marker as another's.
    pub fn set_device(&mut self, id: &str) {
        self.device = Some(Arc::from(id));
    }

    /// The device id set with [`Store::set_device`].
    pub fn device(&self) -> Option<&str> {
        self.device.as_deref()
    }

    pub fn roots(&self) -> &Roots {
        &self.roots
    }

    /// Creates a new, empty session in the write root: its header is durable (file and
    /// directories fsynced) before this returns. A missing write root is created (0700) only
    /// when it is the default root; a missing explicit root is `store.root-missing`.
    pub fn create_session(&self) -> Result<SessionHandle, StoreError> {
        let root = self.roots.write_root();
        if !root.exists() {
            if !self.roots.creates_write_root() {
                return Err(StoreError::RootMissing);
            }
            create_private_dir_all(root).map_err(StoreError::io("create root"))?;
            if let Some(parent) = root.parent() {
                self.storage
                    .sync_dir(parent)
                    .map_err(StoreError::io("sync root parent"))?;
            }
        }
        let id = new_id();
        let staging = root.join(format!("{NEW_PREFIX}{id}"));
        create_private_dir(&staging).map_err(StoreError::io("create session dir"))?;
        create_private_dir(&staging.join(ASSETS_DIR))
            .map_err(StoreError::io("create assets dir"))?;
        let header = Header {
            id: id.clone(),
            timestamp: now_iso(),
        };
        let mut line = header.to_line();
        line.push('\n');
        let mut file = create_private_file(&staging.join(SESSION_FILE))
            .map_err(StoreError::io("create session file"))?;
        self.storage
            .append(&mut file, line.as_bytes())
            .map_err(StoreError::io("write header"))?;
        self.storage
            .sync_data(&file)
            .map_err(StoreError::io("sync header"))?;
        drop(file);
        self.storage
            .sync_dir(&staging.join(ASSETS_DIR))
            .map_err(StoreError::io("sync assets dir"))?;
        self.storage
            .sync_dir(&staging)
            .map_err(StoreError::io("sync session dir"))?;
        let final_dir = root.join(&id);
        fs::rename(&staging, &final_dir).map_err(StoreError::io("publish session dir"))?;
        self.storage
            .sync_dir(root)
            .map_err(StoreError::io("sync root"))?;
        self.open_session(0, &id)
    }

    /// Opens the session folder `name` directly under root number `root` (0 = write root).
    /// Refuses names with separators or dots, symlinks that leave the root, and anything but
    /// a regular `session.jsonl`. Scans the file; never writes or repairs.
    pub fn open_session(&self, root: usize, name: &str) -> Result<SessionHandle, StoreError> {
        let root_path = self.roots.all().get(root).ok_or(StoreError::UnknownRoot)?;
        if !is_plain_name(name) {
            return Err(StoreError::InvalidName);
        }
        let root_canon = root_path
            .canonicalize()
            .map_err(StoreError::io("resolve root"))?;
        let dir = root_canon.join(name);
        let dir_canon = dir.canonicalize().map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => StoreError::NotASession,
            _ => StoreError::Io {
                op: "resolve session dir",
                source: e,
            },
        })?;
        // A symlinked session folder may point at another session folder of the same root
        // (a direct, visible child), never outside it or into staging folders.
        let visible_child = dir_canon.parent() == Some(root_canon.as_path())
            && dir_canon
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_plain_name);
        if !visible_child {
            return Err(StoreError::EscapesRoot);
        }
        let dir_meta = fs::metadata(&dir_canon).map_err(StoreError::io("stat session dir"))?;
        if !dir_meta.is_dir() {
            return Err(StoreError::NotASession);
        }
        let file_path = dir_canon.join(SESSION_FILE);
        let file_meta = match fs::symlink_metadata(&file_path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(StoreError::NotASession),
            Err(e) => return Err(StoreError::io("stat session file")(e)),
        };
        if !file_meta.file_type().is_file() {
            // A symlinked session.jsonl could point anywhere: refuse it.
            return Err(StoreError::NotASession);
        }
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&file_path)
            .map_err(StoreError::io("open session file"))?;
        let opened = file
            .metadata()
            .map_err(StoreError::io("stat session file"))?;
        if FileId::of(&opened) != FileId::of(&file_meta) {
            return Err(StoreError::StaleHandle);
        }
        let file_id = FileId::of(&opened);

        // Reuse a live, healthy writer; a poisoned one is replaced by a fresh open. The
        // registry lock is held for the lookup only (see the lock order on `Shared`): no
        // writer lock and no scan under it.
        if let Some(shared) = self.live_shared(file_id) {
            return Ok(self.handle(shared));
        }
        let scanner = scan_file(&mut file)?;
        let header_id = scanner
            .index()
            .header()
            .map(|h| h.id.clone())
            .unwrap_or_default();
        let shared = Arc::new(Shared {
            root: root_canon,
            dir: dir_canon,
            dir_id: FileId::of(&dir_meta),
            file_id,
            header_id,
            revoked: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            writer: Mutex::new(Writer { file, scanner }),
            captures: Mutex::new(Vec::new()),
            claimed: Arc::new(AtomicBool::new(false)),
        });
        let mut registry = lock(&self.registry);
        // Another thread may have opened the same session while we scanned: share its
        // writer, so that one process has one writer per session.
        if let Some(existing) = registry.get(&file_id).and_then(Weak::upgrade)
            && is_healthy(&existing)
        {
            return Ok(self.handle(existing));
        }
        registry.retain(|_, w| w.strong_count() > 0);
        registry.insert(file_id, Arc::downgrade(&shared));
        drop(registry);
        Ok(self.handle(shared))
    }

    /// The registered, healthy (not revoked, not poisoned) session with `file_id`, if any.
    fn live_shared(&self, file_id: FileId) -> Option<Arc<Shared>> {
        lock(&self.registry)
            .get(&file_id)
            .and_then(Weak::upgrade)
            .filter(|s| is_healthy(s))
    }

    /// Opens the session at `path` if it is a direct child of one of the configured roots.
    pub fn open_path(&self, path: &Path) -> Result<SessionHandle, StoreError> {
        let path = if path.file_name().and_then(|n| n.to_str()) == Some(SESSION_FILE) {
            path.parent().unwrap_or(path)
        } else {
            path
        };
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or(StoreError::InvalidName)?;
        let parent = path.parent().ok_or(StoreError::InvalidName)?;
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        let parent_canon = parent
            .canonicalize()
            .map_err(StoreError::io("resolve session parent"))?;
        for (i, root) in self.roots.all().iter().enumerate() {
            if root.canonicalize().ok().as_deref() == Some(parent_canon.as_path()) {
                return self.open_session(i, name);
            }
        }
        Err(StoreError::EscapesRoot)
    }

    fn handle(&self, shared: Arc<Shared>) -> SessionHandle {
        SessionHandle {
            shared,
            storage: self.storage.clone(),
            lock_timeout: self.lock_timeout,
            device: self.device.clone(),
        }
    }

    /// Revokes every live handle to the session (used by deletion). Takes only the registry
    /// lock, last in the lock order, so callers may hold a session's writer lock.
    pub(crate) fn revoke(&self, file_id: FileId) {
        let shared = lock(&self.registry).get(&file_id).and_then(Weak::upgrade);
        if let Some(shared) = shared {
            shared.revoked.store(true, Ordering::SeqCst);
        }
    }
}

fn is_healthy(shared: &Shared) -> bool {
    !shared.revoked.load(Ordering::SeqCst) && !shared.poisoned.load(Ordering::SeqCst)
}

/// Removes `.persyk-new-*` folders a crash left behind during `create_session`. Only folders
/// untouched for an hour go: a creation in progress in another process takes milliseconds.
fn remove_abandoned_creations(root: &Path) {
    let Ok(dir) = fs::read_dir(root) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(3600));
        if name.to_string_lossy().starts_with(NEW_PREFIX) && stale {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; the writer's own `poisoned`
    // flag is what guards durability, so recovering the guard is safe.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn scan_file(file: &mut File) -> Result<Scanner, StoreError> {
    file.seek(SeekFrom::Start(0))
        .map_err(StoreError::io("seek"))?;
    let mut scanner = Scanner::new();
    let tail = feed_lines(&mut scanner, file).map_err(StoreError::io("read session file"))?;
    if tail > 0 {
        scanner.push_tail(tail);
    }
    Ok(scanner)
}

impl SessionHandle {
    /// The header id.
    pub fn session_id(&self) -> &str {
        &self.shared.header_id
    }

    /// The session directory (for display; writes go through the handle).
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The root the session lives in.
    pub fn root(&self) -> &Path {
        &self.shared.root
    }

    /// Whether the session was deleted or otherwise revoked.
    pub fn is_revoked(&self) -> bool {
        self.shared.revoked.load(Ordering::SeqCst)
    }

    /// Runs `f` over the committed index as this handle last saw it.
    pub fn with_index<T>(&self, f: impl FnOnce(&SessionIndex) -> T) -> T {
        let w = lock(&self.shared.writer);
        f(w.scanner.index())
    }

    /// A copy of the committed state this handle knows, after catching up with other
    /// writers: to validate records against it without appending them (the merge).
    pub(crate) fn scanner_snapshot(&self) -> Result<Scanner, StoreError> {
        let mut w = lock(&self.shared.writer);
        self.check_live()?;
        catch_up(&mut w)?;
        w.scanner.try_clone().ok_or(StoreError::PreviousIo)
    }

    /// Re-reads anything other writers appended since the last look.
    pub fn refresh(&self) -> Result<(), StoreError> {
        let mut w = lock(&self.shared.writer);
        self.check_live()?;
        catch_up(&mut w).map(|_| ())
    }

    /// Refuses a write while another device's fresh recording marker is beside the file
    /// (`presence`); this process's own recording skips the read.
    fn check_presence(&self) -> Result<(), StoreError> {
        if self.shared.claimed.load(Ordering::SeqCst) {
            return Ok(());
        }
        match super::presence::recording_elsewhere(
            &self.shared.dir,
            self.device.as_deref(),
            OffsetDateTime::now_utc(),
        ) {
            Some(device_name) => Err(StoreError::RecordingElsewhere { device_name }),
            None => Ok(()),
        }
    }

    /// The name of another device recording this session now, if one is (its fresh marker;
    /// `presence`).
    pub fn recording_elsewhere(&self) -> Option<String> {
        self.check_presence().err().and_then(|e| match e {
            StoreError::RecordingElsewhere { device_name } => Some(device_name),
            _ => None,
        })
    }

    /// Marks this session as recorded by this device (`device_id`, `device_name`) until the
    /// returned claim is dropped: a marker beside the file, renewed every
    /// [`super::presence::HEARTBEAT`], that keeps other Macs from writing to it. Refused
    /// while another device's marker is fresh.
    pub fn claim_recording(
        &self,
        device_id: &str,
        device_name: &str,
    ) -> Result<super::presence::RecordingClaim, StoreError> {
        self.claim_recording_every(device_id, device_name, super::presence::HEARTBEAT)
    }

    /// [`SessionHandle::claim_recording`] with another heartbeat interval (tests).
    pub fn claim_recording_every(
        &self,
        device_id: &str,
        device_name: &str,
        interval: Duration,
    ) -> Result<super::presence::RecordingClaim, StoreError> {
        self.check_live()?;
        if let Some(device_name) = super::presence::recording_elsewhere(
            &self.shared.dir,
            Some(device_id),
            OffsetDateTime::now_utc(),
        ) {
            return Err(StoreError::RecordingElsewhere { device_name });
        }
        super::presence::RecordingClaim::start(
            self.shared.dir.clone(),
            device_id,
            device_name,
            &self.shared.header_id,
            self.shared.claimed.clone(),
            interval,
        )
        .map_err(StoreError::io("write the recording marker"))
    }

    fn check_live(&self) -> Result<(), StoreError> {
        if self.shared.revoked.load(Ordering::SeqCst) {
            return Err(StoreError::StaleHandle);
        }
        if self.shared.poisoned.load(Ordering::SeqCst) {
            return Err(StoreError::PreviousIo);
        }
        Ok(())
    }

    /// Re-checks that the directory and file at the session's path are the ones opened.
    fn revalidate(&self, w: &Writer) -> Result<(), StoreError> {
        let stale = |_| StoreError::StaleHandle;
        let dir = fs::metadata(&self.shared.dir).map_err(stale)?;
        let file = fs::symlink_metadata(self.shared.dir.join(SESSION_FILE)).map_err(stale)?;
        let open = w.file.metadata().map_err(stale)?;
        if FileId::of(&dir) != self.shared.dir_id
            || FileId::of(&file) != self.shared.file_id
            || FileId::of(&open) != self.shared.file_id
            || open.nlink() == 0
        {
            return Err(StoreError::StaleHandle);
        }
        Ok(())
    }

    fn lock_file(&self, file: &File) -> Result<(), StoreError> {
        let deadline = Instant::now() + self.lock_timeout;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(()),
                Err(fs::TryLockError::WouldBlock) => {
                    if Instant::now() >= deadline {
                        return Err(StoreError::LockTimeout);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(fs::TryLockError::Error(e)) => return Err(StoreError::io("lock")(e)),
            }
        }
    }

    /// Appends raw JSONL records (one JSON object per string, no "\n"). Validates each
    /// against the committed file, preserves its `parentId`, writes the new ones in one write
    /// and acknowledges them after one fsync. A record that reuses a committed id with
    /// identical content is acknowledged as already committed; with different content it
    /// stops the batch. The report carries the acknowledged prefix.
    pub fn append(&self, records: &[String]) -> AppendReport {
        if records.len() > MAX_BATCH_RECORDS
            || records.iter().map(|r| r.len() + 1).sum::<usize>() > MAX_BATCH_BYTES
        {
            return AppendReport::failed(StoreError::BatchTooLarge);
        }
        let mut w = lock(&self.shared.writer);
        if let Err(e) = self.check_live().and_then(|()| self.revalidate(&w)) {
            return AppendReport::failed(e);
        }
        if let Err(e) = self.lock_file(&w.file) {
            return AppendReport::failed(e);
        }
        // The session may have been deleted or replaced while we waited for the lock, and
        // another Mac may be recording it.
        if let Err(e) = self
            .check_live()
            .and_then(|()| self.revalidate(&w))
            .and_then(|()| self.check_presence())
        {
            let _ = w.file.unlock();
            return AppendReport::failed(e);
        }
        let report = self.append_locked(&mut w, records);
        let _ = w.file.unlock();
        report
    }

    fn append_locked(&self, w: &mut Writer, records: &[String]) -> AppendReport {
        if let Err(e) = catch_up(w) {
            return AppendReport::failed(e);
        }
        let index = w.scanner.index();
        if !index.is_authoritative() {
            return AppendReport::failed(StoreError::NotAuthoritative {
                diagnostics: index.diagnostics().to_vec(),
            });
        }
        let mut acks = Vec::with_capacity(records.len());
        let mut new_acks = Vec::new();
        let mut buffer: Vec<u8> = Vec::new();
        let mut batch_lines: HashMap<String, &str> = HashMap::new();
        let mut error = None;
        for (i, rec) in records.iter().enumerate() {
            let bytes = rec.as_bytes();
            if memchr::memchr(b'\n', bytes).is_some() {
                error = Some(StoreError::InvalidRecord {
                    index: i,
                    diagnostics: vec![Diagnostic::new(0, Code::RecordSyntax)],
                });
                break;
            }
            let analysis = w.scanner.analyze_line(bytes);
            if analysis
                .diagnostics
                .iter()
                .any(|d| d.code == Code::EntryDuplicateId)
                && let Some(id) = analysis.entry_id()
            {
                let committed = match batch_lines.get(id) {
                    Some(line) => Ok(line.as_bytes().to_vec()),
                    None => read_committed(&w.file, w.scanner.index(), id),
                };
                match committed {
                    Ok(line) if same_json(&line, bytes) => {
                        acks.push(Ack {
                            id: id.to_owned(),
                            status: AckStatus::AlreadyCommitted,
                        });
                        continue;
                    }
                    Ok(_) => error = Some(StoreError::ConflictingRetry { index: i }),
                    Err(e) => error = Some(e),
                }
                break;
            }
            if !analysis.is_valid() {
                error = Some(StoreError::InvalidRecord {
                    index: i,
                    diagnostics: analysis.diagnostics,
                });
                break;
            }
            let id = analysis.entry_id().unwrap_or_default().to_owned();
            w.scanner.apply(analysis, bytes.len());
            buffer.extend_from_slice(bytes);
            buffer.push(b'\n');
            batch_lines.insert(id.clone(), rec);
            new_acks.push(acks.len());
            acks.push(Ack {
                id,
                status: AckStatus::Committed,
            });
        }
        if !buffer.is_empty() {
            let written = self
                .storage
                .append(&mut w.file, &buffer)
                .map_err(StoreError::io("append"))
                .and_then(|()| {
                    self.storage
                        .sync_data(&w.file)
                        .map_err(StoreError::io("fsync"))
                });
            if let Err(e) = written {
                self.shared.poisoned.store(true, Ordering::SeqCst);
                // Nothing of this batch's new records is acknowledged.
                let first_new = new_acks.first().copied().unwrap_or(acks.len());
                acks.truncate(first_new);
                return AppendReport {
                    acks,
                    error: Some(e),
                };
            }
        }
        AppendReport { acks, error }
    }

    /// Appends typed entries (see [`SessionHandle::append`]).
    pub fn append_entries(&self, entries: &[Entry]) -> AppendReport {
        let lines: Vec<String> = entries.iter().map(Entry::to_line).collect();
        self.append(&lines)
    }

    /// Reads up to `limit` (≤ [`MAX_PAGE`]) committed entries starting at index position
    /// `start`, in file order.
    pub fn read_page(&self, start: usize, limit: usize) -> Result<Vec<HistoryItem>, StoreError> {
        let w = lock(&self.shared.writer);
        if self.shared.revoked.load(Ordering::SeqCst) {
            return Err(StoreError::StaleHandle);
        }
        let index = w.scanner.index();
        let end = index.len().min(start.saturating_add(limit.min(MAX_PAGE)));
        let positions: Vec<u32> = (start.min(end)..end).map(|p| p as u32).collect();
        let mut file = &w.file;
        history::read_entries(&mut file, index, &positions).map_err(|e| match e {
            history::HistoryError::Io(e) => StoreError::io("read entries")(e),
            _ => StoreError::StaleHandle,
        })
    }

    /// Reads the committed entries at index `positions`.
    pub fn read_positions(&self, positions: &[u32]) -> Result<Vec<HistoryItem>, StoreError> {
        let w = lock(&self.shared.writer);
        if self.shared.revoked.load(Ordering::SeqCst) {
            return Err(StoreError::StaleHandle);
        }
        let index = w.scanner.index();
        if positions.iter().any(|&p| p as usize >= index.len()) {
            return Err(StoreError::LeafNotFound);
        }
        let mut file = &w.file;
        history::read_entries(&mut file, index, positions).map_err(|e| match e {
            history::HistoryError::Io(e) => StoreError::io("read entries")(e),
            _ => StoreError::StaleHandle,
        })
    }

    /// Runs `f` with the writer mutex and the session's OS lock held, over a fresh scan of the
    /// file as it is now; rescans afterwards. For explicit recovery only.
    pub(crate) fn locked<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&mut File, &mut Scanner, &dyn Storage) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut guard = lock(&self.shared.writer);
        self.check_live()?;
        self.revalidate(&guard)?;
        self.lock_file(&guard.file)?;
        if let Err(e) = self
            .check_live()
            .and_then(|()| self.revalidate(&guard))
            .and_then(|()| self.check_presence())
        {
            let _ = guard.file.unlock();
            return Err(e.into());
        }
        let w = &mut *guard;
        let result = match scan_file(&mut w.file) {
            Ok(scanner) => {
                w.scanner = scanner;
                f(&mut w.file, &mut w.scanner, self.storage.as_ref())
            }
            Err(e) => Err(e.into()),
        };
        match scan_file(&mut w.file) {
            Ok(scanner) => w.scanner = scanner,
            Err(_) => self.shared.poisoned.store(true, Ordering::SeqCst),
        }
        let _ = w.file.unlock();
        result
    }

    /// A continuation at `leaf` (resolved against the committed index).
    pub fn continuation(&self, leaf: &LeafSelector) -> Result<Continuation, StoreError> {
        let leaf = match leaf {
            LeafSelector::Null => None,
            LeafSelector::Default => {
                self.with_index(|i| i.len().checked_sub(1).map(|p| i.id(p as u32).into_owned()))
            }
            LeafSelector::Id(id) => {
                if self.with_index(|i| i.position(id).is_none()) {
                    return Err(StoreError::LeafNotFound);
                }
                Some(id.clone())
            }
        };
        Ok(Continuation {
            handle: self.clone(),
            leaf,
            claim: None,
        })
    }

    pub(crate) fn shared_file_id(&self) -> FileId {
        self.shared.file_id
    }

    pub(crate) fn captures(&self) -> &Mutex<Vec<(String, Arc<AtomicBool>)>> {
        &self.shared.captures
    }

    pub(crate) fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }
}

/// Reads anything appended since the scanner's committed length.
fn catch_up(w: &mut Writer) -> Result<(), StoreError> {
    let committed = w.scanner.index().committed_len();
    let len = w
        .file
        .metadata()
        .map_err(StoreError::io("stat session file"))?
        .len();
    if len < committed {
        return Err(StoreError::StaleHandle);
    }
    if w.scanner.index().tail().is_some() {
        return Err(StoreError::NeedsRecovery);
    }
    if len > committed {
        let mut r = ReadAt {
            file: &w.file,
            pos: committed,
            end: len,
        };
        let tail = feed_lines(&mut w.scanner, &mut r).map_err(StoreError::io("read"))?;
        if tail > 0 {
            return Err(StoreError::NeedsRecovery);
        }
    }
    Ok(())
}

struct ReadAt<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len().min((self.end - self.pos) as usize);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

fn read_committed(file: &File, index: &SessionIndex, id: &str) -> Result<Vec<u8>, StoreError> {
    let pos = index.position(id).ok_or(StoreError::StaleHandle)?;
    let e = index.entry(pos);
    let mut buf = vec![0u8; e.len_bytes() as usize];
    file.read_exact_at(&mut buf, e.offset())
        .map_err(StoreError::io("read committed record"))?;
    Ok(buf)
}

/// Whether two records are the same JSON value (key order and insignificant whitespace
/// aside). Both are parsed within the record limits, so a record 128 containers deep
/// compares like any other.
pub(crate) fn same_json(a: &[u8], b: &[u8]) -> bool {
    match (record::parse_value(a), record::parse_value(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// A writer's position in a session: appends become children of its leaf, and the leaf
/// advances only after this continuation's own acknowledged append.
#[derive(Debug, Clone)]
pub struct Continuation {
    handle: SessionHandle,
    leaf: Option<String>,
    /// The recording marker this continuation's recording holds, removed when the last
    /// clone of the continuation is dropped.
    claim: Option<Arc<super::presence::RecordingClaim>>,
}

impl Continuation {
    pub fn leaf(&self) -> Option<&str> {
        self.leaf.as_deref()
    }

    pub fn handle(&self) -> &SessionHandle {
        &self.handle
    }

    /// Marks the session as recorded by this device for as long as this continuation or a
    /// clone of it lives ([`SessionHandle::claim_recording`]).
    pub fn claim_recording(
        &mut self,
        device_id: &str,
        device_name: &str,
    ) -> Result<(), StoreError> {
        let claim = self.handle.claim_recording(device_id, device_name)?;
        self.claim = Some(Arc::new(claim));
        Ok(())
    }

    /// Appends `bodies` as a chain below the leaf (fresh ids, current time); the leaf moves
    /// to the last acknowledged one.
    pub fn append(&mut self, bodies: Vec<EntryBody>) -> AppendReport {
        let mut parent = self.leaf.clone();
        let entries: Vec<Entry> = bodies
            .into_iter()
            .map(|body| {
                let id = new_id();
                Entry {
                    id: id.clone(),
                    parent_id: parent.replace(id),
                    timestamp: now_iso(),
                    body,
                }
            })
            .collect();
        let report = self.handle.append_entries(&entries);
        self.advance(&report);
        report
    }

    /// Appends already-built entries; records without an explicit parent are the caller's
    /// business. The leaf moves to the last acknowledged entry.
    pub fn append_entries(&mut self, entries: &[Entry]) -> AppendReport {
        let report = self.handle.append_entries(entries);
        self.advance(&report);
        report
    }

    /// Appends one body; returns the committed entry's id.
    pub fn append_one(&mut self, body: EntryBody) -> Result<String, StoreError> {
        let acks = self.append(vec![body]).into_result()?;
        Ok(acks.into_iter().next().map(|a| a.id).unwrap_or_default())
    }

    fn advance(&mut self, report: &AppendReport) {
        if let Some(last) = report.acks.last() {
            self.leaf = Some(last.id.clone());
        }
    }

    /// Moves the leaf explicitly (the caller selected another entry).
    pub fn set_leaf(&mut self, leaf: Option<String>) {
        self.leaf = leaf;
    }
}

/// Writes `bytes` to a new file `name` inside `dir` with exclusive creation and fsyncs the
/// file and the directory.
pub(crate) fn write_new_file(
    storage: &dyn Storage,
    dir: &Path,
    name: &str,
    bytes: &[u8],
) -> Result<(), StoreError> {
    let mut f = create_private_file(&dir.join(name)).map_err(|e| match e.kind() {
        io::ErrorKind::AlreadyExists => StoreError::AssetExists,
        _ => StoreError::io("create file")(e),
    })?;
    storage
        .append(&mut f, bytes)
        .map_err(StoreError::io("write file"))?;
    storage.sync_data(&f).map_err(StoreError::io("sync file"))?;
    storage.sync_dir(dir).map_err(StoreError::io("sync dir"))
}
