//! Shared by the benches: a realistic generated session and peak-RSS readout.
#![allow(dead_code)]

#[cfg(feature = "app")]
pub mod app;

use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use persyk::session::format::{
    AssetRef, Block, ByteRange, Custom, Direction, Entry, EntryBody, Header, Label, MediaRef,
    Message, Observation, RealtimeEvent, RecordingFinished, RecordingStarted, Role, SessionInfo,
};
use serde_json::{Map, Value, json};

const WORDS: &[&str] = &[
    "the",
    "meeting",
    "tomorrow",
    "should",
    "cover",
    "quarterly",
    "numbers",
    "and",
    "café",
    "résumé",
    "naïve",
    "über",
    "we",
    "need",
    "to",
    "ship",
    "the",
    "release",
    "before",
    "Friday",
    "\"quoted\"",
    "note:",
    "remember",
    "milk",
    "eggs",
    "🙂",
    "budget",
    "draft",
    "email",
    "Zoë",
    "über-fast",
    "project",
    "deadline",
    "call",
    "Jürgen",
    "at",
    "three",
    "o'clock",
    "—",
    "so",
    "that",
    "is",
    "fine",
    "with",
    "me",
    "thanks",
    "ok",
    "next",
    "paragraph",
    "straße",
    "日本語",
    "tab\there",
    "line\nbreak",
    "back\\slash",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn sentence(rng: &mut Rng, words: usize) -> String {
    let mut s = String::new();
    for i in 0..words {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
    }
    s.push('.');
    s
}

/// `count` sentences of `words` words each from the shared word list (with accents, emoji and
/// quotes), the same for the same `seed`.
pub fn sentences(count: usize, words: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng(seed.max(1));
    (0..count).map(|_| sentence(&mut rng, words)).collect()
}

fn ts(i: u64) -> String {
    format!(
        "2026-03-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        1 + (i / 86_400_000) % 28,
        (i / 3_600_000) % 24,
        (i / 60_000) % 60,
        (i / 1000) % 60,
        i % 1000
    )
}

/// Writes a session of about `mb` MiB; returns its path (reused when already present).
pub fn generate(mb: u64) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-data");
    generate_in(&dir, mb)
}

/// Writes a session of about `mb` MiB under `dir` (reused when already present).
pub fn generate_in(dir: &Path, mb: u64) -> PathBuf {
    fs::create_dir_all(dir).expect("bench dir");
    let path = dir.join(format!("validate-{mb}mb.jsonl"));
    if path.exists() {
        return path;
    }
    let tmp = path.with_extension("tmp");
    let mut w = BufWriter::with_capacity(1 << 20, File::create(&tmp).expect("create"));
    let header = Header {
        id: "019a0000-0000-7000-8000-000000000001".into(),
        timestamp: ts(0),
    };
    writeln!(w, "{}", header.to_line()).expect("write");
    let target = mb << 20;
    let mut written = 0u64;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut n = 0u64;
    let mut parent: Option<String> = None;
    let mut seq = 0u64;
    let mut wav_offset: u64;
    let mut last_message: Option<String> = None;
    let emit = |w: &mut BufWriter<File>,
                body: EntryBody,
                parent: &mut Option<String>,
                n: &mut u64|
     -> u64 {
        *n += 1;
        let id = format!("019a{:012x}-7{:03x}-8000-{:012x}", *n, *n % 4096, *n);
        let e = Entry {
            id: id.clone(),
            parent_id: parent.clone(),
            timestamp: ts(*n * 37),
            body,
        };
        let line = e.to_line();
        writeln!(w, "{line}").expect("write");
        *parent = Some(id);
        line.len() as u64 + 1
    };
    let conn = "conn-019a0000".to_string();
    while written < target {
        // One utterance: recording start, ~20 audio appends, ~15 deltas, completion, message.
        let rec = format!("rec-{n}");
        wav_offset = 44; // each recording has its own WAV
        written += emit(
            &mut w,
            EntryBody::RecordingStarted(RecordingStarted {
                recording_id: rec.clone(),
                asset: format!("assets/{rec}.wav"),
            }),
            &mut parent,
            &mut n,
        );
        for _ in 0..20 {
            seq += 1;
            let mut payload = Map::new();
            payload.insert("type".into(), json!("input_audio_buffer.append"));
            payload.insert("event_id".into(), json!(format!("evt_{seq:016x}")));
            payload.insert("audio".into(), Value::Null);
            let len = 4800u64;
            written += emit(
                &mut w,
                EntryBody::RealtimeEvent(RealtimeEvent {
                    connection_id: conn.clone(),
                    direction: Direction::Outgoing,
                    observation: Observation::SendAttempt,
                    observed_at: ts(seq * 100),
                    sequence: seq,
                    payload,
                    remote_event_id: None,
                    redactions: None,
                    media: Some(vec![MediaRef {
                        pointer: "/audio".into(),
                        asset: AssetRef::Available {
                            path: format!("assets/{rec}.wav"),
                            mime_type: "audio/wav".into(),
                            byte_range: Some(ByteRange {
                                start: wav_offset,
                                end: wav_offset + len,
                            }),
                            encoding: Some("pcm_s16le".into()),
                            sha256: None,
                        },
                    }]),
                }),
                &mut parent,
                &mut n,
            );
            wav_offset += len;
        }
        let words = 20 + rng.below(60) as usize;
        let text = sentence(&mut rng, words);
        for chunk in text.as_bytes().chunks(24).take(15) {
            seq += 1;
            let delta = String::from_utf8_lossy(chunk).into_owned();
            let payload = json!({"type":"conversation.item.input_audio_transcription.delta","event_id":format!("event_{seq:x}"),"item_id":format!("item_{n:x}"),"content_index":0,"delta":delta});
            let Value::Object(payload) = payload else {
                unreachable!()
            };
            written += emit(
                &mut w,
                EntryBody::RealtimeEvent(RealtimeEvent {
                    connection_id: conn.clone(),
                    direction: Direction::Incoming,
                    observation: Observation::Received,
                    observed_at: ts(seq * 100),
                    sequence: seq,
                    payload,
                    remote_event_id: Some(format!("event_{seq:x}")),
                    redactions: None,
                    media: None,
                }),
                &mut parent,
                &mut n,
            );
        }
        seq += 1;
        let payload = json!({"type":"conversation.item.input_audio_transcription.completed","event_id":format!("event_{seq:x}"),"item_id":format!("item_{n:x}"),"content_index":0,"transcript":text,"usage":{"type":"tokens","total_tokens":120,"input_tokens":100,"output_tokens":20}});
        let Value::Object(payload) = payload else {
            unreachable!()
        };
        written += emit(
            &mut w,
            EntryBody::RealtimeEvent(RealtimeEvent {
                connection_id: conn.clone(),
                direction: Direction::Incoming,
                observation: Observation::Received,
                observed_at: ts(seq * 100),
                sequence: seq,
                payload,
                remote_event_id: Some(format!("event_{seq:x}")),
                redactions: None,
                media: None,
            }),
            &mut parent,
            &mut n,
        );
        let mut msg = Message::new(Role::User, vec![Block::text(text)], 1_772_000_000_000 + n);
        let mut replay = Map::new();
        replay.insert("itemId".into(), json!(format!("item_{n:x}")));
        replay.insert("connectionId".into(), json!(conn));
        msg.replay = Some(replay);
        written += emit(&mut w, EntryBody::Message(msg), &mut parent, &mut n);
        last_message = parent.clone().or(last_message);
        if rng.below(4) == 0 {
            let reply = Message::new(
                Role::Assistant,
                vec![Block::text(sentence(&mut rng, 40))],
                1_772_000_000_000 + n,
            );
            written += emit(&mut w, EntryBody::Message(reply), &mut parent, &mut n);
        }
        written += emit(
            &mut w,
            EntryBody::RecordingFinished(RecordingFinished {
                recording_id: rec,
                duration_ms: 2000,
                outcome: persyk::session::format::Outcome::Complete,
                gaps: None,
            }),
            &mut parent,
            &mut n,
        );
        if rng.below(10) == 0 {
            written += emit(
                &mut w,
                EntryBody::Custom(Custom {
                    custom_type: "persyk.ui".into(),
                    data: json!({"scroll": n, "pinned": true}),
                }),
                &mut parent,
                &mut n,
            );
        }
        if rng.below(20) == 0 {
            let target = last_message.clone().unwrap_or_default();
            written += emit(
                &mut w,
                EntryBody::Label(Label {
                    target_id: target,
                    label: Some(sentence(&mut rng, 3)),
                }),
                &mut parent,
                &mut n,
            );
            written += emit(
                &mut w,
                EntryBody::SessionInfo(SessionInfo {
                    name: Some(sentence(&mut rng, 4)),
                    archived: None,
                }),
                &mut parent,
                &mut n,
            );
        }
    }
    w.flush().expect("flush");
    drop(w);
    fs::rename(&tmp, &path).expect("rename");
    path
}

/// Peak resident set size of this process, KiB (Linux `VmHWM`).
pub fn vm_hwm_kib() -> u64 {
    let mut s = String::new();
    if File::open("/proc/self/status")
        .and_then(|mut f| f.read_to_string(&mut s))
        .is_err()
    {
        return 0;
    }
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Bytes of audio each generated utterance references (20 appends of 100 ms, 24 kHz PCM16).
pub const UTTERANCE_WAV_BYTES: u64 = 44 + 20 * 4800;

/// Writes a WAV asset of [`UTTERANCE_WAV_BYTES`] for every `recording.started` in `session`
/// (real bytes: a quiet tone), so the session folder holds its audio the way Persyk's do.
/// Returns the number of assets and their total size.
pub fn write_assets(session: &Path, assets: &Path) -> (u64, u64) {
    fs::create_dir_all(assets).expect("assets dir");
    let text = fs::read(session).expect("read session");
    let needle = b"\"recording.started\",\"id\"";
    let mut names = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        if line.windows(needle.len()).any(|w| w == needle) {
            let v: Value = serde_json::from_slice(line).expect("json");
            if let Some(asset) = v.get("asset").and_then(Value::as_str) {
                names.push(asset.trim_start_matches("assets/").to_owned());
            }
        }
    }
    let mut wav = Vec::with_capacity(UTTERANCE_WAV_BYTES as usize);
    let data = (UTTERANCE_WAV_BYTES - 44) as u32;
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + data).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes());
    wav.extend_from_slice(&1u16.to_le_bytes());
    wav.extend_from_slice(&1u16.to_le_bytes());
    wav.extend_from_slice(&24_000u32.to_le_bytes());
    wav.extend_from_slice(&48_000u32.to_le_bytes());
    wav.extend_from_slice(&2u16.to_le_bytes());
    wav.extend_from_slice(&16u16.to_le_bytes());
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&data.to_le_bytes());
    for i in 0..data / 2 {
        let s = ((i as f64 * 0.05).sin() * 800.0) as i16;
        wav.extend_from_slice(&s.to_le_bytes());
    }
    let mut total = 0;
    for name in &names {
        let p = assets.join(name);
        if !p.exists() {
            fs::write(&p, &wav).expect("write wav");
        }
        total += wav.len() as u64;
    }
    (names.len() as u64, total)
}

/// One session of a generated search corpus ([`write_session_in`]).
pub struct SessionSpec<'a> {
    /// Header id.
    pub id: &'a str,
    /// Header timestamp.
    pub created: &'a str,
    /// Approximate size of `session.jsonl`, bytes.
    pub bytes: u64,
    pub seed: u64,
    /// Words dictated once each, at a random utterance: they land in a user message and, as
    /// in a real transcript, in that utterance's deltas and completion event.
    pub planted: &'a [&'a str],
}

/// Writes `dir/session.jsonl` (about `spec.bytes`) and an empty `dir/assets/`: utterances as
/// in [`generate_in`] — recording lifecycle, audio appends whose bytes live in the WAV
/// (referenced by byte range, not stored), transcription deltas and completions, the user
/// message, sometimes an assistant reply, custom UI state, labels and a session name.
pub fn write_session_in(dir: &Path, spec: &SessionSpec<'_>) -> PathBuf {
    fs::create_dir_all(dir.join("assets")).expect("session dir");
    let path = dir.join("session.jsonl");
    let mut w = BufWriter::with_capacity(1 << 16, File::create(&path).expect("create"));
    let header = Header {
        id: spec.id.into(),
        timestamp: spec.created.into(),
    };
    writeln!(w, "{}", header.to_line()).expect("write");
    let mut rng = Rng(spec.seed | 1);
    // Where each planted word goes: utterance numbers, estimated from ~5.5 KB per utterance.
    let utterances = (spec.bytes / 5500).max(1);
    let mut plants: Vec<(u64, &str)> = spec
        .planted
        .iter()
        .map(|w| (rng.below(utterances), *w))
        .collect();
    plants.sort_unstable();
    let mut written = header.to_line().len() as u64 + 1;
    let (mut n, mut seq, mut u) = (0u64, 0u64, 0u64);
    let mut wav_offset: u64;
    let mut parent: Option<String> = None;
    let conn = format!("conn-{}", spec.id);
    let mut emit = |w: &mut BufWriter<File>, body: EntryBody, parent: &mut Option<String>| {
        n += 1;
        let id = format!("{}-{n:06x}", &spec.id[..8.min(spec.id.len())]);
        let line = Entry {
            id: id.clone(),
            parent_id: parent.replace(id),
            timestamp: ts(n * 37),
            body,
        }
        .to_line();
        writeln!(w, "{line}").expect("write");
        line.len() as u64 + 1
    };
    while written < spec.bytes || plants.iter().any(|&(at, _)| at >= u) {
        let rec = format!("rec-{u}");
        let asset = format!("assets/{rec}.wav");
        wav_offset = 44; // each recording has its own WAV
        written += emit(
            &mut w,
            EntryBody::RecordingStarted(RecordingStarted {
                recording_id: rec.clone(),
                asset: asset.clone(),
            }),
            &mut parent,
        );
        for _ in 0..10 {
            seq += 1;
            let mut payload = Map::new();
            payload.insert("type".into(), json!("input_audio_buffer.append"));
            payload.insert("event_id".into(), json!(format!("evt_{seq:016x}")));
            payload.insert("audio".into(), Value::Null);
            written += emit(
                &mut w,
                EntryBody::RealtimeEvent(RealtimeEvent {
                    connection_id: conn.clone(),
                    direction: Direction::Outgoing,
                    observation: Observation::SendAttempt,
                    observed_at: ts(seq * 100),
                    sequence: seq,
                    payload,
                    remote_event_id: None,
                    redactions: None,
                    media: Some(vec![MediaRef {
                        pointer: "/audio".into(),
                        asset: AssetRef::Available {
                            path: asset.clone(),
                            mime_type: "audio/wav".into(),
                            byte_range: Some(ByteRange {
                                start: wav_offset,
                                end: wav_offset + 4800,
                            }),
                            encoding: Some("pcm_s16le".into()),
                            sha256: None,
                        },
                    }]),
                }),
                &mut parent,
            );
            wav_offset += 4800;
        }
        let words = 15 + rng.below(40) as usize;
        let mut text = sentence(&mut rng, words);
        while plants.first().is_some_and(|&(at, _)| at <= u) {
            let (_, word) = plants.remove(0);
            text = format!("{text} {word} {}", sentence(&mut rng, 5));
        }
        let chars: Vec<char> = text.chars().collect();
        for chunk in chars.chunks(24) {
            seq += 1;
            let delta: String = chunk.iter().collect();
            let Value::Object(payload) = json!({"type":"conversation.item.input_audio_transcription.delta","event_id":format!("event_{seq:x}"),"item_id":format!("item_{u:x}"),"content_index":0,"delta":delta})
            else {
                unreachable!()
            };
            written += emit(
                &mut w,
                EntryBody::RealtimeEvent(RealtimeEvent {
                    connection_id: conn.clone(),
                    direction: Direction::Incoming,
                    observation: Observation::Received,
                    observed_at: ts(seq * 100),
                    sequence: seq,
                    payload,
                    remote_event_id: Some(format!("event_{seq:x}")),
                    redactions: None,
                    media: None,
                }),
                &mut parent,
            );
        }
        seq += 1;
        let Value::Object(payload) = json!({"type":"conversation.item.input_audio_transcription.completed","event_id":format!("event_{seq:x}"),"item_id":format!("item_{u:x}"),"content_index":0,"transcript":text,"usage":{"type":"tokens","total_tokens":120,"input_tokens":100,"output_tokens":20}})
        else {
            unreachable!()
        };
        written += emit(
            &mut w,
            EntryBody::RealtimeEvent(RealtimeEvent {
                connection_id: conn.clone(),
                direction: Direction::Incoming,
                observation: Observation::Received,
                observed_at: ts(seq * 100),
                sequence: seq,
                payload,
                remote_event_id: Some(format!("event_{seq:x}")),
                redactions: None,
                media: None,
            }),
            &mut parent,
        );
        let mut msg = Message::new(Role::User, vec![Block::text(text)], 1_772_000_000_000 + u);
        let mut replay = Map::new();
        replay.insert("itemId".into(), json!(format!("item_{u:x}")));
        replay.insert("connectionId".into(), json!(conn));
        msg.replay = Some(replay);
        written += emit(&mut w, EntryBody::Message(msg), &mut parent);
        let message_id = parent.clone().unwrap_or_default();
        if rng.below(4) == 0 {
            let reply = Message::new(
                Role::Assistant,
                vec![Block::text(sentence(&mut rng, 30))],
                1_772_000_000_000 + u,
            );
            written += emit(&mut w, EntryBody::Message(reply), &mut parent);
        }
        written += emit(
            &mut w,
            EntryBody::RecordingFinished(RecordingFinished {
                recording_id: rec,
                duration_ms: 2000 + rng.below(8000),
                outcome: persyk::session::format::Outcome::Complete,
                gaps: None,
            }),
            &mut parent,
        );
        if rng.below(10) == 0 {
            written += emit(
                &mut w,
                EntryBody::Custom(Custom {
                    custom_type: "persyk.ui".into(),
                    data: json!({"scroll": u, "pinned": true}),
                }),
                &mut parent,
            );
        }
        if rng.below(25) == 0 {
            written += emit(
                &mut w,
                EntryBody::Label(Label {
                    target_id: message_id,
                    label: Some(sentence(&mut rng, 3)),
                }),
                &mut parent,
            );
        }
        if u == 0 && rng.below(3) == 0 {
            written += emit(
                &mut w,
                EntryBody::SessionInfo(SessionInfo {
                    name: Some(sentence(&mut rng, 4)),
                    archived: None,
                }),
                &mut parent,
            );
        }
        u += 1;
    }
    w.flush().expect("flush");
    path
}

/// A session of `messages` user and assistant messages in one chain (about 1.6 KB a line,
/// realistic text), written to `dir/session.jsonl` once and reused. Ids are 39 characters of
/// lowercase hex and dashes. Returns the file.
pub fn chain_session(dir: &Path, messages: u64) -> PathBuf {
    let file = dir.join("session.jsonl");
    if file.exists() {
        return file;
    }
    fs::create_dir_all(dir).expect("bench dir");
    let pool = sentences(509, 220, 0x5EED_0015);
    let tmp = dir.join("session.tmp");
    let mut w = BufWriter::with_capacity(1 << 20, File::create(&tmp).expect("create"));
    let header = Header {
        id: "019a0000-0000-7000-8000-0000000000aa".into(),
        timestamp: ts(0),
    };
    writeln!(w, "{}", header.to_line()).expect("write");
    let mut parent: Option<String> = None;
    for n in 0..messages {
        let id = format!("019a{:012x}-7{:03x}-8000-{:012x}", n + 1, n % 4096, n + 1);
        let role = if n % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        let text = pool[(n % pool.len() as u64) as usize].clone();
        let e = Entry {
            id: id.clone(),
            parent_id: parent.take(),
            timestamp: ts(n * 37),
            body: EntryBody::Message(Message::new(
                role,
                vec![Block::text(text)],
                1_772_000_000_000 + n,
            )),
        };
        writeln!(w, "{}", e.to_line()).expect("write");
        parent = Some(id);
    }
    w.flush().expect("flush");
    drop(w);
    fs::rename(&tmp, &file).expect("rename");
    file
}

/// The first words of message `n` of a [`chain_session`].
pub fn chain_text(n: u64) -> String {
    let pool = sentences(509, 220, 0x5EED_0015);
    pool[(n % pool.len() as u64) as usize].clone()
}

/// Resident set size of this process now, KiB (Linux `VmRSS`).
pub fn vm_rss_kib() -> u64 {
    let mut s = String::new();
    if File::open("/proc/self/status")
        .and_then(|mut f| f.read_to_string(&mut s))
        .is_err()
    {
        return 0;
    }
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// CPU time this thread has used so far: beside a frame's wall time, it tells work from time
/// the thread spent waiting for a core (a 2-core machine preempts).
pub fn thread_cpu() -> std::time::Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to fill.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0;
    if !ok {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// This thread's (voluntary, involuntary) context switches so far: a voluntary one is a wait
/// (a lock, I/O), an involuntary one a preemption. Linux only (macOS has no per-thread
/// `getrusage`): elsewhere (0, 0).
#[cfg(not(target_os = "linux"))]
pub fn thread_switches() -> (i64, i64) {
    (0, 0)
}

/// See the other `thread_switches`.
#[cfg(target_os = "linux")]
pub fn thread_switches() -> (i64, i64) {
    // SAFETY: an all-zero rusage is valid, and `getrusage` fills it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid rusage for the call to fill.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) } != 0 {
        return (0, 0);
    }
    (u.ru_nvcsw, u.ru_nivcsw)
}
