//! The OpenAI event validator (`scripts/validate-realtime-events.py --serve`), one process per
//! test binary: importing openai takes a second, each dump then takes milliseconds. It exits
//! when the test binary does and its stdin closes.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError, mpsc};
use std::time::Duration;

use serde_json::Value;

fn python_has_openai() -> bool {
    Command::new("python3")
        .args(["-c", "import openai"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

struct Validator {
    stdin: ChildStdin,
    answers: mpsc::Receiver<String>,
}

fn validator() -> Option<&'static Mutex<Validator>> {
    static VALIDATOR: OnceLock<Option<Mutex<Validator>>> = OnceLock::new();
    VALIDATOR
        .get_or_init(|| {
            if !python_has_openai() {
                return None;
            }
            let script =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/validate-realtime-events.py");
            let mut child = Command::new("python3")
                .arg(script)
                .arg("--serve")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("start the validator");
            let stdin = child.stdin.take().expect("validator stdin");
            let stdout = child.stdout.take().expect("validator stdout");
            let (tx, answers) = mpsc::channel();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(stdout)
                    .lines()
                    .map_while(Result::ok)
                {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
                let _ = child.wait();
            });
            Some(Mutex::new(Validator { stdin, answers }))
        })
        .as_ref()
}

/// The validator's verdict on a JSONL dump of protocol events (ok, report), without
/// asserting it. `None` when python3 cannot import openai.
pub fn verdict(path: &Path) -> Option<(bool, String)> {
    let validator = validator()?;
    let mut v = validator.lock().unwrap_or_else(PoisonError::into_inner);
    writeln!(v.stdin, "{}", path.display()).expect("ask the validator");
    v.stdin.flush().expect("ask the validator");
    let line = v
        .answers
        .recv_timeout(Duration::from_secs(60))
        .expect("the validator answers within 60 s");
    let answer: Value = serde_json::from_str(&line).expect("the validator answers JSON");
    Some((
        answer["ok"] == true,
        answer["report"].as_str().unwrap_or("").to_owned(),
    ))
}

/// Validates a JSONL dump of protocol events with the openai package's models and returns
/// the validator's report; asserts that every event validates. `None` (and a note on
/// stderr) when python3 cannot import openai.
pub fn validate_dump(path: &Path) -> Option<String> {
    let Some((ok, report)) = verdict(path) else {
        eprintln!(
            "note: python3 cannot import openai; skipping the event validation of {} \
             (run scripts/setup-python)",
            path.display()
        );
        return None;
    };
    assert!(ok, "{} does not validate:\n{report}", path.display());
    Some(report)
}
