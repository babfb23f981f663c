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
