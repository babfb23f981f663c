//! `persyk fake-provider` as a child process, for tests that drive the CLI against it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The fake Realtime server running `tests/scenarios/<scenario>.json` on a free port;
/// killed when dropped.
pub struct FakeProvider {
    child: Child,
    /// The `--provider-url` to give `persyk transcribe` (`ws://127.0.0.1:PORT/v1`).
    pub url: String,
}

impl FakeProvider {
    pub fn start(scenario: &str) -> FakeProvider {
        FakeProvider::start_file(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/scenarios")
                .join(format!("{scenario}.json")),
        )
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
