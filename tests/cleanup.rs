//! Clean-up against a scripted OpenAI-compatible server on loopback (issue #27): what is
//! delivered, which entries are written where, that the deadline holds, and that no key or
//! dictated text leaks into codes, attempts or requests' framing.

mod support;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use persyk::cleanup::client::{Client, ServerConfig, Timeouts};
use persyk::cleanup::prompt::ModelMode;
use persyk::cleanup::replace::{Replacements, Rule};
use persyk::cleanup::{Chosen, Cleaner, Late, ModelSetup};
use serde_json::Value;
use support::chat::{ChatServer, Reply};
use support::{entries, fresh_session};

const KEY: &str = "sk-test-secret-0123456789";

fn client(server: &ChatServer) -> Arc<Client> {
    Arc::new(
        Client::new(
            ServerConfig {
                base_url: server.url(),
                model: "tiny-cleaner".into(),
                api_key: Some(KEY.into()),
            },
            Timeouts::default(),
        )
        .expect("client"),
    )
}

fn cleaner(server: &ChatServer, mode: ModelMode, deadline: Duration) -> Cleaner {
    Cleaner {
        replacements: Replacements::default(),
        model: Some(ModelSetup {
            mode,
            client: client(server),
        }),
        deadline,
    }
}

fn of_type<'a>(all: &'a [Value], custom_type: &str) -> Vec<&'a Value> {
    all.iter()
        .filter(|e| e["customType"] == custom_type)
        .collect()
}

fn file_text(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("session.jsonl")).expect("read session")
}

const SPOKEN: &str = "um so I I think we should uh move the meeting to Friday at three";
const TIDY: &str = "I think we should move the meeting to Friday at 3.";

#[test]
fn issue27_a_tidy_clean_up_is_delivered_and_stored_beside_the_spoken_words() {
    let server = ChatServer::start(vec![Reply::Content(TIDY.into())]);
    let (_tmp, dir, mut c) = fresh_session();
    let source = support::say(&mut c, SPOKEN);
    let cleaned = cleaner(&server, ModelMode::Tidy, Duration::from_secs(10))
        .start(c.handle(), std::slice::from_ref(&source), None)
        .wait();
    assert_eq!(cleaned.chosen, Chosen::Model);
    assert_eq!(cleaned.text, TIDY);
    assert_eq!(cleaned.reason, None);
    assert_eq!(cleaned.store_error, None);

    let all = entries(&dir);
    // The spoken message first, untouched; the clean-up after it, as its child (the tip).
    assert_eq!(all[0]["type"], "message");
    assert_eq!(all[0]["message"]["content"][0]["text"], SPOKEN);
    let cleanups = of_type(&all, "persyk.cleanup");
    assert_eq!(cleanups.len(), 1);
    let cu = cleanups[0];
    assert_eq!(cu["type"], "custom_message");
    assert_eq!(cu["parentId"], all[0]["id"]);
    assert_eq!(cu["content"], TIDY);
    assert_eq!(cu["display"], true);
    let d = &cu["details"];
    assert_eq!(d["sources"][0]["id"], source.id.as_str());
    assert_eq!(d["mode"], "tidy");
    assert_eq!(d["engine"]["model"], "tiny-cleaner");
    assert_eq!(d["engine"]["location"], "this-device");
    assert_eq!(d["delivery"], "delivered");
    assert_eq!(d["rewritten"], false);
    assert_eq!(d["promptSha256"].as_str().map(str::len), Some(64));
    // The guard's figures: every edit of a listed kind, counts only.
    assert_eq!(d["fidelity"]["checked"], "edits");
    assert_eq!(d["fidelity"]["edits"]["unlisted"], 0);
    assert_eq!(d["fidelity"]["edits"]["fillers"], 2);
    support::check_session(&dir);

    // The request: instructions in the system message, the transcript alone and framed in
    // the last one, temperature 0, bounded tokens, reasoning off, the key in the header only.
    let req = &server.requests()[0];
    assert_eq!(req["model"], "tiny-cleaner");
    assert_eq!(req["temperature"], 0);
    assert_eq!(req["reasoning_effort"], "none");
    assert!(req["max_tokens"].as_u64().expect("max_tokens") < 200);
    let messages = req["messages"].as_array().expect("messages");
    assert_eq!(messages[0]["role"], "system");
    assert!(
        !messages[0]["content"]
            .as_str()
            .unwrap_or("")
            .contains("meeting")
    );
    assert_eq!(support::chat::transcript_of(req), SPOKEN);
    assert_eq!(
        server.auth()[0].as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert!(!file_text(&dir).contains(KEY));
}

#[test]
fn issue27_an_answering_or_failing_model_delivers_the_spoken_words_with_a_reason() {
    let cases: Vec<(Reply, &str)> = vec![
        (
            Reply::Content("The meeting is now on Friday at 3 PM. Would you like me to send an invite to everyone?".into()),
            "cleanup.words-missing",
        ),
        (Reply::Content("Paris.".into()), "cleanup.words-missing"),
        (Reply::Content("Paris is the capital at 3.".into()), "cleanup.words-missing"),
        (Reply::Content("I think we should move the meeting to Friday at 4.".into()), "cleanup.numbers-changed"),
        (Reply::Content(String::new()), "cleanup.empty"),
        (
            Reply::Map(|t| format!("{t} {}", "and then we should also move the meeting again ".repeat(8))),
            "cleanup.words-added",
        ),
        (Reply::Status(429), "cleanup.rate-limited"),
        (Reply::Status(500), "cleanup.http-status"),
        (Reply::Status(401), "cleanup.unauthorized"),
        (Reply::Raw("{\"choices\": [".into()), "cleanup.malformed-reply"),
    ];
    for (reply, code) in cases {
        let server = ChatServer::start(vec![reply.clone()]);
        let (_tmp, dir, mut c) = fresh_session();
        let source = support::say(&mut c, SPOKEN);
        let cleaned = cleaner(&server, ModelMode::Tidy, Duration::from_secs(10))
            .start(c.handle(), &[source], None)
            .wait();
        assert_eq!(cleaned.chosen, Chosen::Spoken, "{reply:?}");
        assert_eq!(cleaned.text, SPOKEN, "{reply:?}");
        assert_eq!(cleaned.reason, Some(code), "{reply:?}");
        let all = entries(&dir);
        assert!(of_type(&all, "persyk.cleanup").is_empty(), "{reply:?}");
        let attempts = of_type(&all, "persyk.cleanup-attempt");
        assert_eq!(attempts.len(), 1, "{reply:?}");
        assert_eq!(attempts[0]["type"], "custom");
        assert_eq!(attempts[0]["data"]["reason"], code);
        // No dictated text and no key in the attempt.
        let data = attempts[0]["data"].to_string().to_lowercase();
        assert!(!data.contains("meeting") && !data.contains(KEY), "{data}");
        support::check_session(&dir);
    }
}

#[test]
fn issue27_think_blocks_and_preambles_are_stripped_before_the_guard() {
    let server = ChatServer::start(vec![Reply::Content(format!(
        "<think>The user wants a tidy transcript.</think>\nHere is the cleaned transcript:\n{TIDY}"
    ))]);
    let (_tmp, _dir, mut c) = fresh_session();
    let source = support::say(&mut c, SPOKEN);
    let cleaned = cleaner(&server, ModelMode::Tidy, Duration::from_secs(10))
        .start(c.handle(), &[source], None)
        .wait();
    assert_eq!(cleaned.chosen, Chosen::Model);
    assert_eq!(cleaned.text, TIDY);
}

#[test]
fn issue27_a_server_that_refuses_the_reasoning_field_is_asked_again_without_it_once() {
    let server = ChatServer::start(vec![Reply::RefuseField(
        "reasoning_effort",
        Box::new(Reply::Content(TIDY.into())),
    )]);
    let (_tmp, _dir, mut c) = fresh_session();
    let cleaner = cleaner(&server, ModelMode::Tidy, Duration::from_secs(10));
    let first = support::say(&mut c, SPOKEN);
    assert_eq!(
        cleaner.start(c.handle(), &[first], None).wait().chosen,
        Chosen::Model
    );
    let second = support::say(&mut c, SPOKEN);
    assert_eq!(
        cleaner.start(c.handle(), &[second], None).wait().chosen,
        Chosen::Model
    );
    let with_field: Vec<bool> = server
        .requests()
        .iter()
        .map(|r| r.get("reasoning_effort").is_some())
        .collect();
    // Refused, retried without, and the same client never sends it again.
    assert_eq!(with_field, [true, false, false]);
}

/// Issue #35 item 5: the reply is asked for as `{"text": …}` under a JSON schema; a server
/// that honours it is read as that one field, whatever the text says.
#[test]
fn issue35_a_structured_reply_is_read_as_its_one_field() {
    let structured = serde_json::json!({ "text": TIDY }).to_string();
    let server = ChatServer::start(vec![Reply::Content(structured)]);
    let (_tmp, _dir, mut c) = fresh_session();
    let source = support::say(&mut c, SPOKEN);
    let cleaned = cleaner(&server, ModelMode::Tidy, Duration::from_secs(10))
        .start(c.handle(), &[source], None)
        .wait();
    assert_eq!(cleaned.chosen, Chosen::Model);
    assert_eq!(cleaned.text, TIDY);
    let req = &server.requests()[0];
    assert_eq!(req["response_format"]["type"], "json_schema");
    assert_eq!(
        req["response_format"]["json_schema"]["schema"]["required"][0],
        "text"
    );
}

/// A server that refuses `response_format` is asked without the reasoning field, then
/// without the schema, and this client sends neither again; its plain replies are used.
#[test]
fn issue35_a_server_that_refuses_the_schema_is_asked_without_it() {
    let server = ChatServer::start(vec![Reply::RefuseField(
        "response_format",
        Box::new(Reply::Content(TIDY.into())),
    )]);
    let (_tmp, _dir, mut c) = fresh_session();
    let cleaner = cleaner(&server, ModelMode::Tidy, Duration::from_secs(10));
    for _ in 0..2 {
        let source = support::say(&mut c, SPOKEN);
        let cleaned = cleaner.start(c.handle(), &[source], None).wait();
        assert_eq!(cleaned.chosen, Chosen::Model);
        assert_eq!(cleaned.text, TIDY);
    }
    let sent: Vec<(bool, bool)> = server
        .requests()
        .iter()
        .map(|r| {
            (
                r.get("reasoning_effort").is_some(),
                r.get("response_format").is_some(),
            )
        })
        .collect();
    assert_eq!(
        sent,
        [(true, true), (false, true), (false, false), (false, false)]
    );
}

#[test]
fn issue27_a_hung_server_delivers_the_spoken_words_at_the_deadline_and_a_late_result_is_stored_late()
 {
    // Hung after headers: the wait ends at the deadline with the words.
    let hung = ChatServer::start(vec![Reply::HangAfterHeaders(Duration::from_secs(20))]);
    let (_tmp, dir, mut c) = fresh_session();
    let source = support::say(&mut c, SPOKEN);
    let cleaned = cleaner(&hung, ModelMode::Tidy, Duration::from_millis(300))
        .start(c.handle(), &[source], None)
        .wait();
    assert_eq!(cleaned.chosen, Chosen::Spoken);
    assert_eq!(cleaned.reason, Some("cleanup.timeout"));
    // It did not wait for the server (which holds the connection for 20 s).
    assert!(
        cleaned.latency < Duration::from_secs(15),
        "{:?}",
        cleaned.latency
    );
    let all = entries(&dir);
    let attempts = of_type(&all, "persyk.cleanup-attempt");
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["data"]["reason"], "cleanup.timeout");
    assert_eq!(attempts[0]["data"]["mode"], "tidy");
    assert_eq!(attempts[0]["data"]["engine"]["model"], "tiny-cleaner");

    // Slow: the result comes after the deadline, after newer dictation; it is stored late,
    // as a child of the newest entry (no sibling branch hides the newer words).
    let slow = ChatServer::start(vec![Reply::Slow(Duration::from_millis(1500), TIDY.into())]);
    let (_tmp2, dir, mut c) = fresh_session();
    let source = support::say(&mut c, SPOKEN);
    let (late_tx, late_rx) = mpsc::channel();
    let job = cleaner(&slow, ModelMode::Tidy, Duration::from_millis(200)).start(
        c.handle(),
        &[source],
        Some(Box::new(move |late| {
            let _ = late_tx.send(late);
        })),
    );
    let cleaned = job.wait();
    assert_eq!(cleaned.chosen, Chosen::Spoken);
    assert_eq!(cleaned.reason, Some("cleanup.timeout"));
    support::say(&mut c, "and a newer dictation after it");
    let late = late_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the late result");
    let Late::Stored { entry_id } = late else {
        panic!("not stored: {late:?}");
    };
    let all = entries(&dir);
    let cu = of_type(&all, "persyk.cleanup");
    assert_eq!(cu.len(), 1);
    assert_eq!(cu[0]["id"], entry_id.as_str());
    assert_eq!(cu[0]["details"]["delivery"], "late");
    let newest_before = &all[all.len() - 2];
    assert_eq!(
        newest_before["message"]["content"][0]["text"],
        "and a newer dictation after it"
    );
    assert_eq!(cu[0]["parentId"], newest_before["id"]);
    support::check_session(&dir);
    // The default leaf's conversation holds both dictations and the late clean-up.
    let out = Command::new(env!("CARGO_BIN_EXE_persyk"))
        .args(["context", "--json"])
        .arg(&dir)
        .output()
        .expect("persyk context");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("newer dictation") && text.contains("move the meeting to Friday at 3."),
        "{text}"
    );
}

#[test]
fn issue27_cancel_delivers_the_spoken_words_at_once() {
    let server = ChatServer::start(vec![Reply::Slow(Duration::from_secs(5), TIDY.into())]);
    let (_tmp, dir, mut c) = fresh_session();
    let source = support::say(&mut c, SPOKEN);
    let job = cleaner(&server, ModelMode::Tidy, Duration::from_secs(20)).start(
        c.handle(),
        &[source],
        None,
    );
    assert!(job.asks_a_model());
    let cancel = job.canceller();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        cancel.cancel();
    });
    let cleaned = job.wait();
    assert_eq!(cleaned.chosen, Chosen::Spoken);
    assert_eq!(cleaned.reason, Some("cleanup.cancelled"));
    assert!(
        cleaned.latency < Duration::from_secs(4),
        "{:?}",
        cleaned.latency
    );
    assert_eq!(of_type(&entries(&dir), "persyk.cleanup-attempt").len(), 1);
}

#[test]
fn issue27_three_words_or_fewer_ask_no_model() {
    let server = ChatServer::start(vec![Reply::Content("Anything".into())]);
    let (_tmp, dir, mut c) = fresh_session();
    let source = support::say(&mut c, "yes, send it");
    let job = cleaner(&server, ModelMode::Tidy, Duration::from_secs(10)).start(
        c.handle(),
        &[source],
        None,
    );
    assert!(!job.asks_a_model());
    let cleaned = job.wait();
    assert_eq!(cleaned.text, "yes, send it");
    assert_eq!(cleaned.reason, Some("cleanup.too-short"));
    assert!(server.requests().is_empty());
    assert_eq!(entries(&dir).len(), 1);
}

#[test]
fn issue27_replacements_are_delivered_and_stored_the_same_way() {
    let (_tmp, dir, mut c) = fresh_session();
    let source = support::say(
        &mut c,
        "I dictate with persic comma it works new line thanks",
    );
    let cleaner = Cleaner {
        replacements: Replacements::new(&[
            Rule {
                from: "persic".into(),
                to: "Persyk".into(),
            },
            Rule {
                from: "comma".into(),
                to: ",".into(),
            },
            Rule {
                from: "new line".into(),
                to: "\n".into(),
            },
        ])
        .expect("rules"),
        ..Cleaner::default()
    };
    let cleaned = cleaner
        .start(c.handle(), std::slice::from_ref(&source), None)
        .wait();
    assert_eq!(cleaned.chosen, Chosen::Replaced);
    assert_eq!(cleaned.text, "I dictate with Persyk, it works\nthanks");
    let all = entries(&dir);
    let cu = of_type(&all, "persyk.cleanup");
    assert_eq!(cu.len(), 1);
    assert_eq!(cu[0]["content"], "I dictate with Persyk, it works\nthanks");
    assert_eq!(cu[0]["details"]["mode"], "replacements");
    assert_eq!(cu[0]["details"]["replacements"], 3);
    assert_eq!(cu[0]["details"]["sources"][0]["id"], source.id.as_str());
    // The spoken words are still what they were.
    assert_eq!(
        all[0]["message"]["content"][0]["text"],
        source.text.as_str()
    );
    support::check_session(&dir);

    // With a model too: the model gets the replaced text, and one clean-up is stored.
    let server = ChatServer::start(vec![Reply::Echo]);
    let (_tmp2, dir, mut c) = fresh_session();
    let source = support::say(&mut c, "I dictate with persic every day now");
    let mut with_model = cleaner;
    with_model.model = Some(ModelSetup {
        mode: ModelMode::Tidy,
        client: client(&server),
    });
    let cleaned = with_model.start(c.handle(), &[source], None).wait();
    assert_eq!(cleaned.chosen, Chosen::Model);
    assert_eq!(cleaned.text, "I dictate with Persyk every day now");
    let cu = of_type(&entries(&dir), "persyk.cleanup").len();
    assert_eq!(cu, 1);
}

#[test]
fn issue27_search_finds_the_spoken_words_and_the_clean_up() {
    let server = ChatServer::start(vec![Reply::Content(
        "I think we should move the meeting to Friday at 3. Quarterly".into(),
    )]);
    let (tmp, _dir, mut c) = fresh_session();
    let source = support::say(&mut c, &format!("{SPOKEN} quarterly"));
    let cleaned = cleaner(&server, ModelMode::Polish, Duration::from_secs(10))
        .start(c.handle(), &[source], None)
        .wait();
    assert_eq!(cleaned.chosen, Chosen::Model);
    let search = |q: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_persyk"))
            .args(["search", "--json", "--root"])
            .arg(tmp.path().join("sessions"))
            .arg(q)
            .output()
            .expect("persyk search");
        let rows: Value = serde_json::from_slice(&out.stdout).expect("search rows");
        rows.as_array().map_or(0, Vec::len)
    };
    // "um so I I think" only in the spoken words, "Friday at 3." only in the clean-up.
    assert_eq!(search("um so I I think"), 1);
    assert_eq!(search("Friday at 3."), 1);
    assert_eq!(search("not said at all"), 0);
}
