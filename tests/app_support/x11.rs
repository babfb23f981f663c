//! A real X server for the app's tests: an Xvfb display, running a test again in a child on
//! it, keys pressed as a user would (xdotool), and `tests/paste_target.py`, a Tk window
//! whose entry holds keyboard focus like the app a user dictates into.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// An Xvfb server on a free display (`.1`, e.g. `:7`), killed on drop.
pub struct Xvfb(Child, pub String);

impl Xvfb {
    pub fn start() -> Option<Xvfb> {
        // -noreset: without it Xvfb resets whenever its last client disconnects, and a client
        // that connects during the reset is refused ("Failed to open connection to X
        // server"): the accessibility bus's launcher let go of the display just as the app
        // connected, once, in a clean-clone CI run (scripts/smoke-app learned it first).
        let mut child = Command::new("Xvfb")
            .args(["-displayfd", "1", "-screen", "0", "1024x768x24"])
            .args(["-nolisten", "tcp", "-noreset"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("Xvfb reports its display");
        let n: u32 = line.trim().parse().expect("a display number");
        Some(Xvfb(child, format!(":{n}")))
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn have(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs test `name` again in a child on a fresh Xvfb display; `true` in the child.
pub fn in_xvfb_child(name: &str) -> bool {
    if std::env::var_os("PERSYK_TEST_XVFB_CHILD").is_some() {
        return true;
    }
    // `xdotool version` fails without a display: only whether it runs at all counts.
    let xdotool = Command::new("xdotool").arg("version").output().is_ok();
    if !xdotool || !have("python3", &["-c", "import tkinter"]) {
        eprintln!("SKIPPED: needs xdotool and python3-tk (scripts/setup installs them)");
        return false;
    }
    let Some(x) = Xvfb::start() else {
        eprintln!("SKIPPED: Xvfb is not installed (scripts/setup installs it)");
        return false;
    };
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("PERSYK_TEST_XVFB_CHILD", "1")
        .env("DISPLAY", &x.1)
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("XDG_SESSION_TYPE")
        .output()
        .expect("run the test in a child");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the test failed on Xvfb:\n{text}");
    assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
    false
}

/// Presses a key combination on the X server of `DISPLAY`, as a user would.
pub fn press(keys: &str) {
    let ok = Command::new("xdotool")
        .args(["key", keys])
        .status()
        .expect("xdotool");
    assert!(ok.success(), "xdotool key {keys}");
}

/// The Tk window with the focused entry.
pub struct Target {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Target {
    pub fn start() -> Target {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/paste_target.py");
        let mut child = Command::new("python3")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 tests/paste_target.py");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut t = Target {
            child,
            stdin,
            stdout,
        };
        assert_eq!(t.line(), "\"ready\"", "the Tk entry never got focus");
        t
    }

    pub fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("the Tk target answers");
        line.trim().to_owned()
    }

    pub fn ask(&mut self, command: &str) -> serde_json::Value {
        writeln!(self.stdin, "{command}").expect("the Tk target reads");
        serde_json::from_str(&self.line()).expect("a JSON answer")
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Presses (`down`) or releases the key whose first keysym is `keysym` through XTest, as a
/// keyboard would: that key alone. (`xdotool keydown Alt_R` also presses Alt_L first, which
/// no keyboard does.)
#[cfg(target_os = "linux")]
#[allow(dead_code)]
pub fn key_event(keysym: u32, down: bool) {
    use x11rb::connection::Connection;
    use x11rb::protocol::xproto::{ConnectionExt as _, KEY_PRESS_EVENT, KEY_RELEASE_EVENT};
    use x11rb::protocol::xtest::ConnectionExt as _;
    use x11rb::wrapper::ConnectionExt as _;
    let (conn, screen) = x11rb::connect(None).expect("an X display");
    let setup = conn.setup();
    let (min, max) = (setup.min_keycode, setup.max_keycode);
    let root = setup.roots[screen].root;
    let map = conn
        .get_keyboard_mapping(min, max - min + 1)
        .unwrap()
        .reply()
        .unwrap();
    let per = usize::from(map.keysyms_per_keycode);
    let index = map
        .keysyms
        .chunks(per)
        .position(|syms| syms.first() == Some(&keysym))
        .unwrap_or_else(|| panic!("no keycode has keysym {keysym:#x} first"));
    let keycode = min + u8::try_from(index).unwrap();
    let kind = if down {
        KEY_PRESS_EVENT
    } else {
        KEY_RELEASE_EVENT
    };
    conn.xtest_fake_input(kind, keycode, 0, root, 0, 0, 0)
        .unwrap()
        .check()
        .unwrap();
    conn.sync().unwrap();
}

/// `Alt_R`, the keysym of the Right Alt key.
#[allow(dead_code)]
pub const ALT_R: u32 = 0xffea;
