//! A scripted OpenAI-compatible Chat Completions server on loopback (std `TcpListener`, one
//! thread per connection), for the clean-up tests: each request gets the next [`Reply`] of
//! the script (the last one repeats). It records every request's JSON body and
//! `Authorization` header.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// What one request gets.
#[derive(Clone, Debug)]
pub enum Reply {
    /// 200 with a completion whose content is this text.
    Content(String),
    /// The same, after a pause.
    Slow(Duration, String),
    /// 200 headers, then nothing for this long, then close.
    HangAfterHeaders(Duration),
    /// This status with a small JSON error body.
    Status(u16),
    /// 200 with this body as it is.
    Raw(String),
    /// 400 when the request carries this top-level field; otherwise the inner reply.
    RefuseField(&'static str, Box<Reply>),
    /// 200 with the transcript of the request (the text inside the last user message's
    /// frame), unchanged.
    Echo,
    /// 200 with the transcript after applying this function.
    Map(fn(&str) -> String),
}

pub struct ChatServer {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Value>>>,
    auth: Arc<Mutex<Vec<Option<String>>>>,
}

impl ChatServer {
    pub fn start(script: Vec<Reply>) -> ChatServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let auth = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(script);
        let next = Arc::new(Mutex::new(0usize));
        let (r, a) = (requests.clone(), auth.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (r, a, script, next) = (r.clone(), a.clone(), script.clone(), next.clone());
                std::thread::spawn(move || serve(stream, &r, &a, &script, &next));
            }
        });
        ChatServer {
            addr,
            requests,
            auth,
        }
    }

    /// The base URL (`…/v1`).
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    pub fn auth(&self) -> Vec<Option<String>> {
        self.auth.lock().unwrap().clone()
    }
}

fn serve(
    stream: TcpStream,
    requests: &Mutex<Vec<Value>>,
    auth: &Mutex<Vec<Option<String>>>,
    script: &[Reply],
    next: &Mutex<usize>,
) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut length = 0usize;
    let mut authorization = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            let value = value.trim().to_owned();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.parse().unwrap_or(0),
                "authorization" => authorization = Some(value),
                _ => {}
            }
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    requests.lock().unwrap().push(request.clone());
    auth.lock().unwrap().push(authorization);
    let reply = {
        let mut n = next.lock().unwrap();
        let r = script[(*n).min(script.len() - 1)].clone();
        *n += 1;
        r
    };
    respond(stream, &request, reply);
}

fn respond(mut stream: TcpStream, request: &Value, reply: Reply) {
    match reply {
        Reply::Content(text) => send(&mut stream, 200, &completion(&text)),
        Reply::Slow(pause, text) => {
            std::thread::sleep(pause);
            send(&mut stream, 200, &completion(&text));
        }
        Reply::HangAfterHeaders(pause) => {
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
            );
            let _ = stream.flush();
            std::thread::sleep(pause);
        }
        Reply::Status(status) => send(
            &mut stream,
            status,
            &json!({"error": {"message": "scripted failure", "code": status}}).to_string(),
        ),
        Reply::Raw(body) => send(&mut stream, 200, &body),
        Reply::RefuseField(field, inner) => {
            if request.get(field).is_some() {
                send(
                    &mut stream,
                    400,
                    &json!({"error": {"message": format!("unknown field {field}")}}).to_string(),
                );
            } else {
                respond(stream, request, *inner);
            }
        }
        Reply::Echo => send(&mut stream, 200, &completion(&transcript_of(request))),
        Reply::Map(f) => send(&mut stream, 200, &completion(&f(&transcript_of(request)))),
    }
}

/// The text inside the frame of the last user message.
pub fn transcript_of(request: &Value) -> String {
    let last = request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or("");
    let inner = last.split_once('\n').map_or("", |(_, rest)| rest);
    inner
        .rsplit_once('\n')
        .map_or(inner, |(body, _)| body)
        .to_owned()
}

fn completion(text: &str) -> String {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
    })
    .to_string()
}

fn send(stream: &mut TcpStream, status: u16, body: &str) {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        _ => "Error",
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}
