//! The store through the real `persyk` binary: concurrent writer processes, SIGKILL in the
//! middle of an append stream followed by `persyk recover`, interrupted-WAV recovery checked
//! with independent WAV readers (Python's `wave`, `sox`), `rm` confirmation and the
//! one-ack-line-per-record output of `append`.
//!
//! Stress mode: the crash test runs `PERSYK_CRASH_ITERATIONS` kill/recover cycles (default
//! 200, about 10–20 s in a debug build). For a long soak run e.g.
//! `PERSYK_CRASH_ITERATIONS=5000 cargo test --no-default-features --test store_cli
//! kill_mid_stream -- --nocapture` (the summary line reports how many iterations were killed
//! before any ack, killed mid-stream, or finished). `PERSYK_CRASH_SEED` changes the
//! deterministic PRNG seed.

mod support;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Rng, entries};
use tempfile::TempDir;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

const BIN: &str = env!("CARGO_BIN_EXE_persyk");

fn persyk(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run the persyk binary")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("the binary exits normally")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

fn temp_root() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let root = dir.path().canonicalize().expect("canonicalize");
    (dir, root)
}

/// `persyk new --root <root>`; returns the new session folder.
fn new_session(root: &Path) -> PathBuf {
    let out = persyk(&["new", "--root", s(root)]);
    assert_eq!(code(&out), 0, "persyk new failed: {}", stderr(&out));
    let dir = PathBuf::from(stdout(&out).trim());
    assert!(dir.join("session.jsonl").is_file(), "{}", dir.display());
    dir
}

fn check(session: &Path) -> Output {
    persyk(&["check", s(session)])
}

fn assert_check_ok(session: &Path) {
    let out = check(session);
    assert_eq!(
        code(&out),
        0,
        "persyk check failed:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
}

/// Complete `{"id","status"}` ack lines (a line cut off by a kill is not an ack).
fn parse_acks(out: &str) -> Vec<(String, String)> {
    let mut acks = Vec::new();
    for line in out.split_inclusive('\n') {
        if !line.ends_with('\n') {
            break;
        }
        let v: Value = serde_json::from_str(line).expect("ack line is JSON");
        let obj = v.as_object().expect("ack is an object");
        assert_eq!(obj.len(), 2, "ack has exactly id and status: {line}");
        acks.push((
            obj["id"].as_str().expect("id").to_owned(),
            obj["status"].as_str().expect("status").to_owned(),
        ));
    }
    acks
}

/// Runs `persyk append <session> [--leaf <leaf>]` with `input` on stdin.
fn append(session: &Path, leaf: Option<&str>, input: &str) -> (i32, Vec<(String, String)>, String) {
    let mut child = spawn_append(session, leaf);
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_owned();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    (code(&out), parse_acks(&stdout(&out)), stderr(&out))
}

fn spawn_append(session: &Path, leaf: Option<&str>) -> Child {
    let mut cmd = Command::new(BIN);
    cmd.arg("append").arg(session);
    if let Some(leaf) = leaf {
        cmd.args(["--leaf", leaf]);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn persyk append")
}

/// Kills and reaps a helper process when dropped (also on panic).
struct ChildGuard(Child);
impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Concurrent writer processes
// ---------------------------------------------------------------------------------------------

#[test]
fn four_concurrent_append_processes_all_commit() {
    const WRITERS: usize = 4;
    const PER: usize = 500;
    let (_tmp, root) = temp_root();
    let session = new_session(&root);

    let mut children = Vec::new();
    for w in 0..WRITERS {
        let mut child = spawn_append(&session, Some("null"));
        let mut stdin = child.stdin.take().unwrap();
        // Fed in small chunks so the four processes' batches interleave.
        let feeder = std::thread::spawn(move || {
            let mut chunk = String::new();
            for i in 0..PER {
                chunk.push_str(
                    &json!({"type": "custom", "customType": "t", "data": {"w": w, "i": i}})
                        .to_string(),
                );
                chunk.push('\n');
                if i % 7 == 6 {
                    stdin.write_all(chunk.as_bytes()).unwrap();
                    chunk.clear();
                }
            }
            stdin.write_all(chunk.as_bytes()).unwrap();
        });
        children.push((child, feeder));
    }
    let mut acked: Vec<Vec<String>> = Vec::new();
    for (w, (child, feeder)) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        feeder.join().unwrap();
        assert_eq!(code(&out), 0, "writer {w}: {}", stderr(&out));
        let acks = parse_acks(&stdout(&out));
        assert_eq!(acks.len(), PER, "writer {w}");
        assert!(acks.iter().all(|(_, st)| st == "committed"));
        acked.push(acks.into_iter().map(|(id, _)| id).collect());
    }
    assert_eq!(acked.iter().map(Vec::len).sum::<usize>(), WRITERS * PER);

    assert_check_ok(&session);
    let text = fs::read_to_string(session.join("session.jsonl")).unwrap();
    assert_eq!(text.lines().count(), WRITERS * PER + 1, "entries + header");
    let all = entries(&session);
    let by_id: HashMap<&str, &Value> = all.iter().map(|e| (e["id"].as_str().unwrap(), e)).collect();
    assert_eq!(by_id.len(), WRITERS * PER, "ids are unique");
    for (w, ids) in acked.iter().enumerate() {
        // Each process's records form one chain from a new root, in input order.
        for (i, id) in ids.iter().enumerate() {
            let e = by_id
                .get(id.as_str())
                .unwrap_or_else(|| panic!("writer {w}: acked {id} missing"));
            assert_eq!(e["data"], json!({"w": w, "i": i}));
            let parent = if i == 0 {
                Value::Null
            } else {
                Value::from(ids[i - 1].as_str())
            };
            assert_eq!(e["parentId"], parent, "writer {w} record {i}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// SIGKILL mid-stream, then explicit recovery
// ---------------------------------------------------------------------------------------------

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Writes `records` to the child's stdin in chunks of a few whole records (one chunk in eight
/// ends inside a record), with short pauses, until done or the child is gone.
fn feed_slowly(mut stdin: ChildStdin, records: Vec<String>, seed: u64) {
    let mut rng = Rng(seed | 1);
    let mut bytes = Vec::new();
    let mut ends = Vec::new();
    for r in &records {
        bytes.extend_from_slice(r.as_bytes());
        bytes.push(b'\n');
        ends.push(bytes.len());
    }
    let mut pos = 0;
    let mut next = 0;
    while pos < bytes.len() {
        next = (next + 1 + rng.below(8) as usize).min(ends.len());
        let mut end = ends[next - 1];
        if rng.below(8) == 0 && end < bytes.len() {
            end += 1 + rng.below(20) as usize; // part of the following record
        }
        let end = end.min(bytes.len());
        if end > pos {
            if stdin.write_all(&bytes[pos..end]).is_err() {
                return; // killed
            }
            pos = end;
        }
        std::thread::sleep(Duration::from_micros(200 + rng.below(1500)));
    }
}

#[test]
fn kill_mid_stream_then_recover_keeps_every_ack() {
    let iterations = env_or("PERSYK_CRASH_ITERATIONS", 200);
    let mut rng = Rng(env_or("PERSYK_CRASH_SEED", 0xC4A5_11ED));
    let (_tmp, root) = temp_root();
    let started = Instant::now();
    let (mut killed_before_ack, mut killed_mid, mut finished) = (0u64, 0u64, 0u64);
    let mut tails: HashMap<&str, u64> = HashMap::new();
    let mut session = new_session(&root);
    let mut all_acked: HashSet<String> = HashSet::new();
    for it in 0..iterations {
        if it % 10 == 0 {
            session = new_session(&root);
            all_acked.clear();
        }
        let count = 20 + rng.below(180) as usize;
        let records: Vec<String> = (0..count)
            .map(|i| {
                json!({
                    "type": "custom", "customType": "crash",
                    "data": {"it": it, "i": i, "pad": "é🙂 ".repeat(1 + (i % 13))}
                })
                .to_string()
            })
            .collect();
        let mut child = spawn_append(&session, None);
        let stdin = child.stdin.take().unwrap();
        let mut out = child.stdout.take().unwrap();
        let seed = rng.next();
        let feeder = std::thread::spawn(move || feed_slowly(stdin, records, seed));
        let (first_ack, got_first_ack) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                match out.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        buf.extend_from_slice(&chunk[..n]);
                        if buf.contains(&b'\n') {
                            let _ = first_ack.send(());
                        }
                    }
                }
            }
            String::from_utf8(buf).expect("ack output is UTF-8")
        });
        // A quarter of the kills count from the spawn (they often land before the first
        // ack); the rest from the first ack, so that most land in the middle of the stream.
        if rng.below(4) != 0 {
            let _ = got_first_ack.recv_timeout(Duration::from_secs(10));
        }
        std::thread::sleep(Duration::from_micros(rng.below(20_001)));
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        feeder.join().unwrap();
        let acks = parse_acks(&reader.join().unwrap());
        match status.code() {
            None => {
                if acks.is_empty() {
                    killed_before_ack += 1;
                } else {
                    killed_mid += 1;
                }
            }
            Some(0) => {
                assert_eq!(acks.len(), count, "iteration {it}: finished with every ack");
                finished += 1;
            }
            Some(c) => {
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("iteration {it}: append exited {c}: {err}");
            }
        }
        all_acked.extend(acks.into_iter().map(|(id, _)| id));

        let rec = persyk(&["recover", s(&session)]);
        assert_eq!(
            code(&rec),
            0,
            "iteration {it}: recover failed: {}",
            stderr(&rec)
        );
        let tail = match stdout(&rec).lines().next().unwrap_or_default() {
            "tail: clean" => "clean",
            t if t.contains("newline") => "added-newline",
            t if t.contains("fragment") => "preserved-fragment",
            t => panic!("iteration {it}: unexpected recover output {t:?}"),
        };
        *tails.entry(tail).or_default() += 1;
        assert_check_ok(&session);
        let present: HashSet<String> = entries(&session)
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect();
        for id in &all_acked {
            assert!(present.contains(id), "iteration {it}: acked {id} was lost");
        }
    }
    let elapsed = started.elapsed();
    eprintln!(
        "crash test: {iterations} iterations in {elapsed:.1?}: killed before any ack {killed_before_ack}, \
         killed mid-stream {killed_mid}, finished {finished}; recover tails {tails:?}"
    );
    assert!(
        killed_mid > 0,
        "no kill landed mid-stream; the test lost its point"
    );
}

// ---------------------------------------------------------------------------------------------
// Interrupted WAV recovery
// ---------------------------------------------------------------------------------------------

/// A 44-byte PCM16 mono 24 kHz WAV header whose RIFF and data sizes are 0, as left by a
/// writer that crashed before finalizing.
fn unfinished_wav_header() -> Vec<u8> {
    let mut h = Vec::with_capacity(44);
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&0u32.to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes()); // PCM
    h.extend_from_slice(&1u16.to_le_bytes()); // mono
    h.extend_from_slice(&24_000u32.to_le_bytes());
    h.extend_from_slice(&48_000u32.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&16u16.to_le_bytes());
    h.extend_from_slice(b"data");
    h.extend_from_slice(&0u32.to_le_bytes());
    assert_eq!(h.len(), 44);
    h
}

fn samples(n: usize) -> Vec<u8> {
    let mut rng = Rng(0xA0D1_0000_0042);
    (0..n)
        .flat_map(|_| (rng.next() as i16).to_le_bytes())
        .collect()
}

/// Appends `recording.started` for `assets/<asset>` and writes the unfinished WAV.
fn interrupted_recording(session: &Path, recording: &str, asset: &str, n: usize) -> Vec<u8> {
    let rec = json!({"type": "recording.started", "recordingId": recording, "asset": format!("assets/{asset}")});
    let (c, acks, err) = append(session, None, &format!("{rec}\n"));
    assert_eq!(c, 0, "{err}");
    assert_eq!(acks.len(), 1);
    let pcm = samples(n);
    let mut wav = unfinished_wav_header();
    wav.extend_from_slice(&pcm);
    wav.push(0x7f); // one odd trailing byte: half a sample
    fs::write(session.join("assets").join(asset), &wav).unwrap();
    pcm
}

fn python_wave(path: &Path) -> (u64, u64, u64) {
    let out = Command::new("python3")
        .args([
            "-c",
            "import wave,sys; w=wave.open(sys.argv[1]); print(w.getnframes(), w.getframerate(), w.getnchannels())",
        ])
        .arg(path)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "python wave failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let v: Vec<u64> = text
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    (v[0], v[1], v[2])
}

fn sox_samples(path: &Path) -> u64 {
    let out = Command::new("sox")
        .args(["--i", "-s"])
        .arg(path)
        .output()
        .expect("run sox");
    assert!(
        out.status.success(),
        "sox failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn recover_repairs_an_interrupted_wav_and_records_the_interruption() {
    const N: usize = 25_234; // 1051.4 ms at 24 kHz: exercises the integer division
    let (_tmp, root) = temp_root();
    let session = new_session(&root);
    let pcm = interrupted_recording(&session, "rec1", "rec1.wav", N);
    let wav_path = session.join("assets").join("rec1.wav");

    let out = persyk(&["recover", s(&session)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.contains("rec1") && l.contains("interrupted")),
        "recover reports the interruption: {text}"
    );

    // Independent readers agree on the repaired file.
    assert_eq!(python_wave(&wav_path), (N as u64, 24_000, 1));
    assert_eq!(sox_samples(&wav_path), N as u64);
    let wav = fs::read(&wav_path).unwrap();
    assert_eq!(wav.len(), 44 + 2 * N, "only the odd byte was dropped");
    assert_eq!(&wav[44..], &pcm[..], "every sample byte kept exactly");
    assert_eq!(
        u32::from_le_bytes(wav[4..8].try_into().unwrap()) as usize,
        36 + 2 * N
    );
    assert_eq!(
        u32::from_le_bytes(wav[40..44].try_into().unwrap()) as usize,
        2 * N
    );
    assert_eq!(
        &wav[8..40],
        &unfinished_wav_header()[8..40],
        "format untouched"
    );

    let all = entries(&session);
    let interrupted: Vec<&Value> = all
        .iter()
        .filter(|e| e["type"] == "recording.interrupted")
        .collect();
    assert_eq!(interrupted.len(), 1);
    assert_eq!(interrupted[0]["recordingId"], "rec1");
    assert_eq!(interrupted[0]["durationMs"], json!(N * 1000 / 24_000));
    assert_eq!(N * 1000 / 24_000, 1051);
    assert_check_ok(&session);

    // A second recovery is a no-op for that recording.
    let jsonl = fs::read(session.join("session.jsonl")).unwrap();
    let out = persyk(&["recover", s(&session)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!stdout(&out).contains("rec1"), "{}", stdout(&out));
    assert_eq!(fs::read(session.join("session.jsonl")).unwrap(), jsonl);
    assert_eq!(fs::read(&wav_path).unwrap(), wav);
}

#[test]
fn recover_leaves_a_live_capture_alone() {
    const N: usize = 4_800;
    let (_tmp, root) = temp_root();
    let session = new_session(&root);
    interrupted_recording(&session, "live", "live.wav", N);
    let wav_path = session.join("assets").join("live.wav");
    let wav = fs::read(&wav_path).unwrap();
    let jsonl = fs::read(session.join("session.jsonl")).unwrap();

    // Another process is still capturing into it.
    let mut python = Command::new("python3")
        .args([
            "-c",
            "import fcntl, sys\n\
             f = open(sys.argv[1], 'rb+')\n\
             fcntl.flock(f.fileno(), fcntl.LOCK_EX)\n\
             sys.stdout.write('locked\\n'); sys.stdout.flush()\n\
             sys.stdin.read()\n",
        ])
        .arg(&wav_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python3");
    let mut line = String::new();
    BufReader::new(python.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "locked");
    let guard = ChildGuard(python);

    let out = persyk(&["recover", s(&session)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("live capture"), "{}", stdout(&out));
    assert_eq!(
        fs::read(&wav_path).unwrap(),
        wav,
        "a live capture is not repaired"
    );
    assert_eq!(fs::read(session.join("session.jsonl")).unwrap(), jsonl);
    // ... nor deleted.
    let out = persyk(&["rm", s(&session), "--yes"]);
    assert_ne!(code(&out), 0);
    assert!(
        stderr(&out).contains("store.capture-live"),
        "{}",
        stderr(&out)
    );
    assert!(session.join("session.jsonl").is_file());

    drop(guard);
    let out = persyk(&["recover", s(&session)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(python_wave(&wav_path).0, N as u64);
    assert_check_ok(&session);
}

// ---------------------------------------------------------------------------------------------
// rm, append output
// ---------------------------------------------------------------------------------------------

#[test]
fn rm_needs_yes_and_removes_only_that_folder() {
    let (_tmp, root) = temp_root();
    let keep = new_session(&root);
    let doomed = new_session(&root);
    let (c, _, err) = append(
        &doomed,
        None,
        "{\"type\":\"custom\",\"customType\":\"t\",\"data\":1}\n",
    );
    assert_eq!(c, 0, "{err}");
    let keep_bytes = fs::read(keep.join("session.jsonl")).unwrap();
    let doomed_bytes = fs::read(doomed.join("session.jsonl")).unwrap();

    let out = persyk(&["rm", s(&doomed)]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("--yes"));
    assert_eq!(
        fs::read(doomed.join("session.jsonl")).unwrap(),
        doomed_bytes
    );

    let out = persyk(&["rm", s(&doomed), "--yes"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!doomed.exists());
    assert!(!root.join(".persyk-trash").exists());
    assert_eq!(fs::read(keep.join("session.jsonl")).unwrap(), keep_bytes);

    let out = persyk(&["rm", s(&doomed), "--yes"]);
    assert_eq!(code(&out), 2, "a missing session: {}", stderr(&out));
}

#[test]
fn append_acks_each_record_as_it_becomes_durable() {
    let (_tmp, root) = temp_root();
    let session = new_session(&root);
    let mut child = ChildGuard(spawn_append(&session, None));
    let mut stdin = child.0.stdin.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let out = child.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let mut ids = Vec::new();
    for i in 0..3 {
        writeln!(
            stdin,
            "{}",
            json!({"type": "custom", "customType": "t", "data": i})
        )
        .unwrap();
        stdin.flush().unwrap();
        // The ack arrives while stdin is still open: printed and flushed per batch.
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("an ack before end of input");
        let ack: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(ack["status"], "committed");
        let id = ack["id"].as_str().unwrap().to_owned();
        // Durable means: already in the file.
        assert!(
            entries(&session).iter().any(|e| e["id"] == id.as_str()),
            "acked {id} is in the file"
        );
        ids.push(id);
    }
    drop(stdin);
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let all = entries(&session);
    assert_eq!(all.len(), 3);
    assert_eq!(all[1]["parentId"], ids[0].as_str());
    assert_eq!(all[2]["parentId"], ids[1].as_str());
}

#[test]
fn a_refused_record_exits_1_after_the_earlier_acks() {
    let (_tmp, root) = temp_root();
    let session = new_session(&root);
    let input = [
        json!({"type": "custom", "customType": "t", "data": 1}),
        json!({"type": "custom", "customType": "t", "data": 2}),
        json!({"type": "custom", "customType": "t", "data": 3, "parentId": "no-such-entry"}),
        json!({"type": "custom", "customType": "t", "data": 4}),
    ]
    .iter()
    .map(|v| format!("{v}\n"))
    .collect::<String>();
    let (c, acks, err) = append(&session, None, &input);
    assert_eq!(c, 1, "{err}");
    assert_eq!(acks.len(), 2, "one line per acknowledged record");
    assert!(acks.iter().all(|(_, st)| st == "committed"));
    assert!(err.contains("record 3"), "{err}");
    assert!(err.contains("entry.parent-missing"), "{err}");
    let all = entries(&session);
    assert_eq!(
        all.iter()
            .map(|e| e["id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        acks.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>()
    );
    assert_check_ok(&session);

    // Not JSON at all: also exit 1 after committing what came before.
    let (c, acks, err) = append(
        &session,
        None,
        "{\"type\":\"custom\",\"customType\":\"t\",\"data\":5}\nnot json\n",
    );
    assert_eq!(c, 1, "{err}");
    assert_eq!(acks.len(), 1);
    assert_eq!(entries(&session).len(), 3);

    // An explicit leaf that does not exist: exit 3, nothing written.
    let (c, acks, _) = append(&session, Some("absent"), &input);
    assert_eq!(c, 3);
    assert!(acks.is_empty());
    assert_eq!(entries(&session).len(), 3);
}

#[test]
fn append_retry_of_complete_records_is_already_committed() {
    let (_tmp, root) = temp_root();
    let session = new_session(&root);
    let input = concat!(
        r#"{"type":"custom","id":"fixed-1","parentId":null,"timestamp":"2026-01-01T00:00:00Z","customType":"t","data":{"k":1}}"#,
        "\n",
        r#"{"type":"custom","id":"fixed-2","parentId":"fixed-1","timestamp":"2026-01-01T00:00:01Z","customType":"t","data":[]}"#,
        "\n",
    );
    let (c, acks, err) = append(&session, None, input);
    assert_eq!(c, 0, "{err}");
    assert_eq!(
        acks,
        [
            ("fixed-1".to_owned(), "committed".to_owned()),
            ("fixed-2".to_owned(), "committed".to_owned())
        ]
    );
    let text = fs::read_to_string(session.join("session.jsonl")).unwrap();
    assert!(
        text.ends_with(input),
        "complete records are kept byte for byte"
    );

    let (c, acks, err) = append(&session, None, input);
    assert_eq!(c, 0, "{err}");
    assert!(acks.iter().all(|(_, st)| st == "already-committed"));
    assert_eq!(
        fs::read_to_string(session.join("session.jsonl")).unwrap(),
        text
    );

    // Same id, different content: refused, exit 1.
    let conflicting = input.replace("{\"k\":1}", "{\"k\":2}");
    let (c, acks, err) = append(&session, None, &conflicting);
    assert_eq!(c, 1, "{err}");
    assert!(acks.is_empty());
    assert!(err.contains("store.conflicting-retry"), "{err}");
}

/// `append` batches what is already on stdin and commits when it would otherwise wait for
/// input. A complete record followed by the beginning of the next one is also "waiting for
/// input": the complete record must be committed and acknowledged now, not when the next
/// record happens to be completed (or 256 records later).
#[test]
fn append_commits_a_complete_record_while_the_next_is_still_arriving() {
    let (_tmp, root) = temp_root();
    let session = new_session(&root);
    let mut child = ChildGuard(spawn_append(&session, None));
    let mut stdin = child.0.stdin.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let out = child.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let first = json!({"type": "custom", "customType": "t", "data": 1}).to_string();
    let second = json!({"type": "custom", "customType": "t", "data": 2}).to_string();
    // One write: the whole first record and half of the second.
    write!(stdin, "{first}\n{}", &second[..10]).unwrap();
    stdin.flush().unwrap();
    let ack = rx.recv_timeout(Duration::from_secs(5));
    let in_file = entries(&session).len();
    // Finish the stream either way, so the process ends cleanly.
    writeln!(stdin, "{}", &second[10..]).unwrap();
    drop(stdin);
    let _ = child.0.wait();
    assert!(
        ack.is_ok(),
        "no ack for a complete record after 5 s ({in_file} entries in the file)"
    );
    assert_eq!(in_file, 1);
}
