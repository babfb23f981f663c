//! The on-device models: the catalog of official whisper.cpp ggml files, and the models
//! folder they are downloaded into.
//!
//! [`CATALOG`] names each model with its file, its size in bytes and its pinned SHA-256 (the
//! Git LFS object id of the file at [`DEFAULT_BASE_URL`]'s revision). A [`ModelStore`] is one
//! models folder — `<platform data dir>/models/` by default ([`default_dir`]) — and the base
//! URL it downloads from. [`ModelStore::download`] fetches `ggml-<name>.bin` into
//! `ggml-<name>.bin.part`, resuming from the part's length with an HTTP `Range` request,
//! reports [`Progress`], stops when the cancel flag is set, and installs the file only after
//! its SHA-256 and size match the catalog. Before it asks the server for anything it checks
//! that the disk holds what is left to fetch plus [`FREE_SPACE_MARGIN_BYTES`]
//! (`models.no-space`, with the amount), and a server it never reached is
//! `models.offline` ("no network connection"), not a dropped download (`models.network`).
//!
//! A catalog model is checked against its pinned SHA-256 before its first use and again
//! whenever the file changed: the verdict is remembered in a private sidecar
//! (`.ggml-<name>.bin.verified`, 0600) by the file's size, mtime, status-change time, owner,
//! inode and device, so using a verified model costs a `stat` and a small read, never
//! hashing hundreds of megabytes on the way to a dictation. A file that fails the hash is
//! [`ModelState::Damaged`] (`models.damaged`) and never returned by [`ModelStore::resolve`].
//!
//! The folder is trusted only when it is the user's own and nobody else may write in it
//! (`PERSYK_MODELS_DIR` may name any folder): a folder that belongs to someone else or is
//! group- or world-writable is `models.unsafe-folder` for listing (the CLI), using and
//! downloading, and no verification record is believed or written there. A record is
//! believed only when it, too, is the user's and writable by nobody else, and its identity
//! names the file's status-change time, which no one can set back (`touch` sets the mtime
//! only): a file rewritten in place under its old mtime is hashed again.
//!
//! Invariants:
//! - A file reaches its final name `ggml-<name>.bin` only by one `rename` of a `.part` whose
//!   bytes were hashed and matched the pinned SHA-256 and size, and which was fsynced before
//!   (the folder after). So a partial or corrupted download is never at a name that
//!   [`ModelStore::resolve`] returns; resolving a catalog model also checks its size, its
//!   SHA-256 (remembered, see above) and its whole ggml structure
//!   ([`super::check_model_file`]; a bad file is `models.invalid-file`).
//! - A `.part` is kept across a cancel, a dropped connection or a full disk (the next
//!   download resumes it) and deleted when the server sent something else (wrong size, wrong
//!   hash, not a ggml file), so a bad part is never resumed twice.
//! - Only `https://` URLs leave the machine; plain `http://` is accepted for a loopback host
//!   only (tests), by the same host rule as the provider URL
//!   ([`crate::endpoint::is_loopback_host`]). Every redirect hop is checked by that rule
//!   too and never goes from `https` to `http` (`models.bad-redirect`); a loopback hop is
//!   never proxied ([`crate::endpoint::get_following_redirects`]).
//! - One download per model at a time: the `.part` is held with an exclusive file lock, so
//!   the app and the CLI never write the same part (`models.busy`). The lock is released
//!   explicitly (`unlock`) before the download returns, because it belongs to the open file
//!   description, which a child forked meanwhile by another thread shares until its `exec`.
//! - The `.part` is opened `O_NOFOLLOW` and must be a regular file with one link: a symlink
//!   or anything else planted there is `models.part-not-a-file` and left untouched, never
//!   written through.
//! - The folder is created 0700 and files 0600; error messages never contain a URL or a
//!   path.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::ggml::Invalid;
use super::{LocalError, check_model_file, sniff_model_file};
use crate::session::fsio::{PRIVATE_FILE_MODE, create_private_dir_all, sync_dir};

/// One model of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogModel {
    /// The name settings and the CLI use (`"base.en"`).
    pub name: &'static str,
    /// Exact size of the file in bytes.
    pub bytes: u64,
    /// SHA-256 of the file, lowercase hex.
    pub sha256: &'static str,
    /// A short description for the model picker.
    pub description: &'static str,
}

impl CatalogModel {
    /// The file name in the models folder and at the download URL.
    pub fn file_name(&self) -> String {
        file_name(self.name)
    }
}

/// The official whisper.cpp models Persyk offers. Sizes and SHA-256 values are the Git LFS
/// object ids and sizes of the files in the `ggerganov/whisper.cpp` model repository at the
/// pinned revision (see `docs/app.md`, "Models").
pub const CATALOG: &[CatalogModel] = &[
    CatalogModel {
        name: "tiny.en",
        bytes: 77_704_715,
        sha256: "921e4cf8686fdd993dcd081a5da5b6c365bfde1162e72b08d75ac75289920b1f",
        description: "English, fastest, least accurate",
    },
    CatalogModel {
        name: "base.en",
        bytes: 147_964_211,
        sha256: "a03779c86df3323075f5e796cb2ce5029f00ec8869eee3fdfb897afe36c6d002",
        description: "English, fast, good for dictation (default)",
    },
    CatalogModel {
        name: "base",
        bytes: 147_951_465,
        sha256: "60ed5bc3dd14eea856493d334349b405782ddcaf0028d4b5df4088345fba2efe",
        description: "99 languages, fast as base.en; can translate into English",
    },
    CatalogModel {
        name: "small.en",
        bytes: 487_614_201,
        sha256: "c6138d6d58ecc8322097e0f987c32f1be8bb0a18532a3f88f734d1bbf9c41e5d",
        description: "English, more accurate, about 3x slower than base.en",
    },
    CatalogModel {
        name: "large-v3-turbo-q5_0",
        bytes: 574_041_195,
        sha256: "394221709cd5ad1f40c46e6031ca61bce88931e6e088c188294c6d5a55ffa7e2",
        description: "99 languages, accurate, quantized (5-bit)",
    },
    CatalogModel {
        name: "large-v3-turbo",
        bytes: 1_624_555_275,
        sha256: "1fc70f774d38eb169993ac391eea357ef47c88757ef72ee5943879b7e8e2bc69",
        description: "99 languages, most accurate, needs about 2 GB of memory",
    },
];

/// Where the catalog's files are downloaded from: the whisper.cpp model repository at a
/// pinned revision, so the files cannot change under the pinned hashes.
pub const DEFAULT_BASE_URL: &str =
    "https://huggingface.co/ggerganov/whisper.cpp/resolve/5359861c739e955e79d9a303bcbc70fb988958b1";

/// Overrides the models folder (like `PERSYK_CONFIG` for the settings file).
pub const MODELS_DIR_ENV: &str = "PERSYK_MODELS_DIR";
/// Overrides the download base URL (`https://`, or `http://` to a loopback host).
pub const MODELS_URL_ENV: &str = "PERSYK_MODELS_URL";

/// The suffix of a download in progress.
pub const PART_SUFFIX: &str = ".part";

const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
const READ_TIMEOUT: Duration = Duration::from_secs(30);
const CHUNK_BYTES: usize = 64 * 1024;

/// Free space a download leaves on the disk beyond the model itself (recordings, the
/// session files and the system need room after it).
pub const FREE_SPACE_MARGIN_BYTES: u64 = 128 * 1024 * 1024;

/// The suffix of the sidecar that remembers a catalog model's verification.
const VERIFIED_SUFFIX: &str = ".verified";
/// The first word of a verification record (its format version; v1 records, which named no
/// owner or status-change time, are not believed and the file is hashed again once).
const RECORD_VERSION: &str = "persyk-model-verified-v2";

/// The catalog model called `name`.
pub fn find(name: &str) -> Option<&'static CatalogModel> {
    CATALOG.iter().find(|m| m.name == name)
}

/// `ggml-<name>.bin`.
pub fn file_name(name: &str) -> String {
    format!("ggml-{name}.bin")
}

/// The catalog model used on the device when the settings name none.
pub const DEFAULT_LOCAL_MODEL: &str = "base.en";

/// What the `recognition.localModel` setting names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalModelChoice {
    /// A model of the catalog, by name.
    Catalog(String),
    /// A model file the user pointed to.
    File(PathBuf),
}

/// The models folder: `$PERSYK_MODELS_DIR` if set, else `models/` in the platform data
/// directory (`~/Library/Application Support/app.persyk.Persyk/models` on macOS,
/// `~/.local/share/persyk/models` on Linux).
pub fn default_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(MODELS_DIR_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    crate::dirs::project_dirs().map(|d| d.data_dir().join("models"))
}

/// The file of the catalog model `name` in the default models folder, checked like
/// [`ModelStore::resolve`] (downloaded, complete, a ggml file).
pub fn model_file(name: &str) -> Result<PathBuf, ModelError> {
    ModelStore::from_env()?.resolve(&LocalModelChoice::Catalog(name.to_owned()))
}

/// Why a model could not be listed, downloaded, deleted or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    #[error("models.unknown: there is no such model in the catalog")]
    Unknown,
    #[error("models.not-downloaded: the model is not downloaded yet")]
    NotDownloaded,
    #[error(
        "models.damaged: the downloaded model file is damaged (it does not match the catalog's size and SHA-256) and is not used; delete it and download it again"
    )]
    Damaged,
    #[error(
        "models.invalid-file: the model file is not a Whisper model that can be loaded ({0}); it is not used — delete it and download it again, or choose another file"
    )]
    InvalidFile(Invalid),
    #[error("models.no-data-dir: there is no data folder to keep models in")]
    NoDataDir,
    #[error(
        "models.bad-url: the model download URL must be an http:// or https:// URL with a host and no user name or password"
    )]
    BadUrl,
    #[error(
        "models.insecure-url: plain http:// model downloads are allowed only from a loopback host; use https://"
    )]
    InsecureUrl,
    #[error(
        "models.offline: no network connection (the download server could not be reached); check the connection and download again"
    )]
    Offline,
    #[error("models.network: the download was interrupted; download again to resume")]
    Network,
    #[error("models.http-status: the server answered {status}")]
    HttpStatus { status: u16 },
    #[error(
        "models.size-mismatch: the server's file does not have the catalog's size; nothing was installed"
    )]
    SizeMismatch,
    #[error("models.truncated: the download ended early; download again to resume")]
    Truncated,
    #[error(
        "models.hash-mismatch: the downloaded file does not match the pinned SHA-256; it was deleted and nothing was installed"
    )]
    HashMismatch,
    #[error(
        "models.disk-full: not enough disk space for the model; free some space and download again to resume"
    )]
    DiskFull,
    #[error(
        "models.no-space: the download needs {needed_mib} MiB free on the disk that holds the models folder and {free_mib} MiB is free; free some space and download again"
    )]
    NoSpace { needed_mib: u64, free_mib: u64 },
    #[error(
        "models.part-not-a-file: something other than a partial download (a link or a special file) is where the download writes; it was left alone — delete the model to remove it"
    )]
    PartNotAFile,
    #[error("models.busy: this model is being downloaded already")]
    Busy,
    #[error(
        "models.bad-redirect: the download server redirected to an address that is not allowed (plain http:// off this machine, or a user name and password)"
    )]
    BadRedirect,
    #[error(
        "models.unsafe-folder: the models folder belongs to another user or others may write in it, so its models are not trusted; make it yours and private (chmod 700) or choose another folder"
    )]
    UnsafeFolder,
    #[error("models.cancelled: the download was stopped; download again to resume")]
    Cancelled,
    #[error("models.tls: secure connections are not available (no root certificates)")]
    Tls,
    #[error("models.io: {op} failed: {source}")]
    Io {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Local(#[from] LocalError),
}

impl ModelError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ModelError::Unknown => "models.unknown",
            ModelError::NotDownloaded => "models.not-downloaded",
            ModelError::Damaged => "models.damaged",
            ModelError::InvalidFile(_) => "models.invalid-file",
            ModelError::NoDataDir => "models.no-data-dir",
            ModelError::BadUrl => "models.bad-url",
            ModelError::InsecureUrl => "models.insecure-url",
            ModelError::Offline => "models.offline",
            ModelError::Network => "models.network",
            ModelError::HttpStatus { .. } => "models.http-status",
            ModelError::SizeMismatch => "models.size-mismatch",
            ModelError::Truncated => "models.truncated",
            ModelError::HashMismatch => "models.hash-mismatch",
            ModelError::DiskFull => "models.disk-full",
            ModelError::NoSpace { .. } => "models.no-space",
            ModelError::PartNotAFile => "models.part-not-a-file",
            ModelError::Busy => "models.busy",
            ModelError::BadRedirect => "models.bad-redirect",
            ModelError::UnsafeFolder => "models.unsafe-folder",
            ModelError::Cancelled => "models.cancelled",
            ModelError::Tls => "models.tls",
            ModelError::Io { .. } => "models.io",
            ModelError::Local(e) => e.code(),
        }
    }

    /// Whether the `.part` stays and the next download resumes it.
    pub fn is_resumable(&self) -> bool {
        matches!(
            self,
            ModelError::Network
                | ModelError::Offline
                | ModelError::NoSpace { .. }
                | ModelError::Truncated
                | ModelError::DiskFull
                | ModelError::Cancelled
                | ModelError::HttpStatus { .. }
                | ModelError::BadRedirect
        )
    }
}

/// A model file that is not a model is `models.invalid-file` at this boundary.
fn from_check(e: LocalError) -> ModelError {
    match e {
        LocalError::ModelInvalid(why) => ModelError::InvalidFile(why),
        other => ModelError::Local(other),
    }
}

/// A write error: a full disk (or file-size limit, or quota) is `models.disk-full`.
fn write_error(op: &'static str) -> impl Fn(io::Error) -> ModelError {
    move |source| match source.kind() {
        io::ErrorKind::StorageFull | io::ErrorKind::FileTooLarge | io::ErrorKind::QuotaExceeded => {
            ModelError::DiskFull
        }
        _ => ModelError::Io { op, source },
    }
}

/// Checks a download base URL: `https://` anywhere, `http://` only to a loopback host.
pub fn check_url(url: &str) -> Result<(), ModelError> {
    use crate::endpoint::{EndpointError, check_http_url};
    check_http_url(url).map_err(|e| match e {
        EndpointError::Insecure => ModelError::InsecureUrl,
        _ => ModelError::BadUrl,
    })
}

/// Where a download stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Hashing the bytes an earlier download left in the `.part`.
    Checking,
    Downloading,
}

/// A download's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub phase: Phase,
    pub done_bytes: u64,
    pub total_bytes: u64,
}

impl Progress {
    /// 0.0–1.0.
    pub fn fraction(&self) -> f32 {
        if self.total_bytes == 0 {
            0.0
        } else {
            (self.done_bytes as f64 / self.total_bytes as f64) as f32
        }
    }
}

/// What the models folder holds for one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelState {
    Absent,
    /// A download stopped after this many bytes (it resumes from there).
    Partial {
        bytes: u64,
    },
    /// Downloaded and verified (its SHA-256 matched the catalog since it last changed).
    Installed,
    /// A file at the final name that does not match the catalog: the wrong size, or the
    /// right size and the wrong SHA-256 (never used).
    Damaged {
        bytes: u64,
    },
}

/// One row of [`ModelStore::list`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelInfo {
    pub model: &'static CatalogModel,
    pub state: ModelState,
}

/// A models folder, the catalog it offers and where its models come from.
#[derive(Debug, Clone)]
pub struct ModelStore {
    dir: PathBuf,
    base_url: String,
    catalog: &'static [CatalogModel],
}

impl ModelStore {
    /// The folder `dir` with [`CATALOG`], downloading from [`DEFAULT_BASE_URL`].
    pub fn new(dir: PathBuf) -> ModelStore {
        ModelStore {
            dir,
            base_url: DEFAULT_BASE_URL.to_owned(),
            catalog: CATALOG,
        }
    }

    /// Offers `catalog` instead of [`CATALOG`] (tests serve small files under their own
    /// pinned hashes).
    pub fn with_catalog(mut self, catalog: &'static [CatalogModel]) -> ModelStore {
        self.catalog = catalog;
        self
    }

    pub fn catalog(&self) -> &'static [CatalogModel] {
        self.catalog
    }

    /// The model of this store's catalog called `name`.
    pub fn find(&self, name: &str) -> Option<&'static CatalogModel> {
        self.catalog.iter().find(|m| m.name == name)
    }

    /// The default folder and base URL, each overridable by its environment variable
    /// ([`MODELS_DIR_ENV`], [`MODELS_URL_ENV`]).
    pub fn from_env() -> Result<ModelStore, ModelError> {
        let store = ModelStore::new(default_dir().ok_or(ModelError::NoDataDir)?);
        match std::env::var(MODELS_URL_ENV) {
            Ok(url) if !url.trim().is_empty() => store.with_base_url(&url),
            _ => Ok(store),
        }
    }

    /// Downloads from `url` instead (checked by [`check_url`]).
    pub fn with_base_url(mut self, url: &str) -> Result<ModelStore, ModelError> {
        check_url(url)?;
        self.base_url = url.trim().trim_end_matches('/').to_owned();
        Ok(self)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the model called `name` lives once downloaded.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(file_name(name))
    }

    fn part_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{}{PART_SUFFIX}", file_name(name)))
    }

    /// The sidecar remembering the verification of `name`'s file.
    fn record_path(&self, name: &str) -> PathBuf {
        self.dir
            .join(format!(".{}{VERIFIED_SUFFIX}", file_name(name)))
    }

    /// Whether the folder may be trusted: it is the user's and neither its group nor others
    /// may write in it (`models.unsafe-folder`). A folder that does not exist yet is fine
    /// (a download creates it 0700).
    pub fn check_folder(&self) -> Result<(), ModelError> {
        match fs::metadata(&self.dir) {
            Ok(m) if m.is_dir() && is_private_to_us(&m) => Ok(()),
            Ok(_) => Err(ModelError::UnsafeFolder),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(ModelError::Io {
                op: "read the models folder",
                source,
            }),
        }
    }

    /// Whether verification records in the folder may be believed and written.
    fn folder_trusted(&self) -> bool {
        fs::metadata(&self.dir).is_ok_and(|m| m.is_dir() && is_private_to_us(&m))
    }

    /// What the folder holds for `model`. A file of the catalog's size counts as installed
    /// only once its SHA-256 matched: the verdict is remembered by the file's size, mtime,
    /// status-change time, owner, inode and device, so only the first look after a change
    /// reads the whole file. In a folder that is not [trusted](Self::check_folder) nothing
    /// is remembered: the file is hashed every time.
    pub fn state(&self, model: &CatalogModel) -> ModelState {
        let path = self.path(model.name);
        match fs::metadata(&path) {
            Ok(m) if m.is_file() && m.len() == model.bytes => {
                let verified = match self.remembered(model, &m) {
                    Some(verdict) => verdict,
                    None => self.verify(model, &path),
                };
                return if verified {
                    ModelState::Installed
                } else {
                    ModelState::Damaged { bytes: m.len() }
                };
            }
            Ok(m) if m.is_file() => return ModelState::Damaged { bytes: m.len() },
            _ => {}
        }
        // An empty part (a download that never received a byte) holds nothing to resume.
        match fs::symlink_metadata(self.part_path(model.name)) {
            Ok(m) if m.is_file() && m.len() > 0 => ModelState::Partial { bytes: m.len() },
            _ => ModelState::Absent,
        }
    }

    /// Whether `model`'s file is installed and its verification is remembered for the file
    /// as it is now (a `stat` and a small read; never hashes).
    pub fn is_verified(&self, model: &CatalogModel) -> bool {
        match fs::metadata(self.path(model.name)) {
            Ok(m) if m.is_file() && m.len() == model.bytes => {
                self.remembered(model, &m) == Some(true)
            }
            _ => false,
        }
    }

    /// The remembered verdict for `model`'s file as `meta` describes it, if there is one: a
    /// record in a trusted folder, a regular file of the user's that nobody else may write.
    fn remembered(&self, model: &CatalogModel, meta: &fs::Metadata) -> Option<bool> {
        if !self.folder_trusted() {
            return None;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(self.record_path(model.name))
            .ok()?;
        let record = file.metadata().ok()?;
        if !record.is_file() || !is_private_to_us(&record) {
            return None;
        }
        let mut text = String::new();
        (&mut file).take(1024).read_to_string(&mut text).ok()?;
        let (identity, verdict) = text.trim_end().rsplit_once(' ')?;
        if identity != record_identity(model, &Stamp::of(meta)) {
            return None;
        }
        match verdict {
            "ok" => Some(true),
            "bad" => Some(false),
            _ => None,
        }
    }

    /// Hashes `model`'s file and remembers the verdict (unless the file changed meanwhile).
    /// An unreadable file is not verified and nothing is remembered.
    fn verify(&self, model: &CatalogModel, path: &Path) -> bool {
        let Ok(mut file) = File::open(path) else {
            return false;
        };
        let Ok(before) = file.metadata().map(|m| Stamp::of(&m)) else {
            return false;
        };
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    hasher.update(&buf[..n]);
                    total += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        let verified = total == model.bytes && hex(&hasher.finalize()) == model.sha256;
        if fs::metadata(path).is_ok_and(|m| Stamp::of(&m) == before) {
            self.remember(model, &before, verified);
        }
        verified
    }

    /// Writes the verification record (0600, through a fresh file renamed into place), in a
    /// trusted folder only. A failure only means the next use hashes again.
    fn remember(&self, model: &CatalogModel, stamp: &Stamp, verified: bool) {
        if !self.folder_trusted() {
            return;
        }
        let record = self.record_path(model.name);
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let tmp = self.dir.join(format!(
            ".{}{VERIFIED_SUFFIX}.{}-{}.tmp",
            file_name(model.name),
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let line = format!(
            "{} {}\n",
            record_identity(model, stamp),
            if verified { "ok" } else { "bad" }
        );
        let written = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(PRIVATE_FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .and_then(|mut f| {
                f.set_permissions(Permissions::from_mode(PRIVATE_FILE_MODE))?;
                f.write_all(line.as_bytes())
            })
            .and_then(|()| fs::rename(&tmp, &record));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
    }

    /// Every catalog model with its state (hashes a model file only where [`Self::state`]
    /// must).
    pub fn list(&self) -> Vec<ModelInfo> {
        self.catalog
            .iter()
            .map(|model| ModelInfo {
                model,
                state: self.state(model),
            })
            .collect()
    }

    /// The model file a setting names, checked before whisper.cpp sees it: a catalog model
    /// must be in a [trusted](Self::check_folder) folder, downloaded, have its catalog size
    /// and its SHA-256 (remembered; see [`Self::state`]); a name outside the catalog must
    /// name a `ggml-<name>.bin` someone put in that folder; every file must be a whole ggml
    /// model ([`check_model_file`]; `models.invalid-file` otherwise).
    pub fn resolve(&self, choice: &LocalModelChoice) -> Result<PathBuf, ModelError> {
        match choice {
            LocalModelChoice::File(path) => {
                check_model_file(path).map_err(from_check)?;
                Ok(path.clone())
            }
            LocalModelChoice::Catalog(name) => {
                self.check_folder()?;
                let path = self.path(name);
                match self.find(name) {
                    Some(model) => match self.state(model) {
                        ModelState::Installed => {}
                        ModelState::Damaged { .. } => return Err(ModelError::Damaged),
                        _ => return Err(ModelError::NotDownloaded),
                    },
                    None if !path.exists() => return Err(ModelError::Unknown),
                    None => {}
                }
                check_model_file(&path).map_err(from_check)?;
                Ok(path)
            }
        }
    }

    /// Deletes the model called `name`, any part of it and its verification record. Returns
    /// whether anything was there. Refused while it downloads. Something other than a
    /// partial download at the part's name (a symlink) is removed without being followed.
    pub fn delete(&self, name: &str) -> Result<bool, ModelError> {
        let part = self.part_path(name);
        let mut removed = false;
        // A regular part is taken with its lock (refused while it downloads); anything else
        // there is only unlinked.
        let held = match open_part(&part, false) {
            Ok(f) => Some(LockedPart::take(f)?),
            Err(_) => None,
        };
        if held.is_some() || fs::symlink_metadata(&part).is_ok() {
            fs::remove_file(&part).map_err(|source| ModelError::Io {
                op: "delete the partial download",
                source,
            })?;
            removed = true;
        }
        drop(held);
        let _ = fs::remove_file(self.record_path(name));
        match fs::remove_file(self.path(name)) {
            Ok(()) => removed = true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(ModelError::Io {
                    op: "delete the model",
                    source,
                });
            }
        }
        if removed {
            sync_dir(&self.dir).map_err(|source| ModelError::Io {
                op: "sync the models folder",
                source,
            })?;
        }
        Ok(removed)
    }

    /// Downloads `model` into the folder (see the module invariants) and returns its path.
    /// An installed model is left as it is. `cancel` stops the download between chunks,
    /// keeping the `.part`; `progress` hears about every chunk.
    pub fn download(
        &self,
        model: &CatalogModel,
        cancel: &AtomicBool,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<PathBuf, ModelError> {
        let target = self.path(model.name);
        if self.state(model) == ModelState::Installed {
            return Ok(target);
        }
        create_private_dir_all(&self.dir).map_err(write_error("create the models folder"))?;
        self.check_folder()?;
        let part_path = self.part_path(model.name);
        // Room for what is left to fetch, before anything is asked or written.
        let have = match fs::symlink_metadata(&part_path) {
            Ok(m) if m.is_file() && m.len() <= model.bytes => m.len(),
            _ => 0,
        };
        check_free_space(&self.dir, model.bytes - have)?;
        let mut part = LockedPart::take(open_part(&part_path, true)?)?;
        part.file
            .set_permissions(Permissions::from_mode(PRIVATE_FILE_MODE))
            .map_err(write_error("open the partial download"))?;
        let result = self.fill(model, &mut part.file, cancel, progress);
        let discard = |part: &Path| {
            let _ = fs::remove_file(part);
        };
        match result {
            Ok(()) => {}
            Err(e) if e.is_resumable() => {
                let _ = part.file.sync_data();
                return Err(e);
            }
            Err(e) => {
                discard(&part_path);
                return Err(e);
            }
        }
        // Every byte is on disk and matched the pinned hash: make it durable, then install.
        part.file
            .sync_all()
            .map_err(write_error("sync the model"))?;
        if let Err(e) = sniff_model_file(&part_path) {
            discard(&part_path);
            return Err(from_check(e));
        }
        fs::rename(&part_path, &target).map_err(write_error("install the model"))?;
        sync_dir(&self.dir).map_err(write_error("sync the models folder"))?;
        // The bytes were hashed on the way in: remember that for the file as installed.
        if let Ok(m) = part.file.metadata() {
            self.remember(model, &Stamp::of(&m), true);
        }
        Ok(target)
    }

    /// Brings `part` to the model's full, verified content.
    fn fill(
        &self,
        model: &CatalogModel,
        part: &mut File,
        cancel: &AtomicBool,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(), ModelError> {
        let total_bytes = model.bytes;
        let mut have = part
            .metadata()
            .map_err(write_error("read the partial download"))?
            .len();
        if have > total_bytes {
            part.set_len(0)
                .map_err(write_error("reset the partial download"))?;
            have = 0;
        }
        // Hash what an earlier download left: the pinned hash covers the whole file.
        let mut hasher = Sha256::new();
        part.seek(SeekFrom::Start(0))
            .map_err(write_error("read the partial download"))?;
        let mut buf = vec![0u8; 1 << 20];
        let mut hashed = 0u64;
        while hashed < have {
            if cancel.load(Ordering::Relaxed) {
                return Err(ModelError::Cancelled);
            }
            let want = (have - hashed).min(buf.len() as u64) as usize;
            part.read_exact(&mut buf[..want])
                .map_err(write_error("read the partial download"))?;
            hasher.update(&buf[..want]);
            hashed += want as u64;
            progress(Progress {
                phase: Phase::Checking,
                done_bytes: hashed,
                total_bytes,
            });
        }
        if have < total_bytes {
            self.fetch(model, part, &mut hasher, have, cancel, progress)?;
        }
        if hex(&hasher.finalize()) != model.sha256 {
            return Err(ModelError::HashMismatch);
        }
        Ok(())
    }

    /// Appends the bytes from `have` on to `part`, hashing them.
    fn fetch(
        &self,
        model: &CatalogModel,
        part: &mut File,
        hasher: &mut Sha256,
        mut have: u64,
        cancel: &AtomicBool,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(), ModelError> {
        use crate::endpoint::{FetchError, get_following_redirects};
        let total_bytes = model.bytes;
        let url = format!("{}/{}", self.base_url, model.file_name());
        let range = format!("bytes={have}-");
        let headers: &[(&str, &str)] = if have > 0 {
            &[("Range", range.as_str())]
        } else {
            &[]
        };
        // A download's deadlines are per read, not for the whole file.
        let tune: crate::endpoint::Tune<'_> = &|config| {
            config
                .timeout_connect(Some(CONNECT_TIMEOUT))
                .timeout_recv_response(Some(CONNECT_TIMEOUT))
                .timeout_per_read(Some(READ_TIMEOUT))
        };
        let response = get_following_redirects(&url, headers, tune).map_err(|e| match e {
            FetchError::Redirect => ModelError::BadRedirect,
            FetchError::Tls => ModelError::Tls,
            FetchError::Transport(e) => call_error(e),
        })?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        match status {
            206 if have > 0 => {
                // `bytes START-END/TOTAL` must continue exactly where the part ends.
                let range = header("content-range").ok_or(ModelError::SizeMismatch)?;
                if parse_content_range(&range) != Some((have, total_bytes)) {
                    return Err(ModelError::SizeMismatch);
                }
            }
            200 => {
                // The whole file (the server ignored the range, or there was none).
                if have > 0 {
                    part.set_len(0)
                        .map_err(write_error("reset the partial download"))?;
                    *hasher = Sha256::new();
                    have = 0;
                }
            }
            s => return Err(ModelError::HttpStatus { status: s }),
        }
        part.seek(SeekFrom::Start(have))
            .map_err(write_error("write the partial download"))?;
        let remaining = total_bytes - have;
        if let Some(len) = header("content-length")
            && len.trim().parse::<u64>().ok() != Some(remaining)
        {
            return Err(ModelError::SizeMismatch);
        }
        let mut body = response.into_body().into_reader();
        let mut buf = vec![0u8; CHUNK_BYTES];
        loop {
            if cancel.load(Ordering::Relaxed) {
                return Err(ModelError::Cancelled);
            }
            let n = match body.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Err(ModelError::Network),
            };
            if have + n as u64 > total_bytes {
                return Err(ModelError::SizeMismatch);
            }
            part.write_all(&buf[..n])
                .map_err(write_error("write the partial download"))?;
            hasher.update(&buf[..n]);
            have += n as u64;
            progress(Progress {
                phase: Phase::Downloading,
                done_bytes: have,
                total_bytes,
            });
        }
        if have < total_bytes {
            return Err(ModelError::Truncated);
        }
        Ok(())
    }
}

/// Opens the `.part` at `path` without following a symlink (`O_NOFOLLOW`; `O_NONBLOCK` so a
/// FIFO cannot block the open), creating it 0600 when `create`. It must be a regular file
/// with a single link; anything else is `models.part-not-a-file`.
fn open_part(path: &Path, create: bool) -> Result<File, ModelError> {
    let file = OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .truncate(false)
        .mode(PRIVATE_FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP | libc::EISDIR | libc::ENXIO) => ModelError::PartNotAFile,
            _ => write_error("open the partial download")(e),
        })?;
    let meta = file
        .metadata()
        .map_err(write_error("open the partial download"))?;
    if !meta.is_file() || meta.nlink() != 1 {
        return Err(ModelError::PartNotAFile);
    }
    Ok(file)
}

/// A `.part` held with its exclusive lock, unlocked explicitly when dropped (see the module
/// invariants: closing our descriptor alone would leave the lock with any child process
/// that inherited it between its fork and its exec).
struct LockedPart {
    file: File,
}

impl LockedPart {
    /// Takes the lock (`models.busy` when another download holds it).
    fn take(file: File) -> Result<LockedPart, ModelError> {
        file.try_lock().map_err(|e| match e {
            fs::TryLockError::WouldBlock => ModelError::Busy,
            fs::TryLockError::Error(source) => ModelError::Io {
                op: "lock the partial download",
                source,
            },
        })?;
        Ok(LockedPart { file })
    }
}

impl Drop for LockedPart {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// A failed request: a server never reached is `models.offline`; one that answered and then
/// failed is `models.network`.
fn call_error(e: ureq::Error) -> ModelError {
    match e {
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) => ModelError::Tls,
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => ModelError::Offline,
        ureq::Error::Timeout(ureq::Timeout::Resolve | ureq::Timeout::Connect) => {
            ModelError::Offline
        }
        ureq::Error::Io(io) if never_connected(&io) => ModelError::Offline,
        _ => ModelError::Network,
    }
}

/// Whether a connect-time I/O error says the server could not be reached at all.
fn never_connected(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::NetworkUnreachable
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkDown
            | io::ErrorKind::AddrNotAvailable
    )
}

/// Refuses to start when the disk of `dir` has less than `left_bytes` plus
/// [`FREE_SPACE_MARGIN_BYTES`] free (`models.no-space`, with both amounts).
fn check_free_space(dir: &Path, left_bytes: u64) -> Result<(), ModelError> {
    let free = free_bytes(dir).map_err(|source| ModelError::Io {
        op: "measure the free disk space",
        source,
    })?;
    let needed = left_bytes.saturating_add(FREE_SPACE_MARGIN_BYTES);
    if free >= needed {
        return Ok(());
    }
    let mib = |b: u64| b.div_ceil(1024 * 1024);
    Err(ModelError::NoSpace {
        needed_mib: mib(needed),
        free_mib: free / (1024 * 1024),
    })
}

/// Bytes an unprivileged writer may still use on the file system of `dir` (`statvfs`).
fn free_bytes(dir: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a NUL-terminated string that outlives the call, and `st` points to
    // writable memory of the right type, which statvfs fills when it returns 0.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it initialized `st`.
    let st = unsafe { st.assume_init() };
    #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// This process's effective user.
fn effective_uid() -> u32 {
    // SAFETY: geteuid takes nothing, cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() }
}

/// Whether a file or folder is this user's and neither its group nor others may write it.
fn is_private_to_us(meta: &fs::Metadata) -> bool {
    meta.uid() == effective_uid() && meta.mode() & 0o022 == 0
}

/// The identity of a file a verification record is valid for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime_s: i64,
    mtime_ns: i64,
    /// The status-change time: any write, chmod, chown, link or rename moves it, and no call
    /// sets it back.
    ctime_s: i64,
    ctime_ns: i64,
    owner: u32,
    inode: u64,
    device: u64,
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Stamp {
        Stamp {
            size: meta.len(),
            mtime_s: meta.mtime(),
            mtime_ns: meta.mtime_nsec(),
            ctime_s: meta.ctime(),
            ctime_ns: meta.ctime_nsec(),
            owner: meta.uid(),
            inode: meta.ino(),
            device: meta.dev(),
        }
    }
}

/// A record's text before its verdict: the version, the pinned hash and the file's stamp.
fn record_identity(model: &CatalogModel, s: &Stamp) -> String {
    format!(
        "{RECORD_VERSION} {} {} {}.{:09} {}.{:09} {} {} {}",
        model.sha256,
        s.size,
        s.mtime_s,
        s.mtime_ns,
        s.ctime_s,
        s.ctime_ns,
        s.owner,
        s.inode,
        s.device
    )
}

/// `bytes START-END/TOTAL` → `(START, TOTAL)` when END is TOTAL − 1.
fn parse_content_range(value: &str) -> Option<(u64, u64)> {
    let rest = value.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (start, end) = range.split_once('-')?;
    let (start, end, total): (u64, u64, u64) = (
        start.trim().parse().ok()?,
        end.trim().parse().ok()?,
        total.trim().parse().ok()?,
    );
    (end + 1 == total && start <= end).then_some((start, total))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_is_well_formed() {
        assert!(find(DEFAULT_LOCAL_MODEL).is_some());
        for name in ["tiny.en", "base.en", "small.en", "large-v3-turbo-q5_0"] {
            assert!(find(name).is_some(), "{name}");
        }
        for m in CATALOG {
            assert_eq!(m.sha256.len(), 64, "{}", m.name);
            assert!(
                m.sha256
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            );
            assert!(m.bytes > 1_000_000);
        }
        assert!(DEFAULT_BASE_URL.starts_with("https://"));
        assert!(check_url(DEFAULT_BASE_URL).is_ok());
    }

    #[test]
    fn only_loopback_may_be_plain_http() {
        assert!(check_url("http://127.0.0.1:8080/m").is_ok());
        assert!(check_url("http://[::1]:8080").is_ok());
        assert!(check_url("https://example.com/x").is_ok());
        assert_eq!(
            check_url("http://example.com/x").unwrap_err().code(),
            "models.insecure-url"
        );
        assert_eq!(check_url("ftp://x/").unwrap_err().code(), "models.bad-url");
        assert_eq!(check_url("nonsense").unwrap_err().code(), "models.bad-url");
    }

    #[test]
    fn content_ranges_must_continue_the_part() {
        assert_eq!(parse_content_range("bytes 10-99/100"), Some((10, 100)));
        assert_eq!(parse_content_range("bytes 10-98/100"), None);
        assert_eq!(parse_content_range("bytes */100"), None);
        assert_eq!(parse_content_range("items 0-1/2"), None);
    }

    #[test]
    fn hex_is_lowercase() {
        assert_eq!(hex(&[0x00, 0xab, 0x10]), "00ab10");
    }
}
