//! Property tests of the session core against a naive model.
//!
//! 1. `writer_output_validates_and_projects_like_the_model`: random entry trees built from the
//!    writer types (`persyk::session::format`) serialize to files that scan with zero
//!    diagnostics, every entry round-trips through `Entry::from_line` (except the shapes of
//!    the known bugs at the end of this file), and `project` plus the index's global metadata
//!    agree with the model in `session_model/mod.rs` (also used by the `ops` fuzz target).
//! 2. `byte_mutations_never_panic`: flipping, inserting and deleting bytes of such a file never
//!    panics the scanner, and every diagnostic is a known code at a plausible line.
//!
//! Case count: `PROPTEST_CASES` overrides the default of 128.

mod session_model;

use persyk::session::format::{
    AssetRef, Block, ByteRange, Custom, CustomContent, CustomMessage, Entry, EntryBody, Gap,
    Header, Label, Message, MessageRemoved, ModelChange, MsRange, Outcome, RecordingFinished,
    RecordingStarted, Role, SessionInfo, StopReason, ToolResultFields,
};
use persyk::session::{LeafSelector, SessionIndex, scan_bytes, scan_file_lean};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use session_model::{Model, assert_index_matches, check_scan_invariants};

// ---------------------------------------------------------------------------------------------
// Strategies for the pieces of an entry.

/// Text with arbitrary scalar values, weighted towards what JSON escaping must get right.
fn text() -> impl Strategy<Value = String> {
    let special = prop::sample::select(vec![
        '"',
        '\\',
        '\n',
        '\r',
        '\t',
        '\u{0}',
        '\u{1f}',
        '\u{7f}',
        '/',
        '{',
        '}',
        '[',
        ']',
        'é',
        '\u{2028}',
        '\u{2029}',
        '\u{feff}',
        '\u{fffd}',
        '\u{d7ff}',
        '\u{e000}',
        '\u{1F600}',
        '\u{1D11E}',
        '\u{10FFFF}',
    ]);
    prop::collection::vec(prop_oneof![3 => any::<char>(), 2 => special], 0..24)
        .prop_map(|chars| chars.into_iter().collect())
}

/// `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`, kept short so a suffix still fits.
fn id_prefix() -> impl Strategy<Value = String> {
    "[A-Za-z0-9][A-Za-z0-9._-]{0,40}"
}

fn full_id() -> impl Strategy<Value = String> {
    "[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
}

/// RFC 3339 date-times with a zone: `Z` or a numeric offset, optional fraction.
fn iso() -> impl Strategy<Value = String> {
    (
        (1970u32..2200, 1u32..=12, 1u32..=28),
        (0u32..24, 0u32..60, 0u32..60),
        prop::option::of("[0-9]{1,9}"),
        prop_oneof![
            Just("Z".to_owned()),
            (any::<bool>(), 0u32..24, 0u32..60)
                .prop_map(|(neg, h, m)| format!("{}{h:02}:{m:02}", if neg { '-' } else { '+' })),
        ],
    )
        .prop_map(|((y, mo, d), (h, mi, s), frac, zone)| {
            let frac = frac.map(|f| format!(".{f}")).unwrap_or_default();
            format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{frac}{zone}")
        })
}

/// Any JSON value whose text round-trips exactly (no NaN, floats with exact decimal forms).
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop::sample::select(vec![0.5f64, -1.25, 1e100, 3e-7, 0.0]).prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec((text(), json()), 0..3).prop_map(|kv| kv.into_iter().collect())
}

fn asset_ref() -> impl Strategy<Value = AssetRef> {
    prop_oneof![
        (
            full_id(),
            prop::sample::select(vec!["audio/wav", "image/png", "application/octet-stream"]),
            prop::option::of((0u64..u64::MAX, 1u64..1 << 40)),
            prop::option::of(prop::sample::select(vec!["pcm_s16le", "base64"])),
            prop::option::of("[0-9a-fA-F]{64}"),
        )
            .prop_map(
                |(name, mime, range, encoding, sha256)| AssetRef::Available {
                    path: format!("assets/{name}"),
                    mime_type: mime.to_owned(),
                    byte_range: range.map(|(start, len)| ByteRange {
                        start,
                        end: start.saturating_add(len),
                    }),
                    encoding: encoding.map(str::to_owned),
                    sha256,
                }
            )
            .prop_filter("non-empty byte range", |a| !matches!(
                a,
                AssetRef::Available { byte_range: Some(r), .. } if r.start >= r.end
            )),
        (text(), prop::option::of(json()))
            .prop_map(|(reason, source)| AssetRef::Missing { reason, source }),
    ]
}

fn text_block() -> impl Strategy<Value = Block> {
    text().prop_map(Block::text)
}

fn image_block() -> impl Strategy<Value = Block> {
    asset_ref().prop_map(|asset| Block::Image { asset })
}

/// Mostly text blocks, with every other kind (including an unknown one) now and then.
fn message_block() -> impl Strategy<Value = Block> {
    prop_oneof![
        6 => text_block(),
        1 => (text(), prop::option::of(text())).prop_map(|(thinking, signature)| {
            Block::Thinking { thinking, signature }
        }),
        1 => (text(), text(), object()).prop_map(|(id, name, arguments)| Block::ToolCall {
            id,
            name,
            arguments,
        }),
        1 => image_block(),
        1 => (
            asset_ref(),
            prop::option::of(full_id()),
            prop::option::of((0u64..1 << 40, 1u64..1 << 20)),
        )
            .prop_map(|(asset, recording_id, range)| Block::Audio {
                asset,
                recording_id,
                range: range.map(|(start_ms, len)| MsRange {
                    start_ms,
                    end_ms: start_ms + len,
                }),
            }),
        1 => (prop::sample::select(vec!["hologram", "x-vendor.block", ""]), json())
            .prop_map(|(ty, v)| {
                // Whitespace and key order inside an unknown block must survive verbatim.
                let text = format!(
                    "{{ \"type\" : {}, \"v\":{} }}",
                    serde_json::to_string(ty).unwrap(),
                    serde_json::to_string(&v).unwrap()
                );
                Block::Unknown(RawValue::from_string(text).unwrap())
            }),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    let role = prop_oneof![
        4 => Just(Role::User),
        4 => Just(Role::Assistant),
        1 => Just(Role::ToolResult),
    ];
    let stop = prop::sample::select(vec![
        StopReason::Stop,
        StopReason::Length,
        StopReason::ToolUse,
        StopReason::Error,
        StopReason::Aborted,
    ]);
    let optional = (
        prop::option::weighted(0.2, text()),
        prop::option::weighted(0.2, text()),
        prop::option::weighted(0.2, text()),
        prop::option::weighted(0.2, text()),
        prop::option::weighted(0.2, object()),
        prop::option::weighted(0.2, stop),
        prop::option::weighted(0.2, text()),
        prop::option::weighted(0.2, object()),
    );
    let tool = (text(), text(), any::<bool>(), prop::option::of(json()));
    let extra = prop::collection::vec(("x-[a-z]{1,6}", json()), 0..2);
    (
        role,
        prop::collection::vec(message_block(), 0..4),
        any::<u64>(),
        optional,
        tool,
        extra,
    )
        .prop_map(|(role, content, timestamp, opt, tool, extra)| {
            let mut m = Message::new(role, content, timestamp);
            (
                m.api,
                m.provider,
                m.model,
                m.response_id,
                m.usage,
                m.stop_reason,
                m.error_message,
                m.replay,
            ) = opt;
            if role == Role::ToolResult {
                m.tool_result = Some(ToolResultFields {
                    tool_call_id: tool.0,
                    tool_name: tool.1,
                    is_error: tool.2,
                    details: tool.3,
                });
            }
            for (k, v) in extra {
                m.extra
                    .insert(k, RawValue::from_string(v.to_string()).unwrap());
            }
            m
        })
}

fn custom_type() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "persyk.ui",
        "persyk.recording-state",
        "x",
        "ünï \"quoted\" \\ 😀",
    ])
    .prop_map(str::to_owned)
}

fn custom_message() -> impl Strategy<Value = CustomMessage> {
    let content = prop_oneof![
        text().prop_map(CustomContent::Text),
        prop::collection::vec(prop_oneof![3 => text_block(), 1 => image_block()], 0..3)
            .prop_map(CustomContent::Blocks),
    ];
    (
        custom_type(),
        content,
        any::<bool>(),
        prop::option::of(json()),
    )
        .prop_map(|(custom_type, content, display, details)| CustomMessage {
            custom_type,
            content,
            display,
            details,
        })
}

/// Entry bodies that do not affect projection.
fn neutral_body() -> impl Strategy<Value = EntryBody> {
    prop_oneof![
        (full_id(), full_id()).prop_map(|(recording_id, name)| {
            EntryBody::RecordingStarted(RecordingStarted {
                recording_id,
                asset: format!("assets/{name}"),
            })
        }),
        (
            full_id(),
            any::<u64>(),
            any::<bool>(),
            prop::option::of(prop::collection::vec(
                (
                    text(),
                    prop::option::of(text()),
                    prop::option::of(0u64..1000)
                ),
                0..3
            )),
        )
            .prop_map(|(recording_id, duration_ms, complete, gaps)| {
                EntryBody::RecordingFinished(RecordingFinished {
                    recording_id,
                    duration_ms,
                    outcome: if complete {
                        Outcome::Complete
                    } else {
                        Outcome::Incomplete
                    },
                    gaps: gaps.map(|gaps| {
                        gaps.into_iter()
                            .map(|(reason, item_id, start)| Gap {
                                reason,
                                item_id,
                                start_ms: start,
                                end_ms: start.map(|s| s + 5),
                            })
                            .collect()
                    }),
                })
            }),
        (text(), text(), prop::option::of(text())).prop_map(|(provider, model_id, api)| {
            EntryBody::ModelChange(ModelChange {
                provider,
                model_id,
                api,
            })
        }),
    ]
}

/// One planned entry. Parents and targets are [`Index`]es resolved against the entries
/// already built, so every plan is a valid file and shrinks well.
#[derive(Debug, Clone)]
struct Plan {
    id_prefix: String,
    timestamp: String,
    /// `None`: a new root.
    parent: Option<Index>,
    body: PlanBody,
}

#[derive(Debug, Clone)]
enum PlanBody {
    Ready(Box<EntryBody>),
    /// Target, label (`None` clears), and whether to pick among already labelled targets
    /// (so relabelling and clearing actually happen).
    Label(Index, Option<String>, bool),
    Removal(Index),
}

fn ready(body: EntryBody) -> PlanBody {
    PlanBody::Ready(Box::new(body))
}

fn plan() -> impl Strategy<Value = Plan> {
    let body = prop_oneof![
        6 => message().prop_map(|m| ready(EntryBody::Message(m))),
        2 => (custom_type(), json())
            .prop_map(|(custom_type, data)| ready(EntryBody::Custom(Custom { custom_type, data }))),
        2 => custom_message().prop_map(|c| ready(EntryBody::CustomMessage(c))),
        2 => (prop::option::of(text()), prop::option::of(any::<bool>()))
            .prop_map(|(name, archived)| {
                ready(EntryBody::SessionInfo(SessionInfo { name, archived }))
            }),
        2 => (any::<Index>(), prop::option::weighted(0.7, text()), any::<bool>())
            .prop_map(|(t, l, again)| PlanBody::Label(t, l, again)),
        3 => any::<Index>().prop_map(PlanBody::Removal),
        1 => neutral_body().prop_map(ready),
    ];
    (
        id_prefix(),
        iso(),
        prop::option::weighted(0.85, any::<Index>()),
        body,
    )
        .prop_map(|(id_prefix, timestamp, parent, body)| Plan {
            id_prefix,
            timestamp,
            parent,
            body,
        })
}

/// Builds the entries of a plan. Ids end in `.<position>`, which keeps them unique.
fn build(plans: &[Plan]) -> Vec<Entry> {
    let mut entries: Vec<Entry> = Vec::with_capacity(plans.len());
    for (i, plan) in plans.iter().enumerate() {
        let id = format!("{}.{i}", plan.id_prefix);
        let mut parent = match (&plan.parent, i) {
            (Some(ix), n) if n > 0 => Some(ix.index(n)),
            _ => None,
        };
        let body = {
            let model = Model::new(&entries);
            match &plan.body {
                PlanBody::Ready(b) => (**b).clone(),
                PlanBody::Label(target, label, again) if i > 0 => {
                    let labelled: Vec<&str> = entries
                        .iter()
                        .filter_map(|e| match &e.body {
                            EntryBody::Label(l) => Some(l.target_id.as_str()),
                            _ => None,
                        })
                        .collect();
                    let target_id = if *again && !labelled.is_empty() {
                        labelled[target.index(labelled.len())].to_owned()
                    } else {
                        entries[target.index(i)].id.clone()
                    };
                    EntryBody::Label(Label {
                        target_id,
                        label: label.clone(),
                    })
                }
                PlanBody::Label(_, label, _) => EntryBody::SessionInfo(SessionInfo {
                    name: label.clone(),
                    archived: None,
                }),
                PlanBody::Removal(target) => {
                    // The parent must have a message ancestor (or be one): prefer the planned
                    // parent, else the nearest earlier entry that has one.
                    let hosts: Vec<usize> = (0..i)
                        .filter(|&p| !model.removable_from(p).is_empty())
                        .collect();
                    let host = parent
                        .filter(|p| hosts.contains(p))
                        .or_else(|| hosts.last().copied());
                    match host {
                        Some(host) => {
                            parent = Some(host);
                            let targets = model.removable_from(host);
                            EntryBody::MessageRemoved(MessageRemoved {
                                target_id: entries[targets[target.index(targets.len())]].id.clone(),
                            })
                        }
                        // Nothing removable yet: an empty user message instead.
                        None => EntryBody::Message(Message::new(Role::User, vec![], 0)),
                    }
                }
            }
        };
        entries.push(Entry {
            id,
            parent_id: parent.map(|p| entries[p].id.clone()),
            timestamp: plan.timestamp.clone(),
            body,
        });
    }
    entries
}

fn file(header: &Header, entries: &[Entry]) -> Vec<u8> {
    let mut out = header.to_line();
    out.push('\n');
    for e in entries {
        out.push_str(&e.to_line());
        out.push('\n');
    }
    out.into_bytes()
}

fn header() -> impl Strategy<Value = Header> {
    (full_id(), iso()).prop_map(|(id, timestamp)| Header { id, timestamp })
}

fn config() -> ProptestConfig {
    // `ProptestConfig::default()` reads PROPTEST_CASES; only replace the stock 256.
    let mut c = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = 128;
    }
    c
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(Index, u8),
    Insert(Index, u8),
    Delete(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let byte = prop_oneof![
        any::<u8>(),
        prop::sample::select(b"\n\"\\{}[]:,0 u\xff\xc3\xed".to_vec()),
    ];
    prop_oneof![
        (any::<Index>(), 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        (any::<Index>(), byte).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<Index>().prop_map(Mutation::Delete),
    ]
}

/// `bytes` scanned from a file into a lean index (what `persyk context` and `check` use).
fn lean(bytes: &[u8]) -> SessionIndex {
    use std::io::{Seek, Write};
    let mut file = tempfile::tempfile().expect("temp file");
    file.write_all(bytes).expect("write");
    file.rewind().expect("rewind");
    scan_file_lean(&file).expect("lean scan")
}

/// The (line, code) of each diagnostic.
fn diagnostic_codes(index: &SessionIndex) -> Vec<(u64, &'static str)> {
    index
        .diagnostics()
        .iter()
        .map(|d| (d.line, d.code.as_str()))
        .collect()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn writer_output_validates_and_projects_like_the_model(
        header in header(),
        plans in prop::collection::vec(plan(), 0..60),
        leaf in any::<Index>(),
    ) {
        let entries = build(&plans);
        for e in &entries {
            let line = e.to_line();
            prop_assert!(!line.contains('\n'), "a record line contains a newline: {line}");
            let back = Entry::from_line(&line);
            prop_assert!(back.is_ok(), "from_line failed on {line}: {back:?}");
            prop_assert_eq!(back.unwrap(), e.clone(), "round trip of {}", line);
        }
        let bytes = file(&header, &entries);
        let index = scan_bytes(&bytes);
        prop_assert!(
            index.diagnostics().is_empty(),
            "diagnostics {:?} for\n{}",
            index.diagnostics(),
            String::from_utf8_lossy(&bytes)
        );
        prop_assert!(index.is_valid());
        let h = index.header().expect("header");
        prop_assert_eq!(&h.id, &header.id);
        prop_assert_eq!(&h.timestamp, &header.timestamp);
        check_scan_invariants(&bytes, &index);

        let model = Model::new(&entries);
        let mut leaves = Vec::new();
        if !entries.is_empty() {
            leaves.push(LeafSelector::Id(entries[leaf.index(entries.len())].id.clone()));
        }
        assert_index_matches(&index, &model, &leaves);
        // The lean index answers alike.
        let lean = lean(&bytes);
        prop_assert_eq!(diagnostic_codes(&lean), diagnostic_codes(&index));
        assert_index_matches(&lean, &model, &leaves);
    }

    #[test]
    fn byte_mutations_never_panic(
        header in header(),
        plans in prop::collection::vec(plan(), 0..20),
        mutations in prop::collection::vec(mutation(), 1..8),
    ) {
        let mut bytes = file(&header, &build(&plans));
        for m in &mutations {
            match *m {
                Mutation::Flip(i, x) => {
                    let i = i.index(bytes.len());
                    bytes[i] ^= x;
                }
                Mutation::Insert(i, b) => {
                    let i = i.index(bytes.len() + 1);
                    bytes.insert(i, b);
                }
                Mutation::Delete(i) => {
                    if !bytes.is_empty() {
                        let i = i.index(bytes.len());
                        bytes.remove(i);
                    }
                }
            }
        }
        let index = scan_bytes(&bytes);
        check_scan_invariants(&bytes, &index);
        prop_assert_eq!(diagnostic_codes(&lean(&bytes)), diagnostic_codes(&index));
    }
}

// ---------------------------------------------------------------------------------------------
// Regression tests for round-trip bugs the property found (fixed in src/session/format.rs).

/// A valid `custom_message` with block content must read back: `history::read_entries` (and
/// so `persyk context`) parses every projected line with `Entry::from_line`, and today reports
/// `history.changed` for such a file.
#[test]
fn custom_message_block_content_round_trips() {
    let line = r#"{"type":"custom_message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00Z","customType":"x","content":[{"type":"text","text":"hi"}],"display":true}"#;
    let file = format!(
        "{}\n{line}\n",
        r#"{"type":"session","version":1,"id":"s1","timestamp":"2026-01-01T00:00:00Z"}"#
    );
    assert!(
        scan_bytes(file.as_bytes()).is_valid(),
        "the validator accepts it"
    );
    let e = Entry::from_line(line).expect("a validated custom_message line parses");
    assert_eq!(
        e.body,
        EntryBody::CustomMessage(CustomMessage {
            custom_type: "x".into(),
            content: CustomContent::Blocks(vec![Block::text("hi")]),
            display: true,
            details: None,
        })
    );
    assert_eq!(e.to_line(), line);
}

/// A record may nest up to 128 containers (its own object is depth 1); the validator accepts
/// exactly 128, so `from_line` must read it. Today it keeps serde_json's default recursion
/// limit and fails ("recursion limit exceeded"), so `persyk context
/// fixtures/golden/depth-128.jsonl` reports `history.changed`.
#[test]
fn max_depth_record_round_trips() {
    let header = r#"{"type":"session","version":1,"id":"s1","timestamp":"2026-01-01T00:00:00Z"}"#;
    // record (1) + data arrays (127) = 128 containers.
    let custom = format!(
        r#"{{"type":"custom","id":"c","parentId":null,"timestamp":"2026-01-01T00:00:00Z","customType":"x","data":{}1{}}}"#,
        "[".repeat(127),
        "]".repeat(127)
    );
    // record (1) + message (1) + unknown key arrays (126) = 128 containers.
    let message = format!(
        r#"{{"type":"message","id":"m","parentId":"c","timestamp":"2026-01-01T00:00:00Z","message":{{"role":"user","content":[],"timestamp":0,"x":{}1{}}}}}"#,
        "[".repeat(126),
        "]".repeat(126)
    );
    let file = format!("{header}\n{custom}\n{message}\n");
    assert!(
        scan_bytes(file.as_bytes()).is_valid(),
        "the validator accepts depth 128"
    );
    for line in [&custom, &message] {
        let e = Entry::from_line(line).expect("a validated line parses");
        assert_eq!(Entry::from_line(&e.to_line()).expect("and again"), e);
    }
}

/// `details`/`source` written as `null` must read back as written: the schema makes them
/// "any JSON", and `null` is JSON.
#[test]
fn null_optional_json_round_trips() {
    let e = Entry {
        id: "cm1".into(),
        parent_id: None,
        timestamp: "2026-01-01T00:00:00Z".into(),
        body: EntryBody::CustomMessage(CustomMessage {
            custom_type: "x".into(),
            content: CustomContent::Text("hi".into()),
            display: true,
            details: Some(Value::Null),
        }),
    };
    let line = e.to_line();
    assert_eq!(
        line,
        r#"{"type":"custom_message","id":"cm1","parentId":null,"timestamp":"2026-01-01T00:00:00Z","customType":"x","content":"hi","display":true,"details":null}"#
    );
    assert_eq!(Entry::from_line(&line).unwrap(), e);
}
