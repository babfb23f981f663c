//! One Persyk per user: launching it again shows the running one's window (issue #25 item 4).
//!
//! The first `persyk` app to start *claims* the instance: it holds an advisory lock on
//! `<dir>/<name>.lock` for the rest of its life and listens on the Unix socket
//! `<dir>/<name>.sock`. A later launch cannot take the lock, connects to the socket, sends
//! one request ([`Request::Show`], or [`Request::Hello`] when it was started `--hidden`, as at
//! login), waits for the answer and exits 0; the running one shows and focuses its window.
//!
//! ```text
//!  second launch                          running Persyk
//!  try_lock(name.lock) ── WouldBlock
//!  connect(name.sock) ─────────────────►  accept (thread `persyk-instance`)
//!  "show\n" ───────────────────────────►  on_request(Show) → the shell shows the window
//!  exit 0  ◄─────────────────── "ok\n"
//! ```
//!
//! Invariants:
//! - The lock decides, never the socket: the kernel drops the lock when its process ends
//!   (SIGKILL and crashes too), so a socket file whose lock nobody holds is stale, left by a
//!   process that died, and the next one to take the lock removes it before it binds its own
//!   (the stale-socket rule). The lock file itself is never removed: two processes could
//!   otherwise lock two different files of one name.
//! - One instance per settings file, which is one per user: the name is a hash of the
//!   settings path, so a run with its own `PERSYK_CONFIG` (tests, a second profile) is an
//!   instance of its own.
//! - The folder is private (0700): `$XDG_RUNTIME_DIR/persyk` on Linux (else the cache
//!   folder), the per-user `$TMPDIR` on macOS (short enough for a socket path).
//! - A second launch never waits forever: [`ANSWER`] bounds the whole exchange, and a
//!   running Persyk that does not answer in that time is an error, not a second instance.
//! - Plain data and sockets: nothing here knows the shell; [`Listener::serve`] hands each
//!   request to a callback.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a second launch waits for the running one (which may still be starting: it
/// answers once its window exists).
pub const ANSWER: Duration = Duration::from_secs(10);
/// How long the running one waits for a request line after a connection.
const REQUEST_READ: Duration = Duration::from_secs(2);
/// A request line is a word; anything longer is not Persyk talking.
const MAX_LINE: u64 = 64;

/// What a second launch asks of the running Persyk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Show and focus the window (a plain launch: Finder, Spotlight, a terminal).
    Show,
    /// Nothing: the second launch was `--hidden` (e.g. at login) and only checks.
    Hello,
}

impl Request {
    fn word(self) -> &'static str {
        match self {
            Request::Show => "show",
            Request::Hello => "hello",
        }
    }

    fn parse(line: &str) -> Option<Request> {
        match line.trim_end() {
            "show" => Some(Request::Show),
            "hello" => Some(Request::Hello),
            _ => None,
        }
    }
}

/// Where the lock and the socket live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub dir: PathBuf,
    /// The file stem of both files.
    pub name: String,
}

impl Place {
    pub fn lock_path(&self) -> PathBuf {
        self.dir.join(format!("{}.lock", self.name))
    }

    pub fn socket_path(&self) -> PathBuf {
        self.dir.join(format!("{}.sock", self.name))
    }
}

/// The place for the settings file at `settings` (`None`: the platform has no home folder):
/// see the module's invariants.
pub fn place(settings: Option<&Path>) -> Option<Place> {
    let dirs = crate::dirs::project_dirs();
    #[cfg(target_os = "macos")]
    let dir = {
        let _ = &dirs;
        Some(std::env::temp_dir().join("persyk"))
    };
    #[cfg(not(target_os = "macos"))]
    let dir = dirs.map(|d| {
        d.runtime_dir()
            .map_or_else(|| d.cache_dir().to_path_buf(), Path::to_path_buf)
    });
    Some(Place {
        dir: dir?,
        name: instance_name(settings),
    })
}

/// `instance-<16 hex digits>`: FNV-1a of the settings path's bytes (stable across builds
/// and runs, unlike std's hasher).
pub fn instance_name(settings: Option<&Path>) -> String {
    let bytes = settings.map_or(&[][..], |p| p.as_os_str().as_encoded_bytes());
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("instance-{hash:016x}")
}

/// Why the instance could not be claimed or reached.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstanceError {
    #[error("instance.io: {what} ({source})")]
    Io {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("instance.no-answer: Persyk is already running but did not answer within {} s", ANSWER.as_secs())]
    NoAnswer,
}

impl InstanceError {
    pub fn code(&self) -> &'static str {
        match self {
            InstanceError::Io { .. } => "instance.io",
            InstanceError::NoAnswer => "instance.no-answer",
        }
    }
}

fn io(what: &'static str) -> impl FnOnce(io::Error) -> InstanceError {
    move |source| InstanceError::Io { what, source }
}

/// What claiming found.
#[derive(Debug)]
pub enum Claim {
    /// This process is Persyk's one instance: serve requests with [`Listener::serve`].
    First(Listener),
    /// Another Persyk runs and answered the request.
    Running,
}

/// The running instance's side: the lock (held while this lives) and the socket.
#[derive(Debug)]
pub struct Listener {
    _lock: File,
    socket: UnixListener,
}

/// Claims the instance at `place`, or, when another process holds it, sends it `request`
/// and waits (at most [`ANSWER`]) for its answer.
pub fn claim(place: &Place, request: Request) -> Result<Claim, InstanceError> {
    crate::session::fsio::create_private_dir_all(&place.dir)
        .map_err(io("the instance folder could not be created"))?;
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(crate::session::fsio::PRIVATE_FILE_MODE)
        .open(place.lock_path())
        .map_err(io("the instance lock could not be opened"))?;
    let deadline = Instant::now() + ANSWER;
    loop {
        match lock.try_lock() {
            Ok(()) => return bind(place, lock).map(Claim::First),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(io("the instance lock could not be taken")(e));
            }
        }
        // Held: the running one may not listen yet (it binds right after locking), or it
        // may be ending (then the lock comes free and this process takes it).
        if let Ok(stream) = UnixStream::connect(place.socket_path()) {
            return ask(stream, request, deadline).map(|()| Claim::Running);
        }
        if Instant::now() >= deadline {
            return Err(InstanceError::NoAnswer);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// With the lock held: removes a stale socket and listens.
fn bind(place: &Place, lock: File) -> Result<Listener, InstanceError> {
    let path = place.socket_path();
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("a stale instance socket could not be removed")(e)),
    }
    let socket = UnixListener::bind(&path).map_err(io("the instance socket could not be made"))?;
    Ok(Listener {
        _lock: lock,
        socket,
    })
}

fn ask(stream: UnixStream, request: Request, deadline: Instant) -> Result<(), InstanceError> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(100));
    stream
        .set_read_timeout(Some(left))
        .and_then(|()| stream.set_write_timeout(Some(left)))
        .map_err(io("the instance socket could not be set up"))?;
    (&stream)
        .write_all(format!("{}\n", request.word()).as_bytes())
        .map_err(io("the running Persyk could not be asked"))?;
    let mut answer = String::new();
    match BufReader::new(stream.take(MAX_LINE)).read_line(&mut answer) {
        Ok(_) if answer.trim_end() == "ok" => Ok(()),
        Ok(_) => Err(InstanceError::NoAnswer),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Err(InstanceError::NoAnswer)
        }
        Err(e) => Err(io("the running Persyk's answer could not be read")(e)),
    }
}

impl Listener {
    /// Answers later launches on a thread of its own for the rest of the process's life:
    /// each request goes to `on_request` (which queues it for the UI thread), then "ok".
    pub fn serve(self, on_request: impl Fn(Request) + Send + 'static) -> Result<(), InstanceError> {
        std::thread::Builder::new()
            .name("persyk-instance".into())
            .spawn(move || {
                let Listener { _lock, socket } = self;
                for stream in socket.incoming() {
                    match stream {
                        Ok(stream) => answer(stream, &on_request),
                        Err(e) => eprintln!("persyk: instance socket: {e}"),
                    }
                }
                drop(_lock);
            })
            .map(drop)
            .map_err(io("the instance thread could not be started"))
    }

    /// Answers one pending request here (tests); `None` when it was not a request.
    pub fn answer_one(&self) -> Option<Request> {
        let (stream, _) = self.socket.accept().ok()?;
        let seen = std::cell::Cell::new(None);
        answer(stream, &|r| seen.set(Some(r)));
        seen.get()
    }
}

fn answer(stream: UnixStream, on_request: &dyn Fn(Request)) {
    if stream.set_read_timeout(Some(REQUEST_READ)).is_err() {
        return;
    }
    let mut line = String::new();
    let read = BufReader::new((&stream).take(MAX_LINE)).read_line(&mut line);
    if let (Ok(_), Some(request)) = (read, Request::parse(&line)) {
        on_request(request);
        let _ = (&stream).write_all(b"ok\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn place(dir: &Path) -> Place {
        Place {
            dir: dir.join("run"),
            name: instance_name(Some(Path::new("/home/u/.config/persyk/settings.json"))),
        }
    }

    /// Issue #25 item 4: a second `persyk` started a second app. Now the first claims the
    /// instance, and a later claim of the same place asks it to show its window and reports
    /// that Persyk runs (the lock is per open file, so two claims in one process contend as
    /// two processes do).
    #[test]
    fn issue25_04_a_second_launch_asks_the_running_one_to_show_its_window() {
        let dir = tempfile::tempdir().unwrap();
        let place = place(dir.path());
        let Ok(Claim::First(first)) = claim(&place, Request::Show) else {
            panic!("the first launch must claim the instance");
        };
        let second = std::thread::spawn({
            let place = place.clone();
            move || claim(&place, Request::Show)
        });
        assert_eq!(first.answer_one(), Some(Request::Show));
        assert!(matches!(second.join().unwrap(), Ok(Claim::Running)));
        // `--hidden` only says hello.
        let third = std::thread::spawn({
            let place = place.clone();
            move || claim(&place, Request::Hello)
        });
        assert_eq!(first.answer_one(), Some(Request::Hello));
        assert!(matches!(third.join().unwrap(), Ok(Claim::Running)));
        // The folder is private.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&place.dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    /// The stale-socket rule: a socket file left by a process that died (its lock gone)
    /// is removed and the new launch becomes the instance; once the running one ends, the
    /// next launch is the instance again.
    #[test]
    fn issue25_04_a_stale_socket_is_replaced_and_a_dead_instance_frees_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let place = place(dir.path());
        std::fs::create_dir_all(&place.dir).unwrap();
        // A socket file nobody listens on, as a killed Persyk leaves it.
        drop(UnixListener::bind(place.socket_path()).unwrap());
        assert!(place.socket_path().exists());
        let Ok(Claim::First(first)) = claim(&place, Request::Show) else {
            panic!("a stale socket must not stop a launch");
        };
        drop(first);
        assert!(matches!(claim(&place, Request::Show), Ok(Claim::First(_))));
    }

    #[test]
    fn a_running_instance_that_never_answers_is_an_error_not_a_second_instance() {
        let dir = tempfile::tempdir().unwrap();
        let place = place(dir.path());
        let Ok(Claim::First(_first)) = claim(&place, Request::Show) else {
            panic!("first");
        };
        // Nobody accepts: the answer times out (shortened by a deadline in the past).
        let stream = UnixStream::connect(place.socket_path()).unwrap();
        let err = ask(stream, Request::Show, Instant::now()).unwrap_err();
        assert_eq!(err.code(), "instance.no-answer");
    }

    #[test]
    fn names_follow_the_settings_file_and_requests_read_back() {
        let a = instance_name(Some(Path::new("/a/settings.json")));
        assert_eq!(a, instance_name(Some(Path::new("/a/settings.json"))));
        assert_ne!(a, instance_name(Some(Path::new("/b/settings.json"))));
        assert_eq!(instance_name(None), "instance-cbf29ce484222325");
        for r in [Request::Show, Request::Hello] {
            assert_eq!(Request::parse(&format!("{}\n", r.word())), Some(r));
        }
        assert_eq!(Request::parse("quit\n"), None);
        let called = Cell::new(false);
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(b"rm -rf\n").unwrap();
        answer(b, &|_| called.set(true));
        assert!(!called.get());
    }
}
