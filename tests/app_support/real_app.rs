//! The real app as a child process, for the tests that drive the real binary under Xvfb
//! (`app_journey`, `app_provider_failure`, `app_first_run`): launching it, waiting on what
//! it writes, its window, the session folders it publishes, the CLI beside it and a WAV
//! read back by Python's `wave`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A dictation by the hotkey, as a user makes one: Alt+Space; the new session (one of
/// `list()` not there before: a published session folder) and its WAV asset awaited; half a
/// second of room tone, then `say()` plays the speech into the microphone; 300 ms later
/// Alt+Space again. Returns the new session's file.
pub fn record_by_hotkey(
    log: &Path,
    list: impl Fn() -> Vec<PathBuf>,
    say: impl FnOnce(),
) -> PathBuf {
    let before = list();
    super::x11::press("alt+space");
    let session = wait_for("the hotkey to start a recording", log, || {
        list().into_iter().find(|s| !before.contains(s))
    });
    let assets = session.parent().expect("session folder").join("assets");
    wait_for("the recording's WAV asset", log, || {
        std::fs::read_dir(&assets)
            .ok()?
            .flatten()
            .find(|e| e.path().extension().is_some_and(|x| x == "wav"))
    });
    std::thread::sleep(Duration::from_millis(500));
    say();
    std::thread::sleep(Duration::from_millis(300));
    super::x11::press("alt+space");
    session
}

/// A guard against hangs only (never a performance threshold).
pub const WAIT: Duration = Duration::from_secs(60);

/// Polls `probe` until it answers; on a timeout the app's log says what it saw.
pub fn wait_for<T>(what: &str, log: &Path, mut probe: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            start.elapsed() < WAIT,
            "timed out waiting for {what}; the app's log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The real app, killed on drop if the test did not quit it.
pub struct App {
    pub child: Child,
    pub log: PathBuf,
}

impl App {
    /// Starts `command` (the real binary with the test's arguments and environment), its
    /// standard error in `log`, and waits for its window: the app and the window's id. The
    /// app exiting before its window shows fails the test with its log.
    pub fn launch(mut command: Command, log: &Path) -> (App, String) {
        let mut app = App {
            child: command
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(log).expect("log file"))
                .spawn()
                .expect("start persyk app"),
            log: log.to_owned(),
        };
        let window = wait_for("the app's window", log, || {
            if let Ok(Some(status)) = app.child.try_wait() {
                panic!("persyk app exited ({status}):\n{}", app.log_text());
            }
            window("Persyk")
        });
        (app, window)
    }

    /// `persyk app --hidden` as a user with a key in the environment runs it: settings from
    /// `settings`, the microphone on `pulse_server`, data under `data`, and no session bus —
    /// no Secret Service (the key comes from the environment) and no notification daemon;
    /// neither may stop a dictation. Xvfb has no menu-bar host, so even `--hidden` shows the
    /// window (else the app would be unreachable). Started and awaited as [`App::launch`].
    pub fn launch_hidden_with_key(
        settings: &Path,
        pulse_server: &str,
        api_key: &str,
        data: &Path,
        log: &Path,
    ) -> (App, String) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_persyk"));
        command
            .args(["app", "--hidden"])
            .env("PERSYK_CONFIG", settings)
            .env("PULSE_SERVER", pulse_server)
            .env("OPENAI_API_KEY", api_key)
            .env("XDG_DATA_HOME", data)
            .env_remove("DBUS_SESSION_BUS_ADDRESS");
        App::launch(command, log)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The visible window titled `title`, if there is one.
pub fn window(title: &str) -> Option<String> {
    let out = Command::new("xdotool")
        .args(["search", "--onlyvisible", "--name"])
        .arg(format!("^{title}$"))
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(str::to_owned)
}

/// The `session.jsonl` of every published session folder in `root` (staging folders are
/// hidden, named with a leading dot, until their rename).
pub fn sessions(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path().join("session.jsonl"))
        .filter(|p| p.is_file())
        .collect()
}

pub fn persyk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_persyk"))
        .args(args)
        .output()
        .expect("run persyk")
}

/// Reads a WAV with Python's `wave` module: rate, channels, sample width, frames, and the
/// RMS in dBFS of the quietest and the loudest 100 ms window.
pub const WAV_FACTS: &str = r#"
import array, json, math, sys, wave
with wave.open(sys.argv[1], "rb") as w:
    rate, channels, width, frames = w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()
    samples = array.array("h", w.readframes(frames))
window = rate // 10
levels = []
for start in range(0, len(samples) - window + 1, window):
    chunk = samples[start:start + window]
    rms = math.sqrt(sum(s * s for s in chunk) / window)
    levels.append(20 * math.log10(max(rms, 1e-9) / 32768))
print(json.dumps({"rate": rate, "channels": channels, "width": width, "frames": frames,
                  "quietest_db": min(levels), "loudest_db": max(levels)}))
"#;
