//! A loopback HTTP server for model downloads (std `TcpListener`, one thread per connection),
//! scripted per connection, and a small "model" to serve. Shared by tests/models.rs and
//! tests/app_models.rs.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use persyk::local::GGML_MAGIC;
use sha2::{Digest, Sha256};

// ---------------------------------------------------------------------------------------------
// The server.

/// What one connection gets.
#[derive(Clone)]
pub enum Serve {
    /// The file, honouring `Range` (206) .
    Full,
    /// The file's headers (full length), then only this many body bytes, then close.
    CutAfter(usize),
    /// 200 and the whole file whatever the request asked.
    IgnoreRange,
    /// 200 with this body instead of the file.
    Body(Vec<u8>),
    /// Like `Full`, but one 64 KiB chunk every 20 ms after the first MiB.
    Trickle,
}

pub struct Server {
    pub addr: SocketAddr,
    /// The `Range` header of each request (in arrival order).
    pub ranges: Arc<Mutex<Vec<Option<String>>>>,
    /// The request paths.
    pub paths: Arc<Mutex<Vec<String>>>,
}

impl Server {
    pub fn url(&self) -> String {
        format!("http://{}/models", self.addr)
    }
    pub fn ranges(&self) -> Vec<Option<String>> {
        self.ranges.lock().unwrap().clone()
    }
}

/// Serves `content` (length `len`; `content(i)` is byte i) by `script`, one entry per
/// connection (the last repeats).
pub fn serve(len: usize, content: fn(usize) -> u8, script: Vec<Serve>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let ranges = Arc::new(Mutex::new(Vec::new()));
    let paths = Arc::new(Mutex::new(Vec::new()));
    let (r, p) = (ranges.clone(), paths.clone());
    std::thread::spawn(move || {
        for (i, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { return };
            let how = script[i.min(script.len() - 1)].clone();
            let (r, p) = (r.clone(), p.clone());
            std::thread::spawn(move || answer(stream, len, content, how, &r, &p));
        }
    });
    Server {
        addr,
        ranges,
        paths,
    }
}

fn answer(
    stream: TcpStream,
    len: usize,
    content: fn(usize) -> u8,
    how: Serve,
    ranges: &Mutex<Vec<Option<String>>>,
    paths: &Mutex<Vec<String>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut range = None;
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    paths
        .lock()
        .unwrap()
        .push(first.split_whitespace().nth(1).unwrap_or("").to_owned());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("range")
        {
            range = Some(v.trim().to_owned());
        }
    }
    ranges.lock().unwrap().push(range.clone());
    let mut out = stream;
    let start = match (&how, &range) {
        (Serve::IgnoreRange | Serve::Body(_), _) | (_, None) => 0,
        (_, Some(r)) => r
            .strip_prefix("bytes=")
            .and_then(|r| r.strip_suffix('-'))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
    };
    if let Serve::Body(body) = &how {
        let _ = write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = out.write_all(body);
        return;
    }
    if start > 0 {
        let _ = write!(
            out,
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-{}/{len}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            len - 1,
            len - start
        );
    } else {
        let _ = write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
        );
    }
    let end = match how {
        Serve::CutAfter(n) => (start + n).min(len),
        _ => len,
    };
    let mut at = start;
    let mut chunk = Vec::with_capacity(64 * 1024);
    while at < end {
        let to = (at + 64 * 1024).min(end);
        chunk.clear();
        chunk.extend((at..to).map(content));
        if out.write_all(&chunk).is_err() {
            return;
        }
        if matches!(how, Serve::Trickle) && at >= start + (1 << 20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        at = to;
    }
    let _ = out.flush();
    // Dropping the stream closes the connection (a cut when `end < len`).
}

// ---------------------------------------------------------------------------------------------
// A small "model": the ggml magic, then a pattern.

pub const MODEL_LEN: usize = 3 * 1024 * 1024 + 12_345;

pub fn model_byte(i: usize) -> u8 {
    match i {
        0..4 => GGML_MAGIC.to_le_bytes()[i],
        _ => (i.wrapping_mul(2_654_435_761) >> 13) as u8,
    }
}

pub fn not_a_model_byte(i: usize) -> u8 {
    model_byte(i + 4)
}

pub fn sha256_of(len: usize, content: fn(usize) -> u8) -> &'static str {
    let bytes: Vec<u8> = (0..len).map(content).collect();
    let digest = Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    Box::leak(hex.into_boxed_str())
}

// ---------------------------------------------------------------------------------------------
// A small but whole Whisper model: every tensor whisper.cpp expects, 8 wide, f16 weights.

/// A ggml Whisper file with the real layout (header, mel filters, a few tokens, every tensor
/// of a 4-layer encoder and a 1-layer decoder, 8 wide, f16 weights) whose tensor bytes
/// follow `seed`: files with different seeds have the same size and different hashes.
pub fn whisper_model(seed: u8) -> Vec<u8> {
    const STATE: i32 = 8;
    const MELS: i32 = 80;
    let mut out = Vec::new();
    fn put(out: &mut Vec<u8>, v: i32) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    put(&mut out, GGML_MAGIC as i32);
    // n_vocab, audio ctx/state/head/layer, text ctx/state/head/layer, mels, ftype (f16).
    for v in [51_864, 1_500, STATE, 1, 4, 448, STATE, 1, 1, MELS, 1] {
        put(&mut out, v);
    }
    put(&mut out, MELS);
    put(&mut out, 201);
    out.resize(out.len() + (MELS * 201 * 4) as usize, 0);
    put(&mut out, 3);
    for token in ["a", "b", "c"] {
        put(&mut out, token.len() as i32);
        out.extend_from_slice(token.as_bytes());
    }
    // (name, ne, type: 0 f32 / 1 f16)
    let mut tensors: Vec<(String, Vec<i32>, i32)> = vec![
        ("encoder.positional_embedding".into(), vec![STATE, 1_500], 0),
        ("encoder.conv1.weight".into(), vec![3, MELS, STATE], 1),
        ("encoder.conv1.bias".into(), vec![1, STATE], 0),
        ("encoder.conv2.weight".into(), vec![3, STATE, STATE], 1),
        ("encoder.conv2.bias".into(), vec![1, STATE], 0),
        ("encoder.ln_post.weight".into(), vec![STATE], 0),
        ("encoder.ln_post.bias".into(), vec![STATE], 0),
        ("decoder.positional_embedding".into(), vec![STATE, 448], 0),
        (
            "decoder.token_embedding.weight".into(),
            vec![STATE, 51_864],
            1,
        ),
        ("decoder.ln.weight".into(), vec![STATE], 0),
        ("decoder.ln.bias".into(), vec![STATE], 0),
    ];
    let blocks = (0..4)
        .map(|i| (format!("encoder.blocks.{i}"), false))
        .chain([("decoder.blocks.0".to_owned(), true)]);
    for (prefix, cross) in blocks {
        let mut add = |rest: &str, ne: Vec<i32>, ty: i32| {
            tensors.push((format!("{prefix}.{rest}"), ne, ty));
        };
        add("mlp_ln.weight", vec![STATE], 0);
        add("mlp_ln.bias", vec![STATE], 0);
        add("mlp.0.weight", vec![STATE, 4 * STATE], 1);
        add("mlp.0.bias", vec![4 * STATE], 0);
        add("mlp.2.weight", vec![4 * STATE, STATE], 1);
        add("mlp.2.bias", vec![STATE], 0);
        for a in if cross {
            vec!["attn", "cross_attn"]
        } else {
            vec!["attn"]
        } {
            add(&format!("{a}_ln.weight"), vec![STATE], 0);
            add(&format!("{a}_ln.bias"), vec![STATE], 0);
            for w in ["query", "key", "value", "out"] {
                add(&format!("{a}.{w}.weight"), vec![STATE, STATE], 1);
                if w != "key" {
                    add(&format!("{a}.{w}.bias"), vec![STATE], 0);
                }
            }
        }
    }
    for (name, ne, ty) in tensors {
        put(&mut out, ne.len() as i32);
        put(&mut out, name.len() as i32);
        put(&mut out, ty);
        for n in &ne {
            put(&mut out, *n);
        }
        out.extend_from_slice(name.as_bytes());
        let bytes = ne.iter().product::<i32>() as usize * if ty == 0 { 4 } else { 2 };
        let at = out.len();
        out.extend((0..bytes).map(|i| ((at + i) as u8).wrapping_mul(seed | 1).wrapping_add(seed)));
    }
    out
}
