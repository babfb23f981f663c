//! The update check's test side: the signed feed fixtures of `fixtures/update/` (made by
//! `fixtures/update/regenerate` with a committed TEST key) and a loopback HTTP server that
//! serves them (std `TcpListener`, one thread per connection).
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use persyk::update::FeedKey;

/// The public half of `fixtures/update/test.secret` (also in `test.pub`).
pub const TEST_PUBLIC_KEY: &str = "RWSDg1PvJaXHu97y4qpjX1xqniQSkrFmao6//AiaQe15Kl2j1baTLaPA";

pub fn test_key() -> FeedKey {
    FeedKey::from_base64(TEST_PUBLIC_KEY).unwrap()
}

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/update")
}

/// A fixture's bytes (`newer.json`, `newer.json.minisig`, …).
pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixtures_dir().join(name)).unwrap()
}

/// A fixture feed and its signature.
pub fn signed(name: &str) -> (Vec<u8>, Vec<u8>) {
    (fixture(name), fixture(&format!("{name}.minisig")))
}

/// What the server answers for a path.
#[derive(Clone)]
pub enum Reply {
    /// 200 with this body.
    Body(Vec<u8>),
    /// This status, empty body.
    Status(u16),
    /// 200 with a `Content-Length` of this many bytes, sent slowly forever (a feed that never
    /// ends).
    Endless,
    /// Headers, then silence until the client gives up (a deadline test).
    Stall,
}

/// The loopback feed server.
pub struct FeedServer {
    pub addr: SocketAddr,
    routes: Arc<Mutex<HashMap<String, Reply>>>,
    /// Request paths, in arrival order.
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl FeedServer {
    pub fn start() -> FeedServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let routes: Arc<Mutex<HashMap<String, Reply>>> = Arc::default();
        let requests: Arc<Mutex<Vec<String>>> = Arc::default();
        let (r, q) = (routes.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (r, q) = (r.clone(), q.clone());
                std::thread::spawn(move || serve(stream, &r, &q));
            }
        });
        FeedServer {
            addr,
            routes,
            requests,
        }
    }

    /// Serves a fixture feed and its signature as `/<as_name>` and `/<as_name>.minisig`.
    pub fn publish(&self, feed: &[u8], signature: &[u8], as_name: &str) {
        self.route(&format!("/{as_name}"), Reply::Body(feed.to_vec()));
        self.route(
            &format!("/{as_name}.minisig"),
            Reply::Body(signature.to_vec()),
        );
    }

    pub fn route(&self, path: &str, reply: Reply) {
        self.routes.lock().unwrap().insert(path.to_owned(), reply);
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://{}/{name}", self.addr)
    }
}

fn serve(stream: TcpStream, routes: &Mutex<HashMap<String, Reply>>, requests: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).map(|n| n == 0).unwrap_or(true) || h == "\r\n" {
            break;
        }
    }
    requests.lock().unwrap().push(path.clone());
    let reply = routes
        .lock()
        .unwrap()
        .get(&path)
        .cloned()
        .unwrap_or(Reply::Status(404));
    let mut out = stream;
    match reply {
        Reply::Body(body) => {
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = out.write_all(&body);
        }
        Reply::Status(status) => {
            let _ = write!(
                out,
                "HTTP/1.1 {status} Nope\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
        Reply::Endless => {
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\nConnection: close\r\n\r\n"
            );
            let chunk = [b' '; 4096];
            while out.write_all(&chunk).is_ok() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Reply::Stall => {
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Length: 400\r\nConnection: close\r\n\r\n"
            );
            std::thread::sleep(Duration::from_secs(30));
        }
    }
}

/// A loopback URL nothing listens on (a port bound, then freed).
pub fn unreachable_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}/persyk-update.json")
}
