//! One writer per session per moment, across Macs: the recording Mac's marker.
//!
//! A session kept in a synced folder is on every Mac at once, but a sync engine carries
//! whole files, not appends: if this Mac appended a label to a session while another Mac was
//! still recording it, the two `session.jsonl` versions would diverge and the engine would
//! keep one of them as a conflict copy. Rare and mergeable (`super::merge`) for a finished
//! session, but a recording goes on appending for minutes, so Persyk does not let it happen:
//!
//! - A Mac that records a session keeps a *marker* beside its `session.jsonl`:
//!   [`MARKER_FILE`], one JSON line `{"deviceId", "deviceName", "sessionId", "heartbeat"}`,
//!   written when the recording starts, rewritten with a new `heartbeat` (RFC 3339, UTC)
//!   every [`HEARTBEAT`], and removed once the recording's last entry is durable. The engine
//!   carries it to the other Macs like any file.
//! - Any write through the store (an append of any kind, explicit recovery, a merge, a
//!   deletion) first reads the marker. One that is *fresh* — its heartbeat within
//!   [`STALE_AFTER`] of this Mac's clock, either way — and names another device refuses the
//!   write with `sync.recording-elsewhere`; nothing is written.
//! - A marker is advisory state of Persyk's, not part of the session: it is never read as a
//!   session or a conflict copy, validation ignores it, and a marker left by a Mac that
//!   crashed stops counting [`STALE_AFTER`] after its last heartbeat. A marker that cannot be
//!   read as one (damaged, too long, another shape) counts as no marker, so it can never lock
//!   a session forever.
//!
//! Invariants:
//! - The marker is replaced atomically (a temporary file in the same folder, renamed over it):
//!   a reader sees a whole marker or none.
//! - A marker is removed only by the guard that wrote it, and only while it still names this
//!   guard's device and session.
//! - Writes by this process to a session it is recording skip the read: the marker is its own.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The marker's file name, beside `session.jsonl`.
pub const MARKER_FILE: &str = "persyk-recording.json";
/// How often a recording Mac renews its marker.
pub const HEARTBEAT: Duration = Duration::from_secs(10);
/// How long after its last heartbeat a marker stops counting: six heartbeats, so an engine
/// that is a few seconds late or a clock a little off never lets a twin append through.
pub const STALE_AFTER: Duration = Duration::from_secs(60);
/// The most bytes of a marker read; a longer file is not a marker.
const MAX_MARKER_BYTES: u64 = 4096;

/// What a marker says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Marker {
    /// The recording Mac's device id (`persyk.device`'s `id`).
    pub device_id: String,
    /// Its name, to say who is recording.
    pub device_name: String,
    /// The session's header id.
    pub session_id: String,
    /// The last renewal, RFC 3339 UTC.
    pub heartbeat: String,
}

impl Marker {
    /// Whether the marker counts at `now`: its heartbeat parses and lies within
    /// [`STALE_AFTER`] of `now`, before or after (a clock running ahead is not trusted to
    /// hold a session for longer).
    pub fn is_fresh(&self, now: OffsetDateTime) -> bool {
        let Ok(beat) = OffsetDateTime::parse(&self.heartbeat, &Rfc3339) else {
            return false;
        };
        (now - beat).unsigned_abs() <= STALE_AFTER
    }
}

/// The marker in session folder `dir`, if there is one that reads as a marker.
pub fn read_marker(dir: &Path) -> Option<Marker> {
    let file = fs::File::open(dir.join(MARKER_FILE)).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(MAX_MARKER_BYTES + 1)
        .read_to_string(&mut text)
        .ok()?;
    if text.len() as u64 > MAX_MARKER_BYTES {
        return None;
    }
    serde_json::from_str(text.trim_end()).ok()
}

/// The name of the other device recording the session in `dir` now, if one is: a fresh
/// marker whose device is not `this_device`. Without a known device of its own, every fresh
/// marker is another's.
pub fn recording_elsewhere(
    dir: &Path,
    this_device: Option<&str>,
    now: OffsetDateTime,
) -> Option<String> {
    let marker = read_marker(dir)?;
    (marker.is_fresh(now) && Some(marker.device_id.as_str()) != this_device)
        .then_some(marker.device_name)
}

/// Writes `marker` into `dir` atomically (temporary file, fsync, rename).
fn write_marker(dir: &Path, marker: &Marker) -> io::Result<()> {
    let mut line = serde_json::to_string(marker).map_err(io::Error::other)?;
    line.push('\n');
    super::fsio::replace_file(dir, MARKER_FILE, line.as_bytes())
}

/// The marker of a recording in progress: renewed every `interval` by a thread of its own
/// until dropped, then removed (see the module's invariants).
#[derive(Debug)]
pub struct RecordingClaim {
    dir: PathBuf,
    device_id: String,
    session_id: String,
    claimed: Arc<AtomicBool>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl RecordingClaim {
    /// Writes the first marker and starts the heartbeat. `claimed` is the session's flag
    /// that lets this process's own writes skip the marker read.
    pub(crate) fn start(
        dir: PathBuf,
        device_id: &str,
        device_name: &str,
        session_id: &str,
        claimed: Arc<AtomicBool>,
        interval: Duration,
    ) -> io::Result<RecordingClaim> {
        let marker = Marker {
            device_id: device_id.to_owned(),
            device_name: device_name.to_owned(),
            session_id: session_id.to_owned(),
            heartbeat: now_rfc3339(),
        };
        write_marker(&dir, &marker)?;
        super::fsio::sync_dir(&dir)?;
        claimed.store(true, Ordering::SeqCst);
        let (stop, stopped) = mpsc::channel::<()>();
        let beat_dir = dir.clone();
        let thread = std::thread::Builder::new()
            .name("persyk-presence".into())
            .spawn(move || {
                let mut marker = marker;
                loop {
                    match stopped.recv_timeout(interval) {
                        Err(RecvTimeoutError::Timeout) => {
                            marker.heartbeat = now_rfc3339();
                            // A missed beat is retried at the next one; the marker only
                            // goes stale after six.
                            if let Err(e) = write_marker(&beat_dir, &marker) {
                                eprintln!("persyk: sync.heartbeat-failed: {}", e.kind());
                            }
                        }
                        _ => return,
                    }
                }
            })?;
        Ok(RecordingClaim {
            dir,
            device_id: device_id.to_owned(),
            session_id: session_id.to_owned(),
            claimed,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for RecordingClaim {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let ours = read_marker(&self.dir)
            .is_some_and(|m| m.device_id == self.device_id && m.session_id == self.session_id);
        if ours && fs::remove_file(self.dir.join(MARKER_FILE)).is_ok() {
            let _ = super::fsio::sync_dir(&self.dir);
        }
        self.claimed.store(false, Ordering::SeqCst);
    }
}

fn now_rfc3339() -> String {
    // Formatting the current UTC time as RFC 3339 cannot fail; an empty heartbeat would only
    // make the marker count as stale.
    OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(heartbeat: &str) -> Marker {
        Marker {
            device_id: "a".into(),
            device_name: "Mac A".into(),
            session_id: "s".into(),
            heartbeat: heartbeat.into(),
        }
    }

    #[test]
    fn a_marker_counts_within_a_minute_of_its_heartbeat_either_way() {
        let now = OffsetDateTime::parse("2026-12-05T12:00:00Z", &Rfc3339).expect("time");
        assert!(marker("2026-12-05T11:59:01Z").is_fresh(now));
        assert!(marker("2026-12-05T12:00:59Z").is_fresh(now));
        assert!(!marker("2026-12-05T11:58:59Z").is_fresh(now));
        assert!(!marker("2026-12-05T12:01:01Z").is_fresh(now));
        assert!(!marker("yesterday").is_fresh(now));
    }

    #[test]
    fn only_a_whole_fresh_marker_of_another_device_is_recording_elsewhere() {
        let dir = tempfile::tempdir().expect("tmp");
        let now = OffsetDateTime::now_utc();
        assert_eq!(recording_elsewhere(dir.path(), Some("b"), now), None);
        write_marker(dir.path(), &marker(&now_rfc3339())).expect("write");
        assert_eq!(
            recording_elsewhere(dir.path(), Some("b"), now).as_deref(),
            Some("Mac A")
        );
        assert_eq!(
            recording_elsewhere(dir.path(), None, now).as_deref(),
            Some("Mac A")
        );
        assert_eq!(recording_elsewhere(dir.path(), Some("a"), now), None);
        // Damaged, or another shape: no marker, never a lock for ever.
        fs::write(dir.path().join(MARKER_FILE), "{\"deviceId\":").expect("write");
        assert_eq!(recording_elsewhere(dir.path(), Some("b"), now), None);
        fs::write(
            dir.path().join(MARKER_FILE),
            format!("{{\"deviceId\":\"a\",\"pad\":\"{}\"}}", "x".repeat(5000)),
        )
        .expect("write");
        assert_eq!(recording_elsewhere(dir.path(), Some("b"), now), None);
        // No temporary file is left beside it.
        let names: Vec<String> = fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec![MARKER_FILE.to_owned()]);
    }

    #[test]
    fn a_claim_renews_its_heartbeat_and_removes_only_its_own_marker() {
        let dir = tempfile::tempdir().expect("tmp");
        let flag = Arc::new(AtomicBool::new(false));
        let claim = RecordingClaim::start(
            dir.path().to_path_buf(),
            "a",
            "Mac A",
            "s",
            flag.clone(),
            Duration::from_millis(20),
        )
        .expect("claim");
        assert!(flag.load(Ordering::SeqCst));
        let first = read_marker(dir.path()).expect("marker");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let now = read_marker(dir.path()).expect("marker is never missing");
            if now.heartbeat != first.heartbeat {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no heartbeat");
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(claim);
        assert!(!flag.load(Ordering::SeqCst));
        assert!(read_marker(dir.path()).is_none());

        // A marker another device wrote meanwhile is left alone.
        let claim = RecordingClaim::start(
            dir.path().to_path_buf(),
            "a",
            "Mac A",
            "s",
            flag.clone(),
            HEARTBEAT,
        )
        .expect("claim");
        let mut other = marker(&now_rfc3339());
        other.device_id = "b".into();
        write_marker(dir.path(), &other).expect("write");
        drop(claim);
        assert_eq!(read_marker(dir.path()), Some(other));
    }
}
