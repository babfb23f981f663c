//! `persyk fake-provider` as a child process, for tests that drive the CLI against it, and
//! the scenario files it plays (`tests/scenarios/`).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use persyk::realtime::fake::Scenario;

/// `tests/scenarios/<name>.json`.
pub fn scenario_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/scenarios")
        .join(format!("{name}.json"))
}

/// `tests/scenarios/<name>.json`, parsed.
pub fn scenario(name: &str) -> Scenario {
    Scenario::from_file(&scenario_path(name)).expect("scenario parses")
}

/// The fake Realtime server running `tests/scenarios/<scenario>.json` on a free port;
/// killed when dropped.
pub struct FakeProvider {
    child: Child,
    /// The `--provider-url` to give `persyk transcribe` (`ws://127.0.0.1:PORT/v1`).
    pub url: String,
}

impl FakeProvider {
    pub fn start(scenario: &str) -> FakeProvider {
        FakeProvider::start_file(&scenario_path(scenario))
    }

    /// The fake running the scenario file at `path`.
    pub fn start_file(path: &Path) -> FakeProvider {
        let mut child = Command::new(env!("CARGO_BIN_EXE_persyk"))
            .args(["fake-provider", "--scenario"])
            .arg(path)
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("fake");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("fake address");
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("ws://"))
            .expect("ws url")
            .trim_end_matches("/realtime")
            .to_owned();
        FakeProvider { child, url }
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `persyk fake-provider` writing its dump, which exits once its scenario has played; its
/// stdout is read to the end on a thread. Killed if dropped before [`DumpingFake::finish`].
pub struct DumpingFake {
    child: Child,
    reader: Option<JoinHandle<Vec<String>>>,
    /// Where it listens (from its first line).
    pub addr: SocketAddr,
}

impl DumpingFake {
    /// Starts the fake on the scenario file `scenario`, dumping to `dump`, with `extra`
    /// arguments (`--full-audio`); waits up to `wait` for it to announce its address.
    pub fn start(scenario: &Path, dump: &Path, extra: &[&str], wait: Duration) -> DumpingFake {
        let mut child = Command::new(env!("CARGO_BIN_EXE_persyk"))
            .args(["fake-provider", "--port", "0", "--scenario"])
            .arg(scenario)
            .arg("--dump")
            .arg(dump)
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("run persyk fake-provider");
        let stdout = child.stdout.take().expect("stdout");
        // Read stdout to the end on a thread: the first line announces the address.
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            lines.map_while(Result::ok).collect::<Vec<_>>()
        });
        let first = rx
            .recv_timeout(wait)
            .expect("the fake announces its address in time")
            .expect("a first line")
            .expect("read stdout");
        let addr: SocketAddr = first
            .split("ws://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {first:?}"));
        DumpingFake {
            child,
            reader: Some(reader),
            addr,
        }
    }

    /// Waits up to `wait` for the fake to exit (a panic if it does not): its status and the
    /// rest of what it printed.
    pub fn finish(mut self, wait: Duration) -> (ExitStatus, Vec<String>) {
        let deadline = Instant::now() + wait;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for the fake") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("persyk fake-provider did not exit");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let rest = self
            .reader
            .take()
            .expect("finished once")
            .join()
            .expect("reader thread");
        (status, rest)
    }
}

impl Drop for DumpingFake {
    fn drop(&mut self) {
        if self.reader.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
