//! Regressions of the new surfaces' hardening (issue #39): each test reproduces what the
//! adversarial review did on the release binary or the library — a proxy in the environment
//! carrying "on this Mac" traffic, a crafted WAV that aborted playback, a redirecting model
//! server, a reply full of terminal controls, a forged model stamp, credentials in a URL, an
//! old signed feed replayed — and fails if it comes back.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::realtime::support::chat::{ChatServer, Reply};

/// A server on loopback that records the first line of every request it gets (`CONNECT
/// host:443 HTTP/1.1`, `GET /path HTTP/1.1`) and answers each with `status`, or with a
/// redirect to `location` when one is given.
struct Recorder {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn start(status: u16, location: Option<String>) -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (log, location) = (log.clone(), location.clone());
                std::thread::spawn(move || answer(stream, status, location.as_deref(), &log));
            }
        });
        Recorder { port, seen }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().expect("lock").clone()
    }
}

fn answer(stream: TcpStream, status: u16, location: Option<&str>, log: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut first = String::new();
    if reader.read_line(&mut first).unwrap_or(0) == 0 {
        return;
    }
    log.lock().expect("lock").push(first.trim().to_owned());
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    let _ = reader.read_exact(&mut body);
    let mut s = stream;
    let extra = location.map_or(String::new(), |l| format!("Location: {l}\r\n"));
    let _ = write!(
        s,
        "HTTP/1.1 {status} X\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
}

/// `persyk ARGS` with `stdin` and these environment variables, settings nowhere.
fn persyk(args: &[&str], stdin: &str, env: &[(&str, String)]) -> Output {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut c = Command::new(env!("CARGO_BIN_EXE_persyk"));
    c.args(args)
        .env("PERSYK_CONFIG", tmp.path().join("settings.json"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("run persyk");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("stdin");
    child.wait_with_output().expect("persyk")
}

const SPOKEN: &str = "so um I think we should move the meeting to Friday";
const TIDY: &str = "I think we should move the meeting to Friday.";

fn proxy_env(proxy: &Recorder) -> Vec<(&'static str, String)> {
    [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ]
    .into_iter()
    .map(|k| (k, proxy.url()))
    .collect()
}

fn cleanup_json(server: &str, env: &[(&str, String)]) -> Value {
    let out = persyk(
        &[
            "cleanup", "--json", "--mode", "tidy", "--model", "m", "--server", server,
        ],
        SPOKEN,
        env,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// Item 1: with every proxy variable pointing at a recorder, a clean-up on loopback and a
/// model download from loopback go straight to their server; the proxy sees nothing. A
/// remote server does go through the proxy, as a CONNECT tunnel that shows it the host only.
#[test]
fn issue39_01_a_proxy_never_carries_loopback_traffic() {
    let proxy = Recorder::start(502, None);
    let env = proxy_env(&proxy);
    let model = ChatServer::start(vec![Reply::Content(TIDY.into())]);
    let v = cleanup_json(&model.url(), &env);
    assert_eq!(v["text"], TIDY);
    assert_eq!(model.requests().len(), 1);
    let models = Recorder::start(404, None);
    let dir = tempfile::tempdir().expect("tmp");
    let mut env_models = env.clone();
    env_models.push(("PERSYK_MODELS_DIR", dir.path().display().to_string()));
    env_models.push(("PERSYK_MODELS_URL", format!("{}/models", models.url())));
    let out = persyk(&["models", "download", "tiny.en"], "", &env_models);
    assert!(!out.status.success());
    assert_eq!(models.seen().len(), 1, "the download asked its own server");
    assert!(proxy.seen().is_empty(), "the proxy saw {:?}", proxy.seen());
    // A remote server: through the proxy, tunnelled.
    let v = cleanup_json("https://cleanup.example.invalid/v1", &env);
    assert_eq!(v["chosen"], "spoken");
    assert_eq!(
        proxy.seen(),
        ["CONNECT cleanup.example.invalid:443 HTTP/1.1"]
    );
}

/// Item 4: a clean-up server that redirects is not followed: the reply is an HTTP status,
/// the words go out as spoken, and the redirect's target hears nothing.
#[test]
fn issue39_04_the_clean_up_follows_no_redirect() {
    let target = ChatServer::start(vec![Reply::Content("Something else entirely.".into())]);
    let redirect = Recorder::start(307, Some(format!("{}/chat/completions", target.url())));
    let v = cleanup_json(&format!("{}/v1", redirect.url()), &[]);
    assert_eq!(v["chosen"], "spoken");
    assert_eq!(v["reason"], "cleanup.http-status");
    assert_eq!(redirect.seen().len(), 1);
    assert!(target.requests().is_empty());
}

/// Item 5: NUL, ESC sequences, BEL, CR and a right-to-left override in a reply never reach
/// what is pasted; stored text with them is shown escaped by `persyk context`.
#[test]
fn issue39_05_controls_in_a_reply_are_stripped_and_shown_escaped() {
    let hostile = "I think\u{0} we should\u{7} move the meeting\r to \u{202E}Friday.";
    let model = ChatServer::start(vec![Reply::Content(hostile.into())]);
    let v = cleanup_json(&model.url(), &[]);
    assert_eq!(v["text"], TIDY);
    // An escape sequence leaves its printable tail, which the guard then refuses: what is
    // pasted is the spoken words, and the model's text holds no control either.
    let escape = "I think we should \u{1b}[2Jmove the meeting to Friday.";
    let model = ChatServer::start(vec![Reply::Content(escape.into())]);
    let v = cleanup_json(&model.url(), &[]);
    assert_eq!(v["text"], SPOKEN);
    let seen = v["modelText"].as_str().expect("model text");
    assert!(!seen.chars().any(|c| c.is_control()), "{seen:?}");

    let (_tmp, dir, mut c) = crate::realtime::support::fresh_session();
    crate::realtime::support::say(&mut c, "clear \u{1b}[2J the \u{202E}screen\u{7}");
    let out = Command::new(env!("CARGO_BIN_EXE_persyk"))
        .arg("context")
        .arg(&dir)
        .output()
        .expect("persyk context");
    let shown = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        shown.contains("clear \\u{1B}[2J the \\u{202E}screen\\u{7}"),
        "{shown}"
    );
    assert!(!shown.contains('\u{1b}') && !shown.contains('\u{202E}') && !shown.contains('\u{7}'));
}

/// Item 2: a WAV whose header claims two billion samples a second, on a sparse 64 GiB file,
/// is refused with a code — no 40 GB allocation, no abort — and so is one with no rate.
#[test]
fn issue39_02_a_crafted_wav_is_refused_without_aborting() {
    use persyk::audio::clip::{ClipError, Span, read_clip_from};
    let tmp = tempfile::tempdir().expect("tmp");
    for rate in [2_000_000_000u32, 1, 7_999, 192_001] {
        let path = tmp.path().join(format!("r{rate}.wav"));
        let mut header = Vec::new();
        header.extend_from_slice(b"RIFF");
        header.extend_from_slice(&u32::MAX.to_le_bytes());
        header.extend_from_slice(b"WAVEfmt ");
        header.extend_from_slice(&16u32.to_le_bytes());
        header.extend_from_slice(&1u16.to_le_bytes()); // PCM
        header.extend_from_slice(&1u16.to_le_bytes()); // mono
        header.extend_from_slice(&rate.to_le_bytes());
        header.extend_from_slice(&rate.wrapping_mul(2).to_le_bytes());
        header.extend_from_slice(&2u16.to_le_bytes());
        header.extend_from_slice(&16u16.to_le_bytes());
        header.extend_from_slice(b"data");
        header.extend_from_slice(&(u32::MAX - 64).to_le_bytes());
        std::fs::write(&path, &header).expect("write");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        f.set_len(64 << 30).expect("sparse 64 GiB");
        drop(f);
        let file = std::fs::File::open(&path).expect("open");
        let got = read_clip_from(&file, Span::Whole, 30 * 60 * 1000);
        assert!(
            matches!(got, Err(ClipError::WrongFormat)),
            "{rate}: {got:?}"
        );
    }
}

/// Item 7: in a folder others may write, nothing is trusted (`models.unsafe-folder`); in a
/// private one, a zero-filled file beside a forged stamp (the old record format, the
/// attacker's guess at the new one) is not listed as downloaded.
#[test]
fn issue39_07_a_forged_stamp_or_a_shared_folder_is_not_believed() {
    let tiny = persyk::local::models::find("tiny.en").expect("tiny.en in the catalog");
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("models");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let file = dir.join("ggml-tiny.en.bin");
    std::fs::File::create(&file)
        .and_then(|f| f.set_len(tiny.bytes))
        .expect("zeros");
    let meta = std::fs::metadata(&file).expect("meta");
    use std::os::unix::fs::MetadataExt;
    // The old record exactly as the previous version wrote it (believed before the fix), and
    // the new format with a status-change time the file does not have (a file rewritten in
    // place under its old modification time).
    for record in [
        format!(
            "persyk-model-verified-v1 {} {} {}.{:09} {} {} ok\n",
            tiny.sha256,
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ino(),
            meta.dev()
        ),
        format!(
            "persyk-model-verified-v2 {} {} {}.{:09} {}.{:09} {} {} {} ok\n",
            tiny.sha256,
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime() - 1,
            meta.ctime_nsec(),
            meta.uid(),
            meta.ino(),
            meta.dev()
        ),
    ] {
        let stamp = dir.join(".ggml-tiny.en.bin.verified");
        std::fs::write(&stamp, record).expect("stamp");
        std::fs::set_permissions(&stamp, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let out = persyk(
            &["models", "list"],
            "",
            &[("PERSYK_MODELS_DIR", dir.display().to_string())],
        );
        let list = String::from_utf8_lossy(&out.stdout);
        let row = list
            .lines()
            .find(|l| l.contains("tiny.en"))
            .expect("tiny.en row");
        assert!(!row.contains("downloaded"), "{row}");
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let out = persyk(
        &["models", "list"],
        "",
        &[("PERSYK_MODELS_DIR", dir.display().to_string())],
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains("models.unsafe-folder"), "{all}");
}

/// Item 8: a clean-up URL with a user name and password, or a websocket scheme, is refused
/// before anything is sent.
#[test]
fn issue39_08_clean_up_urls_carry_no_credentials_and_no_websocket_scheme() {
    let listener = Recorder::start(200, None);
    for url in [
        format!("http://user:secret@127.0.0.1:{}/v1", listener.port),
        format!("ws://127.0.0.1:{}/v1", listener.port),
        format!("wss://127.0.0.1:{}/v1", listener.port),
    ] {
        let out = persyk(
            &[
                "cleanup", "--mode", "tidy", "--model", "m", "--server", &url,
            ],
            SPOKEN,
            &[],
        );
        assert_eq!(out.status.code(), Some(2), "{url}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("secret"), "{err}");
    }
    assert!(listener.seen().is_empty());
}
