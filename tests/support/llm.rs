//! The real small language model of `scripts/fetch-test-llm` (SmolLM2-135M-Instruct, Q4_1),
//! served on loopback by `tests/llm_server/server.mjs` through node-llama-cpp: a real
//! OpenAI-compatible model server for the clean-up tests, in a child process that is killed
//! when the [`LlmServer`] is dropped.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The model file's name inside the cache.
pub const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// How long loading the model may take before the test gives up.
const START_DEADLINE: Duration = Duration::from_secs(120);

/// Where `scripts/fetch-test-llm` keeps the model and the server's packages.
pub fn cache() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-llm")
}

pub struct LlmServer {
    child: Child,
    port: u16,
}

impl LlmServer {
    /// Starts the server on a free loopback port, once the model is loaded. `None`, with a
    /// note, when the cache or Node.js is missing — unless `PERSYK_REQUIRE_TEST_LLM` is set
    /// (CI sets it), which makes that a failure.
    pub fn start() -> Option<LlmServer> {
        let required = std::env::var_os("PERSYK_REQUIRE_TEST_LLM").is_some();
        let model = cache().join(MODEL);
        let script = cache().join("server/server.mjs");
        let installed = cache().join("server/node_modules/node-llama-cpp");
        let node = Command::new("node").arg("--version").output();
        if !model.is_file() || !script.is_file() || !installed.is_dir() || node.is_err() {
            let why = "the test language model or Node.js is missing: run scripts/fetch-test-llm \
                       (scripts/setup does)";
            assert!(!required, "{why}");
            eprintln!("skipped: {why}");
            return None;
        }
        let mut child = Command::new("node")
            .arg(&script)
            .arg("--model")
            .arg(&model)
            .arg("--port")
            .arg("0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the model server");
        let stdout = child.stdout.take().expect("server stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(port) = line.strip_prefix("listening ") {
                    let _ = tx.send(port.trim().parse::<u16>().ok());
                }
            }
        });
        match rx.recv_timeout(START_DEADLINE) {
            Ok(Some(port)) => Some(LlmServer { child, port }),
            other => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the model server did not start: {other:?}");
            }
        }
    }

    /// The base URL, as a clean-up server is configured (`…/v1`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for LlmServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
