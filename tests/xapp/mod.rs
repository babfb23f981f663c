//! The real `persyk` app on a throw-away desktop, for tests and benches that drive it as a
//! user would: an X server (Xvfb), a private session bus with a stand-in
//! `org.kde.StatusNotifierWatcher` (so the tray icon exists and `--hidden` keeps the window
//! hidden), a private PulseAudio server whose default source is a 440 Hz sine (the
//! microphone), `persyk fake-provider` on loopback, and a Tk text field of "another app"
//! that has keyboard focus. Everything is killed on drop.
//!
//! Needs Xvfb, xdotool, dbus-daemon, pulseaudio, pactl and python3 with tkinter
//! (`scripts/setup` installs them); [`Desktop::start`] returns `None` and says what is
//! missing otherwise.
#![allow(dead_code)]

#[path = "../fake_cli/mod.rs"]
mod fake_cli;
#[path = "../support/pulse.rs"]
mod pulse;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_cli::FakeProvider;
use pulse::PulseServer;

/// A guard against hangs only (never a performance threshold).
pub const WAIT: Duration = Duration::from_secs(30);

/// The title the indicator window has (`src/app/ui/indicator.rs`).
pub const INDICATOR_TITLE: &str = "Persyk recording";

type Items = Arc<Mutex<Vec<String>>>;

/// A stand-in for the desktop's tray host: it accepts registrations and says a host exists.
struct Watcher(Items);

#[zbus::interface(name = "org.kde.StatusNotifierWatcher")]
impl Watcher {
    fn register_status_notifier_item(&self, service: &str) {
        self.0.lock().unwrap().push(service.to_owned());
    }

    fn register_status_notifier_host(&self, _service: &str) {}

    #[zbus(property)]
    fn registered_status_notifier_items(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    #[zbus(property)]
    fn is_status_notifier_host_registered(&self) -> bool {
        true
    }

    #[zbus(property)]
    fn protocol_version(&self) -> i32 {
        0
    }
}

/// Notifications the stand-in server got: id, summary and actions.
type Notified = Arc<Mutex<Vec<(u32, String, Vec<String>)>>>;

/// A stand-in for the desktop's notification server (only when a test asks for it,
/// [`Desktop::serve_notifications`]): it keeps what it is sent and never closes a banner.
struct Notifications(Notified);

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl Notifications {
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &self,
        _app_name: &str,
        _replaces_id: u32,
        _app_icon: &str,
        summary: &str,
        _body: &str,
        actions: Vec<String>,
        _hints: std::collections::HashMap<String, zbus::zvariant::OwnedValue>,
        _expire_timeout: i32,
    ) -> u32 {
        let mut sent = self.0.lock().unwrap();
        let id = sent.len() as u32 + 1;
        sent.push((id, summary.to_owned(), actions));
        id
    }

    fn get_capabilities(&self) -> Vec<String> {
        vec!["actions".into(), "body".into()]
    }

    fn get_server_information(&self) -> (String, String, String, String) {
        (
            "persyk-test".into(),
            "persyk".into(),
            "1".into(),
            "1.2".into(),
        )
    }

    fn close_notification(&self, _id: u32) {}
}

/// The desktop; see the module doc.
pub struct Desktop {
    pub dir: tempfile::TempDir,
    pub display: String,
    pub bus: String,
    pub pulse: String,
    pub provider_url: String,
    /// Xvfb and the session bus, killed in reverse order on drop.
    children: Vec<Child>,
    /// Stopped on drop before the children, the fake first (as started, in reverse).
    pulse_server: Option<PulseServer>,
    fake: Option<FakeProvider>,
    watcher: Option<zbus::blocking::Connection>,
    items: Items,
    /// Tray registrations already returned by [`Desktop::wait_tray`].
    items_seen: Mutex<usize>,
    notified: Notified,
}

fn missing() -> Vec<&'static str> {
    let mut out = Vec::new();
    for tool in ["Xvfb", "xdotool", "dbus-daemon", "pulseaudio", "pactl"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map_or(true, |o| !o.status.success())
        {
            out.push(tool);
        }
    }
    if Command::new("python3")
        .args(["-c", "import tkinter"])
        .output()
        .map_or(true, |o| !o.status.success())
    {
        out.push("python3-tk");
    }
    out
}

/// Spawns `cmd` and returns it with the first line of its stdout.
fn spawn_with_line(mut cmd: Command, what: &str) -> (Child, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} could not be started: {e}"));
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("{what} said nothing: {e}"));
    (child, line.trim().to_owned())
}

impl Desktop {
    /// Starts everything, with the fake provider playing `scenario` (JSON text). `None`
    /// (and a note on stderr) when a tool is missing.
    pub fn start(scenario: &str) -> Option<Desktop> {
        let missing = missing();
        if !missing.is_empty() {
            eprintln!(
                "SKIPPED: missing {} (scripts/setup installs them)",
                missing.join(", ")
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut children = Vec::new();

        let mut xvfb = Command::new("Xvfb");
        xvfb.args([
            "-displayfd",
            "1",
            "-screen",
            "0",
            "1280x800x24",
            "-nolisten",
            "tcp",
            "-noreset",
        ])
        .stderr(Stdio::null());
        let (child, n) = spawn_with_line(xvfb, "Xvfb");
        children.push(child);
        let display = format!(":{n}");

        let mut bus = Command::new("dbus-daemon");
        bus.args(["--session", "--nofork", "--print-address=1"])
            .stderr(Stdio::null());
        let (child, bus) = spawn_with_line(bus, "dbus-daemon");
        children.push(child);
        let items = Items::default();
        let watcher = zbus::blocking::connection::Builder::address(bus.as_str())
            .unwrap()
            .serve_at("/StatusNotifierWatcher", Watcher(items.clone()))
            .unwrap()
            .name("org.kde.StatusNotifierWatcher")
            .unwrap()
            .build()
            .expect("the tray host stand-in on the private bus");

        let pulse_server = PulseServer::start_sine(&dir.path().join("pulse"));
        let pulse = pulse_server.server_env();

        let scenario_path = dir.path().join("scenario.json");
        std::fs::write(&scenario_path, scenario).unwrap();
        let fake = FakeProvider::start_file(&scenario_path);
        let provider_url = fake.url.clone();

        Some(Desktop {
            dir,
            display,
            bus,
            pulse,
            provider_url,
            children,
            pulse_server: Some(pulse_server),
            fake: Some(fake),
            watcher: Some(watcher),
            items,
            items_seen: Mutex::new(0),
            notified: Notified::default(),
        })
    }

    /// The sessions folder the app writes to.
    pub fn sessions(&self) -> PathBuf {
        self.dir.path().join("sessions")
    }

    /// Starts `persyk ARGS` on this desktop with `feedback.indicator` as given (start and
    /// stop sounds off: there is no output device), the default hotkey Alt+Space, and the
    /// fake provider with server turns.
    pub fn launch(&self, indicator: bool, args: &[&str]) -> Child {
        self.launch_full(indicator, args, &[], "app.log")
    }

    /// [`Desktop::launch`] with more environment variables.
    pub fn launch_with_env(&self, indicator: bool, args: &[&str], env: &[(&str, &str)]) -> Child {
        self.launch_full(indicator, args, env, "app.log")
    }

    /// [`Desktop::launch`] with stderr to `log` in the desktop's folder (a second app of one
    /// desktop must not truncate the first one's log).
    pub fn launch_logged(&self, indicator: bool, args: &[&str], log: &str) -> Child {
        self.launch_full(indicator, args, &[], log)
    }

    /// [`Desktop::launch`] with more environment variables and stderr to `log`.
    pub fn launch_full(
        &self,
        indicator: bool,
        args: &[&str],
        env: &[(&str, &str)],
        log: &str,
    ) -> Child {
        let home = self.dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(self.sessions()).unwrap();
        let config = self.dir.path().join("settings.json");
        let settings = serde_json::json!({
            "sessions": {"directory": self.sessions()},
            "provider": {"baseUrl": self.provider_url, "transcriptionModel": "gpt-transcribe"},
            "hotkey": {"keys": "Alt+Space"},
            "feedback": {"sounds": false, "indicator": indicator},
        });
        std::fs::write(&config, settings.to_string()).unwrap();
        Command::new(env!("CARGO_BIN_EXE_persyk"))
            .args(args)
            .env_remove("WAYLAND_DISPLAY")
            .env("DISPLAY", &self.display)
            .env("DBUS_SESSION_BUS_ADDRESS", &self.bus)
            .env("PULSE_SERVER", &self.pulse)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env(
                "XDG_RUNTIME_DIR",
                self.pulse_server.as_ref().expect("running").run_dir(),
            )
            .env("PERSYK_CONFIG", &config)
            .env("OPENAI_API_KEY", "sk-test")
            .env("RUST_BACKTRACE", "1")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.path().join(log)).unwrap())
            .spawn()
            .expect("persyk app")
    }

    /// What the app wrote to stderr so far.
    pub fn app_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("app.log")).unwrap_or_default()
    }

    /// Waits for the next app's tray icon to register; returns its bus name.
    pub fn wait_tray(&self) -> String {
        let start = Instant::now();
        let mut seen = self.items_seen.lock().unwrap();
        loop {
            let items = self.items.lock().unwrap();
            if items.len() > *seen {
                *seen = items.len();
                return items[items.len() - 1].clone();
            }
            drop(items);
            assert!(
                start.elapsed() < WAIT,
                "no tray icon registered; app log:\n{}",
                self.app_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A left click on the tray icon `item` (what the panel sends: `Activate`).
    pub fn click_tray(&self, item: &str) {
        let conn = self.watcher.as_ref().expect("the bus connection");
        let proxy = zbus::blocking::Proxy::new(
            conn,
            item.to_owned(),
            "/StatusNotifierItem",
            "org.kde.StatusNotifierItem",
        )
        .unwrap();
        let _: () = proxy.call("Activate", &(0i32, 0i32)).expect("Activate");
    }

    /// Clicks the entry labelled `label` in the tray icon `item`'s menu, as the panel does:
    /// the dbusmenu `Event(id, "clicked")` of the entry found in `GetLayout`.
    pub fn click_menu(&self, item: &str, label: &str) {
        use std::collections::HashMap;
        use zbus::zvariant::{OwnedObjectPath, OwnedValue, Structure, Value};
        let conn = self.watcher.as_ref().expect("the bus connection");
        let sni = zbus::blocking::Proxy::new(
            conn,
            item.to_owned(),
            "/StatusNotifierItem",
            "org.kde.StatusNotifierItem",
        )
        .unwrap();
        let path: OwnedObjectPath = sni.get_property("Menu").expect("the item's menu path");
        let menu =
            zbus::blocking::Proxy::new(conn, item.to_owned(), path, "com.canonical.dbusmenu")
                .unwrap();
        type Node = (i32, HashMap<String, OwnedValue>, Vec<OwnedValue>);
        let (_revision, root): (u32, Node) = menu
            .call("GetLayout", &(0i32, -1i32, Vec::<String>::new()))
            .expect("GetLayout");
        fn find(node: &Node, label: &str) -> Option<i32> {
            let here = node
                .1
                .get("label")
                .and_then(|v| <&str>::try_from(&**v).ok())
                .is_some_and(|l| l == label);
            if here {
                return Some(node.0);
            }
            node.2.iter().find_map(|child| {
                let s = Structure::try_from(Value::try_from(child).ok()?).ok()?;
                let child: Node = s.try_into().ok()?;
                find(&child, label)
            })
        }
        let id = find(&root, label).unwrap_or_else(|| panic!("no menu entry {label:?}"));
        let _: () = menu
            .call("Event", &(id, "clicked", Value::I32(0), 0u32))
            .expect("Event");
    }

    /// Serves `org.freedesktop.Notifications` on the private bus from now on.
    pub fn serve_notifications(&self) {
        let conn = self.watcher.as_ref().expect("the bus connection");
        conn.object_server()
            .at(
                "/org/freedesktop/Notifications",
                Notifications(self.notified.clone()),
            )
            .expect("serve notifications");
        conn.request_name("org.freedesktop.Notifications")
            .expect("the notification server's name");
    }

    /// Waits for the next notification; returns its id, summary and actions.
    pub fn wait_notification(&self) -> (u32, String, Vec<String>) {
        let start = Instant::now();
        loop {
            if let Some(n) = self.notified.lock().unwrap().first().cloned() {
                return n;
            }
            assert!(
                start.elapsed() < WAIT,
                "no notification; app log:\n{}",
                self.app_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Clicks notification `id` (what the server says then: its default action invoked).
    pub fn click_notification(&self, id: u32) {
        let conn = self.watcher.as_ref().expect("the bus connection");
        conn.emit_signal(
            None::<&str>,
            "/org/freedesktop/Notifications",
            "org.freedesktop.Notifications",
            "ActionInvoked",
            &(id, "default"),
        )
        .expect("ActionInvoked");
    }

    /// Runs xdotool on this display.
    pub fn xdotool(&self, args: &[&str]) -> Output {
        Command::new("xdotool")
            .args(args)
            .env("DISPLAY", &self.display)
            .output()
            .expect("xdotool")
    }

    /// The visible windows whose title is exactly `title`.
    pub fn windows(&self, title: &str) -> Vec<String> {
        let pattern = format!("^{title}$");
        let out = self.xdotool(&["search", "--onlyvisible", "--name", &pattern]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The window with keyboard focus.
    pub fn focus(&self) -> String {
        let out = self.xdotool(&["getwindowfocus"]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// `(x, y, width, height)` of window `id`.
    pub fn geometry(&self, id: &str) -> (i32, i32, i32, i32) {
        let out = self.xdotool(&["getwindowgeometry", "--shell", id]);
        let text = String::from_utf8_lossy(&out.stdout);
        let get = |k: &str| -> i32 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("no {k} in {text}"))
        };
        (get("X"), get("Y"), get("WIDTH"), get("HEIGHT"))
    }

    /// Opens a Tk window with a text field and gives it keyboard focus (another app the
    /// user types in); returns it once it has focus.
    pub fn tk_entry(&self) -> TkEntry {
        let out = self.dir.path().join("entry.txt");
        let script = r#"
import sys, tkinter as tk
out = sys.argv[1]
root = tk.Tk()
root.title("Another app")
root.geometry("400x60+40+40")
text = tk.StringVar()
def save(*_):
    with open(out + ".tmp", "w") as f:
        f.write(text.get())
    import os
    os.replace(out + ".tmp", out)
text.trace_add("write", save)
entry = tk.Entry(root, textvariable=text)
entry.pack(fill="x", padx=8, pady=8)
def ready():
    entry.focus_force()
    root.update()
    print("ready", flush=True)
root.after(300, ready)
root.mainloop()
"#;
        let mut cmd = Command::new("python3");
        cmd.args(["-c", script])
            .arg(&out)
            .env("DISPLAY", &self.display)
            .stderr(Stdio::null());
        let (child, line) = spawn_with_line(cmd, "the Tk text field");
        assert_eq!(line, "ready");
        TkEntry { child, out }
    }
}

impl Drop for Desktop {
    fn drop(&mut self) {
        self.watcher.take();
        self.fake.take();
        self.pulse_server.take();
        while let Some(mut c) = self.children.pop() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Another app's text field (python3 Tk), killed on drop.
pub struct TkEntry {
    child: Child,
    out: PathBuf,
}

impl TkEntry {
    /// What the field holds.
    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
}

impl Drop for TkEntry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of every `session.jsonl` under `root`.
pub fn sessions(root: &Path) -> Vec<String> {
    std::fs::read_dir(root)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read_to_string(e.path().join("session.jsonl")).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Plain dictation (server turns), one scripted connection per recording (up to six).
pub const RECORDINGS: &str = r#"{"name": "indicator", "connections": [
    {"utterances": [{"end_ms": 400, "transcript": "One.", "delay_ms": 50}], "close_after_commit_ms": 200},
    {"utterances": [{"end_ms": 400, "transcript": "Two.", "delay_ms": 50}], "close_after_commit_ms": 200},
    {"utterances": [{"end_ms": 400, "transcript": "Three.", "delay_ms": 50}], "close_after_commit_ms": 200},
    {"utterances": [{"end_ms": 400, "transcript": "Four.", "delay_ms": 50}], "close_after_commit_ms": 200},
    {"utterances": [{"end_ms": 400, "transcript": "Five.", "delay_ms": 50}], "close_after_commit_ms": 200},
    {"utterances": [{"end_ms": 400, "transcript": "Six.", "delay_ms": 50}], "close_after_commit_ms": 200}]}"#;

/// The process's CPU time (user + system) so far, from `/proc/PID/stat`.
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let hz = clock_ticks();
    Duration::from_secs_f64(ticks as f64 / hz as f64)
}

fn clock_ticks() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}
