//! Retention under a flood: a loopback server sends `rate_limits.updated` events at a fixed
//! rate (default 5,000/s for 20 s; `PERSYK_FLOOD_RATE`, `PERSYK_FLOOD_SECONDS`) to a real
//! engine writing a real session. Printed: events persisted per second, persistence latency
//! (server send → record visible in `session.jsonl`, measured by a tailing thread that polls
//! every millisecond, so it is an upper bound), peak RSS, and whether capture halted.
//!
//! Baseline in the same run: the same number of records appended straight through the store
//! in batches of 256 (what the writer thread does), without a websocket in front.
//!
//! Run: `cargo bench --bench realtime`. Nothing is asserted.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use persyk::realtime::engine::{self};
use persyk::realtime::protocol::Settings;
use persyk::recognize::EngineState;
use persyk::session::format::{Custom, EntryBody};
use persyk::session::store::Roots;
use persyk::session::{LeafSelector, SESSION_FILE, Store};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

mod support;
use support::vm_hwm_kib;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Tails `path`, recording (arrival − send) for every flood record, until `stop`.
fn tail(path: PathBuf, start: Instant, stop: Arc<AtomicBool>) -> (Vec<Duration>, u64, Duration) {
    let mut lat = Vec::new();
    let mut pos = 0u64;
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut count = 0u64;
    let mut last = Duration::ZERO;
    let mut file: Option<File> = None;
    loop {
        let done = stop.load(Ordering::SeqCst);
        if file.is_none() {
            file = File::open(&path).ok();
        }
        if let Some(f) = file.as_mut() {
            let _ = f.seek(SeekFrom::Start(pos));
            while let Ok(n) = f.read(&mut buf) {
                if n == 0 {
                    break;
                }
                pos += n as u64;
                pending.extend_from_slice(&buf[..n]);
            }
            let now = start.elapsed();
            while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=nl).collect();
                if let Some(i) = find(&line, b"\"flood_us\":") {
                    let digits: String = line[i + 11..]
                        .iter()
                        .take_while(|b| b.is_ascii_digit())
                        .map(|&b| b as char)
                        .collect();
                    if let Ok(us) = digits.parse::<u64>() {
                        lat.push(now.saturating_sub(Duration::from_micros(us)));
                        count += 1;
                        last = now;
                    }
                }
            }
        }
        if done {
            return (lat, count, last);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v.get(((v.len().max(1) - 1) as f64 * p) as usize)
        .copied()
        .unwrap_or_default()
}

async fn flood_server(
    listener: TcpListener,
    rate: u64,
    seconds: u64,
    start: Instant,
    done: tokio::sync::oneshot::Sender<u64>,
) {
    let Ok((tcp, _)) = listener.accept().await else {
        let _ = done.send(0);
        return;
    };
    let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
        let _ = done.send(0);
        return;
    };
    let created = json!({"type":"session.created","event_id":"event_0","session":{"type":"transcription","id":"sess_flood","object":"realtime.transcription_session"}});
    let _ = ws.send(Message::Text(created.to_string().into())).await;
    let total = rate * seconds;
    let mut sent = 0u64;
    let begin = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    while sent < total {
        tick.tick().await;
        let due = ((begin.elapsed().as_secs_f64() * rate as f64) as u64).min(total);
        while sent < due {
            sent += 1;
            let ev = json!({"type":"rate_limits.updated","event_id":format!("event_{sent}"),
                "rate_limits":[{"name":"requests","limit":1000,"remaining":999,"reset_seconds":1.5}],
                "flood_us": start.elapsed().as_micros() as u64});
            if ws.send(Message::Text(ev.to_string().into())).await.is_err() {
                let _ = done.send(sent);
                return;
            }
        }
        // Drain whatever the client sent (session.update, pings).
        while let Ok(Some(Ok(_))) = tokio::time::timeout(Duration::ZERO, ws.next()).await {}
    }
    let _ = done.send(sent);
    // Keep the connection open until the client closes it (its stop), at most 30 s.
    let _ = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(Ok(m)) = ws.next().await {
            if matches!(m, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}

fn session_file(store: &Store) -> PathBuf {
    let h = store.create_session().expect("session");
    h.dir().join(SESSION_FILE)
}

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let rate = env_u64("PERSYK_FLOOD_RATE", 5000);
    let seconds = env_u64("PERSYK_FLOOD_SECONDS", 20);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-realtime");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let store = Store::new(Roots::new(dir.clone(), Vec::new()).expect("roots"));

    // Baseline: the same number of records straight through the store, 256 per batch.
    let base_file = session_file(&store);
    let base = store
        .open_path(base_file.parent().unwrap_or(Path::new(".")))
        .expect("open");
    let mut c = base.continuation(&LeafSelector::Default).expect("leaf");
    let total = rate * seconds;
    let t = Instant::now();
    let mut done = 0;
    while done < total {
        let n = (total - done).min(256);
        let bodies = (0..n)
            .map(|i| {
                EntryBody::Custom(Custom {
                    custom_type: "bench".into(),
                    data: json!({"rate_limits":[{"name":"requests","limit":1000,"remaining":999}],"i": done + i}),
                })
            })
            .collect();
        c.append(bodies).into_result().expect("append");
        done += n;
    }
    let base_rate = total as f64 / t.elapsed().as_secs_f64();

    // The engine under a flood.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let file = session_file(&store);
    let handle = store
        .open_path(file.parent().unwrap_or(Path::new(".")))
        .expect("open");
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let tailer = {
        let (file, stop) = (file.clone(), stop.clone());
        std::thread::spawn(move || tail(file, start, stop))
    };
    let (sent, report, halted) = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let server = tokio::spawn(flood_server(listener, rate, seconds, start, done_tx));
        let settings = Settings {
            base_url: format!("ws://{addr}/v1"),
            ..Settings::default()
        };
        let cont = handle.continuation(&LeafSelector::Default).expect("leaf");
        let eng = engine::start(settings, "sk-bench".into(), cont, None);
        let mut view = eng.view();
        let sent = done_rx.await.unwrap_or(0);
        let halted = matches!(view.borrow_and_update().state, EngineState::Halted(_));
        let report = eng.stop().await;
        let _ = server.await;
        (sent, report, halted)
    });
    let elapsed = start.elapsed();
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::SeqCst);
    let (mut lat, persisted, last) = tailer.join().unwrap_or_default();
    let p50 = pct(&mut lat, 0.5);
    let p99 = pct(&mut lat, 0.99);
    let max = lat.last().copied().unwrap_or_default();
    println!("realtime: flood {rate} events/s for {seconds} s over a loopback websocket");
    println!("realtime:   server sent {sent} events; persisted {persisted} flood records");
    println!(
        "realtime:   persisted {:.0} events/s until the last flood record was on disk ({:.1} s; whole run incl. the 10 s stop drain {:.1} s; offered {rate}/s)",
        persisted as f64 / last.as_secs_f64(),
        last.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    println!(
        "realtime:   persistence latency p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
    println!(
        "realtime:   peak RSS {:.1} MiB",
        vm_hwm_kib() as f64 / 1024.0
    );
    let halted = halted || report.halted.is_some();
    println!(
        "realtime:   capture halted: {}{}",
        if halted { "YES" } else { "no" },
        report
            .halted
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    );
    println!(
        "realtime:   baseline: store appends in batches of 256, no websocket: {base_rate:.0} records/s"
    );
}
