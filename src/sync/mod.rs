//! History on every Mac: sessions kept in a folder that iCloud Drive, Syncthing or Dropbox
//! copies between a person's Macs. Persyk never sends anything between machines itself; it
//! only makes its files safe to be carried by an engine people already run.
//!
//! This room owns what is about *this* Mac and the synced folder, above the settings:
//! - [`Device`]: which Mac this is — a stable random id kept in the config folder
//!   (`device-id`, 0600) and a name (`sync.deviceName`, else the computer's name) — and the
//!   `persyk.device` entry a recording writes, so a reader of the session can tell which Mac
//!   recorded it (`docs/format.md`, "Which Mac recorded it").
//!
//! - [`shared`]: settings worth sharing between Macs (words, replacements, clean-up modes
//!   and per-app rules), kept beside the history when `sync.shareSettings` is on.
//!
//! The session side lives in the session core: conflict copies and files still arriving
//! (`session::conflict`), the merge (`session::merge`), the recording Mac's marker
//! (`session::presence`).
//!
//! Invariants:
//! - The device id never leaves this Mac except inside the entries and markers Persyk
//!   writes in the user's own sessions; it is random, not derived from hardware.
//! - Files this room creates are private (0600, folders 0700; `session::fsio`).

pub mod shared;

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::json;

use crate::session::format::{Custom, EntryBody};
use crate::session::fsio::{create_private_dir_all, create_private_file};
use crate::session::{DEVICE_TYPE, Store};
use crate::settings::Settings;

/// Why this room could not do what was asked. Every variant has a stable [`SyncError::code`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    #[error("sync.io: {op} failed: {source}")]
    Io {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("sync.no-config-dir: there is no folder to keep this Mac's id in")]
    NoConfigDir,
    #[error("sync.shared-invalid: the shared settings file is not one Persyk can read")]
    SharedInvalid,
    #[error("sync.not-a-conflict-copy: that file is not a conflict copy of the shared settings")]
    NotAConflictCopy,
    #[error("sync.not-downloaded: the sync engine has not brought the file to this Mac yet")]
    NotDownloaded,
}

impl SyncError {
    pub fn code(&self) -> &'static str {
        match self {
            SyncError::Io { .. } => "sync.io",
            SyncError::NoConfigDir => "sync.no-config-dir",
            SyncError::SharedInvalid => "sync.shared-invalid",
            SyncError::NotAConflictCopy => "sync.not-a-conflict-copy",
            SyncError::NotDownloaded => "sync.not-downloaded",
        }
    }

    fn io(op: &'static str) -> impl FnOnce(io::Error) -> SyncError {
        move |source| SyncError::Io { op, source }
    }
}

/// The longest device name kept (characters).
pub const MAX_NAME_CHARS: usize = 80;

/// Which Mac this is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Random, made once per Mac (per config folder).
    pub id: String,
    /// What people call it: "Anna's MacBook Air".
    pub name: String,
}

impl Device {
    /// This Mac: its id from `<config dir>/device-id` (made on first use), its name from the
    /// settings or the computer.
    pub fn this(settings: &Settings) -> Result<Device, SyncError> {
        let dir = config_dir().ok_or(SyncError::NoConfigDir)?;
        Ok(Device {
            id: device_id_in(&dir)?,
            name: device_name(settings),
        })
    }

    /// The entry a recording appends before its `recording.started`: `customType`
    /// `persyk.device`, `data` `{"id", "name"}`. State, not conversation: readers that do
    /// not know it skip it.
    pub fn entry(&self) -> EntryBody {
        EntryBody::Custom(Custom {
            custom_type: DEVICE_TYPE.to_owned(),
            data: json!({"id": self.id, "name": self.name}),
        })
    }
}

/// Tells `store` which Mac this is ([`Store::set_device`]), so that it writes to no session
/// another Mac is recording now and is never stopped by this Mac's own recording marker.
/// Without a config folder for the id, the store treats every fresh marker as another Mac's
/// (said on stderr).
pub fn identify(store: &mut Store) {
    match config_dir()
        .ok_or(SyncError::NoConfigDir)
        .and_then(|dir| device_id_in(&dir))
    {
        Ok(id) => store.set_device(&id),
        Err(e) => eprintln!(
            "persyk: {}: this Mac's recordings are not told apart",
            e.code()
        ),
    }
}

/// Marks the session of `continuation` as recorded by `device` while the continuation (or a
/// clone) lives: the marker other Macs respect (`session::presence`). A marker that cannot be
/// written is said on stderr and the recording goes on; one of another Mac that is fresh
/// refuses the recording.
pub fn claim_recording(
    continuation: &mut crate::session::Continuation,
    device: &Device,
) -> Result<(), crate::session::StoreError> {
    match continuation.claim_recording(&device.id, &device.name) {
        Err(e @ crate::session::StoreError::RecordingElsewhere { .. }) => Err(e),
        Err(e) => {
            eprintln!(
                "persyk: {}: other Macs are not told this session is recording",
                e.code()
            );
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

/// The folders a sync engine copies that exist on this Mac, by engine: iCloud Drive
/// (`~/Library/Mobile Documents/com~apple~CloudDocs`), Syncthing's default folder (`~/Sync`),
/// Dropbox (`~/Library/CloudStorage/Dropbox`, else `~/Dropbox`). Settings › History offers
/// them.
pub fn synced_places() -> Vec<(&'static str, PathBuf)> {
    directories::BaseDirs::new()
        .map(|b| synced_places_in(b.home_dir()))
        .unwrap_or_default()
}

/// [`synced_places`] under the home folder `home`.
pub fn synced_places_in(home: &Path) -> Vec<(&'static str, PathBuf)> {
    let candidates: [(&'static str, PathBuf); 4] = [
        (
            "iCloud Drive",
            home.join("Library/Mobile Documents/com~apple~CloudDocs"),
        ),
        ("Syncthing", home.join("Sync")),
        ("Dropbox", home.join("Library/CloudStorage/Dropbox")),
        ("Dropbox", home.join("Dropbox")),
    ];
    let mut out: Vec<(&'static str, PathBuf)> = Vec::new();
    for (engine, path) in candidates {
        if path.is_dir() && !out.iter().any(|(e, _)| *e == engine) {
            out.push((engine, path));
        }
    }
    out
}

/// The folder the settings file is in (`$PERSYK_CONFIG`'s folder when that is set).
fn config_dir() -> Option<PathBuf> {
    crate::settings::settings_path().and_then(|p| p.parent().map(Path::to_path_buf))
}

/// The id kept in `dir/device-id`, made (a UUIDv7: a time and 74 random bits; created exclusively, 0600) if missing.
pub fn device_id_in(dir: &Path) -> Result<String, SyncError> {
    let path = dir.join("device-id");
    let valid = |s: &str| crate::session::validate::is_id(s) && s.len() <= 64;
    match fs::File::open(&path) {
        Ok(mut f) => {
            let mut text = String::new();
            Read::by_ref(&mut f)
                .take(256)
                .read_to_string(&mut text)
                .map_err(SyncError::io("read device id"))?;
            let id = text.trim();
            if valid(id) {
                return Ok(id.to_owned());
            }
            // A damaged id file: set aside, never silently reused.
            fs::rename(&path, dir.join("device-id.damaged"))
                .map_err(SyncError::io("set the damaged device id aside"))?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(SyncError::io("read device id")(e)),
    }
    create_private_dir_all(dir).map_err(SyncError::io("create config dir"))?;
    let id = uuid::Uuid::now_v7().to_string();
    // Written whole under a name of its own, then linked into place (a link never replaces):
    // another Persyk making the id at the same moment never reads a half-written one.
    let tmp = dir.join(format!(
        ".device-id.{}.{}",
        std::process::id(),
        &id[id.len() - 12..]
    ));
    let made = create_private_file(&tmp)
        .and_then(|mut f| {
            f.write_all(id.as_bytes())?;
            f.sync_all()
        })
        .map_err(SyncError::io("write device id"));
    let linked = made.and_then(|()| match fs::hard_link(&tmp, &path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(SyncError::io("create device id")(e)),
    });
    let _ = fs::remove_file(&tmp);
    if linked? {
        crate::session::fsio::sync_dir(dir).map_err(SyncError::io("sync config dir"))?;
        Ok(id)
    } else {
        // Another Persyk made it first: that one is the id.
        device_id_in(dir)
    }
}

/// The name this Mac writes: `sync.deviceName` when set, else the computer's name, else
/// "this Mac" — one line, at most [`MAX_NAME_CHARS`].
pub fn device_name(settings: &Settings) -> String {
    let chosen = settings
        .sync
        .device_name
        .as_deref()
        .map(clean_name)
        .filter(|n| !n.is_empty());
    chosen
        .or_else(|| computer_name().map(clean_name).filter(|n| !n.is_empty()))
        .unwrap_or_else(|| "this Mac".to_owned())
}

fn clean_name(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .chars()
        .take(MAX_NAME_CHARS)
        .collect()
}

/// The computer's name as the system shows it: System Settings' "Name" on a Mac
/// (`scutil --get ComputerName`), the host name elsewhere. Asked once per process.
pub fn computer_name() -> Option<&'static str> {
    static NAME: OnceLock<Option<String>> = OnceLock::new();
    NAME.get_or_init(|| {
        #[cfg(target_os = "macos")]
        {
            std::process::Command::new("/usr/sbin/scutil")
                .args(["--get", "ComputerName"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        }
        #[cfg(not(target_os = "macos"))]
        {
            fs::read_to_string("/proc/sys/kernel/hostname")
                .or_else(|_| fs::read_to_string("/etc/hostname"))
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        }
    })
    .as_deref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_id_is_made_once_and_kept_private() {
        let dir = tempfile::tempdir().expect("tmp");
        let id = device_id_in(dir.path()).expect("made");
        assert_eq!(device_id_in(dir.path()).expect("kept"), id);
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(dir.path().join("device-id"))
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // A damaged file is set aside and a new id made.
        fs::write(dir.path().join("device-id"), "no/t an id").expect("write");
        let other = device_id_in(dir.path()).expect("new");
        assert_ne!(other, id);
        assert!(dir.path().join("device-id.damaged").exists());
    }

    #[test]
    fn processes_making_the_id_at_once_agree_on_one() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().expect("tmp");
            let ids: Vec<String> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..8)
                    .map(|_| s.spawn(|| device_id_in(dir.path()).expect("id")))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("thread"))
                    .collect()
            });
            assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
            let names: Vec<String> = fs::read_dir(dir.path())
                .expect("list")
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            assert_eq!(names, ["device-id"], "nothing set aside, nothing left over");
        }
    }

    #[test]
    fn the_synced_places_offered_are_the_ones_that_exist() {
        let home = tempfile::tempdir().expect("tmp");
        assert!(synced_places_in(home.path()).is_empty());
        fs::create_dir_all(home.path().join("Sync")).expect("syncthing");
        fs::create_dir_all(home.path().join("Dropbox")).expect("dropbox");
        fs::create_dir_all(home.path().join("Library/CloudStorage/Dropbox")).expect("dropbox");
        let places = synced_places_in(home.path());
        assert_eq!(
            places,
            vec![
                ("Syncthing", home.path().join("Sync")),
                ("Dropbox", home.path().join("Library/CloudStorage/Dropbox")),
            ]
        );
    }

    #[test]
    fn the_name_is_one_line_and_falls_back_to_the_computer() {
        let mut s = Settings::default();
        s.sync.device_name = Some("  Anna's\nMacBook Air ".into());
        assert_eq!(device_name(&s), "Anna's MacBook Air");
        s.sync.device_name = Some("   ".into());
        let fallback = device_name(&s);
        assert!(!fallback.is_empty());
        assert_eq!(
            Some(fallback.as_str()),
            computer_name().or(Some("this Mac"))
        );
    }
}
