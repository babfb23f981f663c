//! Two Macs sharing their history through two real Syncthing instances (issue #37).
//!
//! Debian's `syncthing` (scripts/setup installs it) runs twice, each with its own home, both
//! on loopback only (no discovery, relays, NAT, usage reports or upgrades); the devices and
//! one shared folder are set up through their REST API, the file watcher on with a 1 s
//! delay. Each "Mac" is `persyk` with its own settings (its own device id and name) and the
//! shared folder's `sessions` as its root. The test walks the story:
//!
//! 1. Mac A transcribes jfk.wav on the device (the tiny.en test model); Mac B finds it with
//!    `persyk search`, recorded on "Mac A", its audio there too. The time from A's stop to
//!    B's first hit is printed beside the time Syncthing itself took to bring the files
//!    (its `ItemFinished` events on B).
//! 2. With the two devices paused, A labels the session and B renames it; resumed,
//!    Syncthing keeps both versions (a conflict copy on both sides); `persyk check` on B
//!    reports it, `persyk recover` on B merges it, and both sides end with the same
//!    session file, every entry of both kept, valid, no copy left.
//! 3. One writer per session: while A records (paced at half speed), its marker reaches B
//!    and B's append and `persyk rm` are refused with `sync.recording-elsewhere`, nothing
//!    written; once A stops the marker leaves both Macs and B's append goes through.
//! 4. Settings worth sharing (`sync::shared`): replacements A saves are used by `persyk
//!    cleanup` on B; saved on both while parted, Syncthing keeps a conflict copy of the
//!    settings file, B settles it by keeping both, and both Macs apply all three.
//! 5. `persyk rm` on A removes the session on B too.
//!
//! It takes tens of seconds (mostly Syncthing's watcher and index exchange).

#![cfg(feature = "local")]

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const FOLDER: &str = "persyk-history";
const DEADLINE: Duration = Duration::from_secs(60);

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// One running Syncthing.
struct Syncthing {
    child: Child,
    base: String,
    key: String,
    id: String,
    listen: u16,
}

impl Drop for Syncthing {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn set_option(config: &str, tag: &str, value: &str) -> String {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = config.find(&open).expect(tag) + open.len();
    let end = start + config[start..].find(&close).expect(tag);
    format!("{}{value}{}", &config[..start], &config[end..])
}

impl Syncthing {
    /// A Syncthing of its own under `home`, reachable on loopback only.
    fn start(home: &Path, name: &str) -> Syncthing {
        let out = Command::new("syncthing")
            .args(["generate", "--no-default-folder", "--skip-port-probing"])
            .arg(format!("--home={}", home.display()))
            .env("STNOUPGRADE", "1")
            .output()
            .expect("syncthing is missing: scripts/setup installs Debian's");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let listen = free_port();
        let gui = free_port();
        let key = format!("persyk-test-{name}-{gui}");
        let path = home.join("config.xml");
        let mut config = fs::read_to_string(&path).expect("config.xml");
        for (tag, value) in [
            ("listenAddress", format!("tcp://127.0.0.1:{listen}")),
            ("globalAnnounceEnabled", "false".into()),
            ("localAnnounceEnabled", "false".into()),
            ("relaysEnabled", "false".into()),
            ("natEnabled", "false".into()),
            ("startBrowser", "false".into()),
            ("urAccepted", "-1".into()),
            ("autoUpgradeIntervalH", "0".into()),
            ("crashReportingEnabled", "false".into()),
            // Reconnect at once after a pause, not within the minute.
            ("reconnectionIntervalS", "1".into()),
        ] {
            config = set_option(&config, tag, &value);
        }
        fs::write(&path, config).expect("write config");
        let log = fs::File::create(home.join("syncthing.log")).expect("log");
        let child = Command::new("syncthing")
            .args(["serve", "--no-browser", "--no-restart", "--no-upgrade"])
            .arg(format!("--home={}", home.display()))
            .arg(format!("--gui-address=http://127.0.0.1:{gui}"))
            .arg(format!("--gui-apikey={key}"))
            .env("STNOUPGRADE", "1")
            .env("STNORESTART", "1")
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start syncthing");
        let mut st = Syncthing {
            child,
            base: format!("http://127.0.0.1:{gui}"),
            key,
            id: String::new(),
            listen,
        };
        let started = Instant::now();
        loop {
            if let Ok(status) = st.try_get("/rest/system/status") {
                st.id = status["myID"].as_str().expect("myID").to_owned();
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "syncthing did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        st
    }

    fn try_get(&self, path: &str) -> Result<Value, String> {
        let mut response = ureq::get(&format!("{}{path}", self.base))
            .header("X-API-Key", &self.key)
            .call()
            .map_err(|e| e.to_string())?;
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())?;
        serde_json::from_str(&text).map_err(|e| e.to_string())
    }

    fn get(&self, path: &str) -> Value {
        self.try_get(path).expect(path)
    }

    fn send(&self, method: &str, path: &str, body: &Value) {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "POST" => ureq::post(&url),
            "PATCH" => ureq::patch(&url),
            "PUT" => ureq::put(&url),
            _ => unreachable!("{method}"),
        };
        request
            .header("X-API-Key", &self.key)
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    }

    /// Knows `other` at its loopback address.
    fn add_device(&self, other: &Syncthing, name: &str) {
        self.send(
            "POST",
            "/rest/config/devices",
            &json!({"deviceID": other.id, "name": name,
                    "addresses": [format!("tcp://127.0.0.1:{}", other.listen)]}),
        );
    }

    /// Shares `path` as the folder [`FOLDER`] with `other`, the file watcher on.
    fn share(&self, path: &Path, other: &Syncthing) {
        self.send(
            "POST",
            "/rest/config/folders",
            &json!({
                "id": FOLDER, "label": "Persyk history", "path": path, "type": "sendreceive",
                "devices": [{"deviceID": self.id}, {"deviceID": other.id}],
                "fsWatcherEnabled": true, "fsWatcherDelayS": 1, "rescanIntervalS": 60,
            }),
        );
    }

    fn pause(&self, other: &Syncthing, paused: bool) {
        self.send(
            "PATCH",
            &format!("/rest/config/devices/{}", other.id),
            &json!({"paused": paused}),
        );
    }

    fn connected_to(&self, other: &Syncthing) -> bool {
        self.try_get("/rest/system/connections")
            .is_ok_and(|c| c["connections"][&other.id]["connected"] == true)
    }

    /// The latest event id, to wait for events after it.
    fn last_event(&self) -> u64 {
        self.get("/rest/events?limit=1&timeout=0")
            .as_array()
            .and_then(|a| a.last())
            .and_then(|e| e["id"].as_u64())
            .unwrap_or(0)
    }

    /// Watches `ItemFinished` events after `since` on a thread: each finished item's path
    /// and when this test saw it.
    fn watch_items(&self, since: u64) -> mpsc::Receiver<(String, Instant)> {
        let (tx, rx) = mpsc::channel();
        let (base, key) = (self.base.clone(), self.key.clone());
        std::thread::spawn(move || {
            let mut since = since;
            loop {
                // All events, filtered here (1.19 answers `?events=ItemFinished` with none).
                let url = format!("{base}/rest/events?since={since}&timeout=2");
                let Ok(mut r) = ureq::get(&url).header("X-API-Key", &key).call() else {
                    return;
                };
                let Ok(text) = r.body_mut().read_to_string() else {
                    return;
                };
                let events: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
                let now = Instant::now();
                for e in events {
                    since = since.max(e["id"].as_u64().unwrap_or(since));
                    if e["type"] == "ItemFinished"
                        && e["data"]["error"].is_null()
                        && tx
                            .send((
                                e["data"]["item"].as_str().unwrap_or_default().to_owned(),
                                now,
                            ))
                            .is_err()
                    {
                        return;
                    }
                }
            }
        });
        rx
    }
}

/// One "Mac": its settings (own device id and name) and its root in the shared folder.
struct Mac {
    config: PathBuf,
    root: PathBuf,
}

impl Mac {
    fn new(dir: &Path, shared: &Path, name: &str) -> Mac {
        let config = dir.join("config");
        fs::create_dir_all(&config).expect("config dir");
        let root = shared.join("sessions");
        fs::create_dir_all(&root).expect("root");
        // History in the synced folder, and the settings worth sharing beside it.
        fs::write(
            config.join("settings.json"),
            json!({
                "sessions": {"directory": root},
                "sync": {"deviceName": name, "shareSettings": true},
            })
            .to_string(),
        )
        .expect("settings");
        Mac { config, root }
    }

    fn persyk(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_persyk"))
            .args(args)
            .env("PERSYK_CONFIG", self.config.join("settings.json"))
            .output()
            .expect("persyk")
    }

    fn persyk_with_stdin(&self, args: &[&str], input: &str) -> std::process::Output {
        let mut child = Command::new(env!("CARGO_BIN_EXE_persyk"))
            .args(args)
            .env("PERSYK_CONFIG", self.config.join("settings.json"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("persyk");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write");
        child.wait_with_output().expect("persyk")
    }

    /// `persyk cleanup` of `words` with this Mac's settings (as spoken: replacements only).
    fn cleanup(&self, words: &str) -> String {
        let out = self.persyk_with_stdin(&["cleanup"], &format!("{words}\n"));
        assert!(out.status.success(), "{}", show(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn root(&self) -> &str {
        self.root.to_str().expect("utf-8")
    }

    fn search(&self, query: &str) -> Vec<Value> {
        let out = self.persyk(&["search", query, "--root", self.root(), "--json"]);
        serde_json::from_slice::<Value>(&out.stdout)
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
    }
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < DEADLINE, "waited too long for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("{what}: {:.1} s", started.elapsed().as_secs_f64());
}

fn conflict_copies(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|n| n.starts_with("session.sync-conflict-"))
                .collect()
        })
        .unwrap_or_default()
}

fn show(out: &std::process::Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `persyk transcribe` of `jfk` on the device with the test model, into `root` (Mac A
/// recording).
fn transcribe<'a>(jfk: &'a str, model: &'a str, root: &'a str) -> [&'a str; 8] {
    [
        "transcribe",
        jfk,
        "--provider",
        "local",
        "--model",
        model,
        "--root",
        root,
    ]
}

#[test]
fn two_macs_share_history_through_syncthing() {
    let model_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-model");
    let (model, jfk) = (
        model_dir.join("ggml-tiny.en.bin"),
        model_dir.join("jfk.wav"),
    );
    assert!(
        model.exists() && jfk.exists(),
        "run scripts/fetch-test-model"
    );
    let tmp = tempfile::tempdir().expect("tmp");
    let (shared_a, shared_b) = (tmp.path().join("a/Sync"), tmp.path().join("b/Sync"));
    fs::create_dir_all(&shared_a).expect("a");
    fs::create_dir_all(&shared_b).expect("b");
    let st_a = Syncthing::start(&tmp.path().join("a/syncthing"), "a");
    let st_b = Syncthing::start(&tmp.path().join("b/syncthing"), "b");
    st_a.add_device(&st_b, "Mac B");
    st_b.add_device(&st_a, "Mac A");
    st_a.share(&shared_a, &st_b);
    st_b.share(&shared_b, &st_a);
    wait_for("the two Syncthings to connect", || {
        st_a.connected_to(&st_b) && st_b.connected_to(&st_a)
    });
    let mac_a = Mac::new(&tmp.path().join("a"), &shared_a, "Mac A");
    let mac_b = Mac::new(&tmp.path().join("b"), &shared_b, "Mac B");
    wait_for("the sessions folder to reach both", || {
        shared_a.join("sessions").is_dir() && shared_b.join("sessions").is_dir()
    });

    // 1. A records; B finds it.
    let items = st_b.watch_items(st_b.last_event());
    let (jfk, model) = (jfk.to_str().expect("utf-8"), model.to_str().expect("utf-8"));
    let out = mac_a.persyk(&transcribe(jfk, model, mac_a.root()));
    let stopped = Instant::now();
    assert!(out.status.success(), "{}", show(&out));
    let dir_a = PathBuf::from(
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .find_map(|l| l.strip_prefix("persyk: session "))
            .expect("the session's folder"),
    );
    let name = dir_a
        .file_name()
        .expect("name")
        .to_str()
        .expect("utf-8")
        .to_owned();
    let dir_b = mac_b.root.join(&name);
    let mut hit = None;
    wait_for("B to find A's words", || {
        hit = mac_b.search("ask not").into_iter().next();
        hit.is_some()
    });
    let searchable = stopped.elapsed();
    let hit = hit.expect("hit");
    assert_eq!(hit["recordedOn"], "Mac A", "{hit}");
    // Syncthing's own time for the same files: its last ItemFinished of the session's files.
    let wav = fs::read_dir(dir_a.join("assets"))
        .expect("assets")
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".wav"))
        .expect("A's WAV")
        .file_name();
    let wav_b = dir_b.join("assets").join(&wav);
    wait_for("A's recording to reach B", || {
        fs::read(&wav_b).ok() == fs::read(dir_a.join("assets").join(&wav)).ok()
    });
    let mut synced: Option<Duration> = None;
    while let Ok((item, at)) = items.recv_timeout(Duration::from_millis(500)) {
        if item.starts_with(&format!("sessions/{name}/")) {
            let took = at.saturating_duration_since(stopped);
            synced = Some(synced.map_or(took, |s| s.max(took)));
        }
    }
    println!(
        "stop on A → searchable on B: {:.2} s; Syncthing's own transfer of the session's files: {}",
        searchable.as_secs_f64(),
        synced.map_or("not seen".to_owned(), |s| format!(
            "{:.2} s",
            s.as_secs_f64()
        ))
    );
    let check = mac_b.persyk(&["check", dir_b.to_str().expect("utf-8")]);
    assert_eq!(check.status.code(), Some(0), "{}", show(&check));

    // 2. Both change the session while they cannot see each other.
    st_a.pause(&st_b, true);
    st_b.pause(&st_a, true);
    wait_for("the devices to part", || {
        !st_a.connected_to(&st_b) && !st_b.connected_to(&st_a)
    });
    let append = |mac: &Mac, dir: &Path, record: Value| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_persyk"))
            .arg("append")
            .arg(dir)
            .env("PERSYK_CONFIG", mac.config.join("settings.json"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("append");
        use std::io::Write;
        writeln!(child.stdin.take().expect("stdin"), "{record}").expect("write");
        let out = child.wait_with_output().expect("append");
        assert!(out.status.success(), "{}", show(&out));
    };
    let first_message = |dir: &Path| -> String {
        fs::read_to_string(dir.join("session.jsonl"))
            .expect("read")
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["type"] == "message")
            .and_then(|e| e["id"].as_str().map(str::to_owned))
            .expect("a message")
    };
    let target = first_message(&dir_a);
    append(
        &mac_a,
        &dir_a,
        json!({"type": "label", "id": "label-from-a", "targetId": target, "label": "inaugural"}),
    );
    append(
        &mac_b,
        &dir_b,
        json!({"type": "session_info", "id": "name-from-b", "name": "Kennedy 1961"}),
    );
    st_a.pause(&st_b, false);
    st_b.pause(&st_a, false);
    wait_for("the conflict copy on both Macs", || {
        conflict_copies(&dir_a).len() == 1
            && conflict_copies(&dir_b).len() == 1
            && fs::read(dir_a.join("session.jsonl")).ok()
                == fs::read(dir_b.join("session.jsonl")).ok()
    });
    let b = dir_b.to_str().expect("utf-8");
    let check = mac_b.persyk(&["check", b]);
    assert_eq!(check.status.code(), Some(1), "{}", show(&check));
    assert!(
        String::from_utf8_lossy(&check.stdout).contains("sync.unmerged-copy"),
        "{}",
        show(&check)
    );
    let recover = mac_b.persyk(&["recover", b]);
    assert!(recover.status.success(), "{}", show(&recover));
    assert!(
        String::from_utf8_lossy(&recover.stdout).contains("(Syncthing): merged"),
        "{}",
        show(&recover)
    );
    wait_for("both Macs to hold the merged session and no copy", || {
        conflict_copies(&dir_a).is_empty()
            && conflict_copies(&dir_b).is_empty()
            && fs::read(dir_a.join("session.jsonl")).ok()
                == fs::read(dir_b.join("session.jsonl")).ok()
    });
    for (mac, dir) in [(&mac_a, &dir_a), (&mac_b, &dir_b)] {
        let text = fs::read_to_string(dir.join("session.jsonl")).expect("read");
        assert!(text.contains("\"label-from-a\"") && text.contains("\"name-from-b\""));
        let check = mac.persyk(&["check", dir.to_str().expect("utf-8")]);
        assert_eq!(check.status.code(), Some(0), "{}", show(&check));
        // What either Mac added shows on both: A's label, B's name.
        let by_label = mac.search("inaugural");
        assert_eq!(by_label.len(), 1, "{by_label:?}");
        assert_eq!(by_label[0]["label"], "Kennedy 1961");
    }

    // 3. One writer: B writes nothing to a session while A records it.
    let mut recording = Command::new(env!("CARGO_BIN_EXE_persyk"))
        .args(transcribe(jfk, model, mac_a.root()))
        // Half speed (22 s): Syncthing brings the marker to B while it records.
        .args(["--realtime-factor", "0.5"])
        .env("PERSYK_CONFIG", mac_a.config.join("settings.json"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("transcribe");
    let (live_tx, live_rx) = mpsc::channel();
    let stderr = recording.stderr.take().expect("stderr");
    let said = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(dir) = line.strip_prefix("persyk: session ") {
                let _ = live_tx.send(PathBuf::from(dir));
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let live_a = live_rx
        .recv_timeout(DEADLINE)
        .expect("the recording's folder");
    let live_b = mac_b.root.join(live_a.file_name().expect("name"));
    wait_for("A's recording marker to reach B", || {
        live_b.join("persyk-recording.json").is_file() && live_b.join("session.jsonl").is_file()
    });
    let marker: Value =
        serde_json::from_slice(&fs::read(live_b.join("persyk-recording.json")).expect("marker"))
            .expect("a JSON marker");
    assert_eq!(marker["deviceName"], "Mac A", "{marker}");
    let label_while_recording =
        json!({"type": "session_info", "id": "name-while-recording", "name": "too early"});
    let refused = |out: &std::process::Output| {
        assert_eq!(out.status.code(), Some(2), "{}", show(out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("sync.recording-elsewhere") && err.contains("Mac A is recording it"),
            "{}",
            show(out)
        );
    };
    let out = mac_b.persyk_with_stdin(
        &["append", live_b.to_str().expect("utf-8")],
        &format!("{label_while_recording}\n"),
    );
    refused(&out);
    let out = mac_b.persyk(&["rm", "--yes", live_b.to_str().expect("utf-8")]);
    refused(&out);
    assert!(live_b.join("session.jsonl").is_file());
    let status = recording.wait().expect("transcribe");
    let said = said.join().expect("stderr");
    assert!(status.success(), "{said}");
    wait_for(
        "the marker to leave both Macs and B to hold A's last line",
        || {
            !live_a.join("persyk-recording.json").exists()
                && !live_b.join("persyk-recording.json").exists()
                && fs::read(live_a.join("session.jsonl")).ok()
                    == fs::read(live_b.join("session.jsonl")).ok()
        },
    );
    for dir in [&live_a, &live_b] {
        let text = fs::read_to_string(dir.join("session.jsonl")).expect("read");
        assert!(
            !text.contains("name-while-recording"),
            "B wrote while A recorded"
        );
    }
    let out = mac_b.persyk_with_stdin(
        &["append", live_b.to_str().expect("utf-8")],
        &format!("{label_while_recording}\n"),
    );
    assert!(out.status.success(), "{}", show(&out));
    wait_for("B's name to reach A", || {
        fs::read_to_string(live_a.join("session.jsonl"))
            .is_ok_and(|t| t.contains("name-while-recording"))
    });
    assert!(conflict_copies(&live_a).is_empty() && conflict_copies(&live_b).is_empty());

    // 4. Settings worth sharing: what A saves is used on B; two Macs saving at once leave a
    //    conflict copy that is settled on B by keeping both, and both Macs end with both.
    use persyk::cleanup::replace::Rule;
    use persyk::sync::shared::{self, Resolve, SharedSettings};
    let rule = |from: &str, to: &str| Rule {
        from: from.into(),
        to: to.into(),
    };
    let on_a = SharedSettings {
        keywords: vec!["Persyk".into()],
        replacements: vec![rule("pers ick", "Persyk")],
        ..SharedSettings::default()
    };
    assert!(shared::write(&mac_a.root, &on_a).expect("A saves"));
    wait_for("A's shared settings to be used on B", || {
        mac_b.cleanup("I love pers ick") == "I love Persyk"
    });
    st_a.pause(&st_b, true);
    st_b.pause(&st_a, true);
    wait_for("the devices to part", || {
        !st_a.connected_to(&st_b) && !st_b.connected_to(&st_a)
    });
    let mut a2 = on_a.clone();
    a2.replacements.push(rule("cube ernetes", "Kubernetes"));
    shared::write(&mac_a.root, &a2).expect("A saves again");
    let mut b2 = on_a.clone();
    b2.keywords.push("Siobhan".into());
    b2.replacements.push(rule("shiv awn", "Siobhan"));
    shared::write(&mac_b.root, &b2).expect("B saves meanwhile");
    st_a.pause(&st_b, false);
    st_b.pause(&st_a, false);
    wait_for("the settings' conflict copy on both Macs", || {
        shared::conflicts(&mac_a.root).len() == 1 && shared::conflicts(&mac_b.root).len() == 1
    });
    let (copy, _) = shared::conflicts(&mac_b.root).remove(0);
    let settled = shared::resolve(&mac_b.root, &copy, Resolve::KeepBoth).expect("keep both");
    assert_eq!(settled.keywords, ["Persyk", "Siobhan"]);
    assert_eq!(settled.replacements.len(), 3, "{settled:?}");
    wait_for("both Macs to hold the settled settings and no copy", || {
        shared::conflicts(&mac_a.root).is_empty()
            && fs::read(mac_a.root.join(shared::SHARED_FILE)).ok()
                == fs::read(mac_b.root.join(shared::SHARED_FILE)).ok()
    });
    for mac in [&mac_a, &mac_b] {
        assert_eq!(
            mac.cleanup("pers ick runs cube ernetes for shiv awn"),
            "Persyk runs Kubernetes for Siobhan"
        );
    }

    // 5. Deleting on A removes it on B.
    for dir in [&dir_a, &live_a] {
        let rm = mac_a.persyk(&["rm", "--yes", dir.to_str().expect("utf-8")]);
        assert!(rm.status.success(), "{}", show(&rm));
    }
    wait_for("the sessions to leave B", || {
        !dir_b.exists() && !live_b.exists()
    });
    assert!(mac_b.search("ask not").is_empty());
}
