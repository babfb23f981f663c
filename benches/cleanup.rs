//! Clean-up figures (issue #27), each beside a baseline measured in the same run:
//!
//! 1. The fidelity guard's cost per 100 words (a 100-word and a 1,000-word dictation against
//!    a tidy version and a rewrite, both accepted, and a Tidy with one day changed, refused),
//!    beside splitting and lower-casing
//!    the same two texts (the least any word comparison does). `PERSYK_BENCH_PART=guard`
//!    runs this part alone.
//! 2. Added latency from the stop to the delivered text with a model on loopback (a scripted
//!    OpenAI-compatible server that answers at once, so the figure is Persyk's own cost:
//!    prompt, HTTP, extraction, guard, the fsynced `persyk.cleanup` entry), p50/p95 over
//!    `PERSYK_BENCH_CLEANUP_RUNS` (default 40) dictations, beside replacements only (no
//!    model) and beside a bare HTTP round trip to the same server.
//!
//! 3. The same with a real small model (SmolLM2-135M-Instruct Q4_1 on the CPU, served on
//!    loopback by `tests/llm_server/server.mjs`, from `scripts/fetch-test-llm`), p50/p95 over
//!    `PERSYK_BENCH_CLEANUP_MODEL_RUNS` (default 10) dictations after one warm-up, beside the
//!    model's own time for the same request as the server reports it, and the difference
//!    (Persyk's share: prompt, HTTP, extraction, guard, the fsynced entry).
//!    Skipped, with a note, when the model is not fetched.
//!
//! Run: `cargo bench --bench cleanup`. Nothing is asserted.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use persyk::cleanup::client::{Client, ServerConfig, Timeouts};
use persyk::cleanup::prompt::ModelMode;
use persyk::cleanup::replace::{Replacements, Rule};
use persyk::cleanup::{Chosen, Cleaner, ModelSetup, Source, guard};
use persyk::session::format::{Block, EntryBody, Message, Role};
use persyk::session::store::Roots;
use persyk::session::{LeafSelector, Store};

const SENTENCE: &str = "um so I think we should uh move the weekly planning meeting to \
    Friday at three because the design review runs late on Thursdays";
const TIDY: &str = "I think we should move the weekly planning meeting to Friday at 3 \
    because the design review runs late on Thursdays.";
/// A rewrite of the same words (Polish): Tidy's rule fails, the meaning check runs.
const POLISH: &str = "I think we should move the weekly planning meeting to Friday at 3, since \
    the design review tends to run late on Thursdays.";

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn guard_cost() {
    println!("1. fidelity guard, per 100 spoken words (target: <= 1 ms per 100 words at 1,000)");
    for n in [100usize, 1000] {
        let times = n.div_ceil(SENTENCE.split_whitespace().count());
        let repeat = |t: &str| vec![t; times].join(" ");
        // The recognizer's sentences end in a period, so each "um so" opens a sentence.
        let spoken = vec![SENTENCE; times].join(". ");
        let words_spoken = spoken.split_whitespace().count();
        let rounds = if n == 100 { 2000 } else { 100 };
        let per100 = |d: Duration| d.as_secs_f64() * 1e6 * 100.0 / words_spoken as f64;
        let mut keep = 0usize;
        let mut run = |output: &str, strictness: guard::Strictness, accept: bool| {
            let (_, verdict) = guard::check(&spoken, output, strictness);
            assert_eq!(verdict.is_ok(), accept, "{verdict:?}");
            let start = Instant::now();
            for _ in 0..rounds {
                let (f, _) = guard::check(&spoken, output, strictness);
                keep += f.output_words;
            }
            start.elapsed() / rounds as u32
        };
        let tidy = run(&repeat(TIDY), guard::Strictness::Strict, true);
        let polish = run(&repeat(POLISH), guard::Strictness::Rewrite, true);
        // One day changed in the last sentence: Tidy prices every edit to name the change.
        let mut changed = repeat(TIDY);
        if let Some(at) = changed.rfind("Friday") {
            changed.replace_range(at..at + "Friday".len(), "Monday");
        }
        let refused = run(&changed, guard::Strictness::Strict, false);
        let output = repeat(TIDY);
        let start = Instant::now();
        for _ in 0..rounds {
            keep += spoken
                .split_whitespace()
                .chain(output.split_whitespace())
                .map(str::to_lowercase)
                .count();
        }
        let base = start.elapsed() / rounds as u32;
        println!(
            "   {words_spoken:>5} words: Tidy {:>7.1} µs, Polish {:>7.1} µs, a refused Tidy {:>7.1} µs per 100 words | baseline split+lowercase {:>6.1} µs per 100 words ({keep})",
            per100(tidy),
            per100(polish),
            per100(refused),
            per100(base)
        );
    }
}

/// A chat server that answers every request at once with `TIDY`.
fn serve() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
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
                let reply = serde_json::json!({"choices": [{"message": {"role": "assistant",
                    "content": TIDY}, "finish_reason": "stop"}]})
                .to_string();
                let mut s = stream;
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            });
        }
    });
    addr
}

/// One dictation of [`SENTENCE`] in a new session of `store`, committed as the recognizer
/// does, then cleaned by `cleaner` (its wait included).
fn clean_once(store: &Store, cleaner: &Cleaner) -> persyk::cleanup::Cleaned {
    let handle = store.create_session().expect("session");
    let mut c = handle
        .continuation(&LeafSelector::Default)
        .expect("continuation");
    let id = c
        .append_one(EntryBody::Message(Message::new(
            Role::User,
            vec![Block::text(SENTENCE)],
            1,
        )))
        .expect("spoken");
    cleaner
        .start(
            &handle,
            &[Source {
                id,
                text: SENTENCE.into(),
            }],
            None,
        )
        .wait()
}

fn latency() {
    let runs: usize = std::env::var("PERSYK_BENCH_CLEANUP_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let addr = serve();
    let client = Arc::new(
        Client::new(
            ServerConfig {
                base_url: format!("http://{addr}/v1"),
                model: "bench".into(),
                api_key: None,
            },
            Timeouts::default(),
        )
        .expect("client"),
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = Store::new(Roots::new(tmp.path().join("sessions"), Vec::new()).expect("roots"));
    let with_model = Cleaner {
        model: Some(ModelSetup {
            mode: ModelMode::Tidy,
            client: client.clone(),
        }),
        ..Cleaner::default()
    };
    let replacements_only = Cleaner {
        replacements: Replacements::new(&[Rule {
            from: "meeting".into(),
            to: "call".into(),
        }])
        .expect("rules"),
        ..Cleaner::default()
    };
    let mut model = Vec::new();
    let mut replaced = Vec::new();
    let mut bare = Vec::new();
    let mut rejected = 0;
    for _ in 0..runs {
        for (cleaner, out) in [
            (&with_model, &mut model),
            (&replacements_only, &mut replaced),
        ] {
            let cleaned = clean_once(&store, cleaner);
            if cleaned.chosen == Chosen::Spoken {
                rejected += 1;
            }
            out.push(cleaned.latency);
        }
        // A bare request: connect, send, read the reply.
        let start = Instant::now();
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        let body = "{}";
        let _ = write!(
            s,
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        bare.push(start.elapsed());
    }
    for v in [&mut model, &mut replaced, &mut bare] {
        v.sort();
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "2. added latency, stop → delivered text ({runs} dictations, {rejected} not delivered)"
    );
    println!(
        "   loopback model (Tidy): p50 {:>6.2} ms  p95 {:>6.2} ms",
        ms(pct(&model, 0.5)),
        ms(pct(&model, 0.95))
    );
    println!(
        "   baseline replacements only: p50 {:>6.2} ms  p95 {:>6.2} ms",
        ms(pct(&replaced, 0.5)),
        ms(pct(&replaced, 0.95))
    );
    println!(
        "   baseline bare HTTP round trip: p50 {:>6.2} ms  p95 {:>6.2} ms",
        ms(pct(&bare, 0.5)),
        ms(pct(&bare, 0.95))
    );
}

/// The real-model server of `scripts/fetch-test-llm`, killed on drop; `served` hears the
/// server's own time for each completion (ms) and the tokens it produced.
struct ModelServer {
    child: std::process::Child,
    port: u16,
    served: std::sync::mpsc::Receiver<(f64, u64)>,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn model_server() -> Option<ModelServer> {
    let cache = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-llm");
    let model = cache.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    let script = cache.join("server/server.mjs");
    if !model.is_file() || !script.is_file() {
        return None;
    }
    let mut child = std::process::Command::new("node")
        .arg(&script)
        .arg("--model")
        .arg(&model)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    let stdout = child.stdout.take()?;
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    let (served_tx, served) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(p) = line.strip_prefix("listening ") {
                let _ = port_tx.send(p.trim().parse::<u16>().ok());
            } else if let Some(rest) = line.strip_prefix("served ") {
                let mut f = rest.split_whitespace();
                if let (Some(Ok(ms)), Some(Ok(tokens))) = (
                    f.next().map(str::parse::<f64>),
                    f.next().map(str::parse::<u64>),
                ) {
                    let _ = served_tx.send((ms, tokens));
                }
            }
        }
    });
    match port_rx.recv_timeout(Duration::from_secs(120)) {
        Ok(Some(port)) => Some(ModelServer {
            child,
            port,
            served,
        }),
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
    }
}

fn real_model() {
    let Some(server) = model_server() else {
        println!("3. real model: skipped (run scripts/fetch-test-llm)");
        return;
    };
    let runs: usize = std::env::var("PERSYK_BENCH_CLEANUP_MODEL_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let client = Arc::new(
        Client::new(
            ServerConfig {
                base_url: format!("http://127.0.0.1:{}/v1", server.port),
                model: "smollm2-135m".into(),
                api_key: None,
            },
            Timeouts {
                connect: Duration::from_secs(5),
                total: Duration::from_secs(300),
            },
        )
        .expect("client"),
    );
    let cleaner = Cleaner {
        model: Some(ModelSetup {
            mode: ModelMode::Tidy,
            client,
        }),
        deadline: Duration::from_secs(300),
        ..Cleaner::default()
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = Store::new(Roots::new(tmp.path().join("sessions"), Vec::new()).expect("roots"));
    let mut total = Vec::new();
    let mut model = Vec::new();
    let mut added = Vec::new();
    let mut tokens = Vec::new();
    let mut rejected = 0;
    // One warm-up, then the runs.
    for run in 0..=runs {
        let cleaned = clean_once(&store, &cleaner);
        let Ok((served_ms, produced)) = server.served.recv_timeout(Duration::from_secs(10)) else {
            println!("3. real model: the server did not report a completion");
            return;
        };
        if run == 0 {
            continue;
        }
        if cleaned.chosen == Chosen::Spoken {
            rejected += 1;
        }
        let ms = cleaned.latency.as_secs_f64() * 1e3;
        total.push(ms);
        model.push(served_ms);
        added.push(ms - served_ms);
        tokens.push(produced as f64);
    }
    let p = |v: &mut Vec<f64>, q: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() as f64 - 1.0) * q).round() as usize]
    };
    println!(
        "3. real model (SmolLM2-135M Q4_1, CPU, Tidy): stop → delivered text ({runs} dictations, {rejected} not delivered)"
    );
    println!(
        "   Persyk, stop → text: p50 {:>8.1} ms  p95 {:>8.1} ms",
        p(&mut total, 0.5),
        p(&mut total, 0.95)
    );
    println!(
        "   baseline, the model's own time in the server: p50 {:>8.1} ms  p95 {:>8.1} ms ({:.0}–{:.0} tokens)",
        p(&mut model, 0.5),
        p(&mut model, 0.95),
        p(&mut tokens, 0.0),
        p(&mut tokens, 1.0)
    );
    println!(
        "   the rest (Persyk, HTTP, JSON; difference per dictation): p50 {:>6.1} ms  p95 {:>6.1} ms",
        p(&mut added, 0.5),
        p(&mut added, 0.95)
    );
}

fn main() {
    // PERSYK_BENCH_PART=guard runs part 1 alone.
    let part = std::env::var("PERSYK_BENCH_PART").unwrap_or_default();
    guard_cost();
    if part == "guard" {
        return;
    }
    latency();
    real_model();
}
