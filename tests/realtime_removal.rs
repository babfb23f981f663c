//! Removal intents: a confirmed remote deletion whose local `message.removed` never made it
//! to disk is applied by `reconcile`, without a new request to the provider; an unconfirmed
//! one is reported and left alone.

use persyk::realtime::removal::{self, INTENT_TYPE, Reconciled};
use persyk::session::format::{
    Block, Direction, EntryBody, Message, Observation, RealtimeEvent, Role,
};
use persyk::session::store::Roots;
use persyk::session::{LeafSelector, Store, project, scan_path};
use serde_json::json;

fn deleted_event(conn: &str, item: &str, seq: u64) -> EntryBody {
    let serde_json::Value::Object(payload) = json!({"type":"conversation.item.deleted","event_id":format!("event_{seq}"),"item_id":item})
    else {
        unreachable!()
    };
    EntryBody::RealtimeEvent(RealtimeEvent {
        connection_id: conn.into(),
        direction: Direction::Incoming,
        observation: Observation::Received,
        observed_at: "2026-01-01T00:00:00.000Z".into(),
        sequence: seq,
        payload,
        remote_event_id: Some(format!("event_{seq}")),
        redactions: None,
        media: None,
    })
}

#[test]
fn confirmed_intents_apply_locally_and_unconfirmed_stay() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = Store::new(Roots::new(dir.path().to_path_buf(), Vec::new()).expect("roots"));
    let h = store.create_session().expect("session");
    let mut c = h.continuation(&LeafSelector::Default).expect("leaf");
    let text = |t: &str| EntryBody::Message(Message::new(Role::User, vec![Block::text(t)], 1));
    let a = c.append_one(text("keep me out")).expect("a");
    let b = c.append_one(text("unconfirmed")).expect("b");
    c.append_one(removal::intent_body(&a, "item_a", "conn1", "evt_a"))
        .expect("intent a");
    c.append_one(removal::intent_body(&b, "item_b", "conn1", "evt_b"))
        .expect("intent b");
    c.append_one(deleted_event("conn1", "item_a", 1))
        .expect("evidence");
    // Same item id on another connection is a different item: no proof for item_b.
    c.append_one(deleted_event("conn2", "item_b", 1))
        .expect("other conn");

    let pending = removal::pending_intents(&h).expect("pending");
    assert_eq!(pending.len(), 2);
    assert!(pending.iter().any(|p| p.target_id == a && p.remote_deleted));
    assert!(
        pending
            .iter()
            .any(|p| p.target_id == b && !p.remote_deleted)
    );

    let done = removal::reconcile(&h).expect("reconcile");
    assert!(done.contains(&Reconciled::Applied {
        target_id: a.clone()
    }));
    assert!(done.contains(&Reconciled::Unconfirmed {
        target_id: b.clone()
    }));

    let file = h.dir().join("session.jsonl");
    let index = scan_path(&file).expect("scan");
    assert!(index.is_valid(), "{:?}", index.diagnostics());
    let p = project(&index, &LeafSelector::Default).expect("project");
    let ids: Vec<String> = p
        .conversation
        .iter()
        .map(|&x| index.id(x).into_owned())
        .collect();
    assert_eq!(ids, vec![b.as_str()], "a is excluded, b stays");
    // Text is kept in the file.
    assert!(
        std::fs::read_to_string(&file)
            .expect("read")
            .contains("keep me out")
    );
    // Nothing pending for a any more; running again changes nothing.
    assert_eq!(
        removal::reconcile(&h).expect("again"),
        vec![Reconciled::Unconfirmed { target_id: b }]
    );
    assert!(INTENT_TYPE.starts_with("persyk."));
}

#[test]
fn restart_reports_unfinished_work_without_generating_anything() {
    use persyk::realtime::restart::unfinished_work;
    use persyk::session::format::RecordingStarted;
    let dir = tempfile::tempdir().expect("tmp");
    let store = Store::new(Roots::new(dir.path().to_path_buf(), Vec::new()).expect("roots"));
    let h = store.create_session().expect("session");
    let mut c = h.continuation(&LeafSelector::Default).expect("leaf");
    c.append_one(EntryBody::RecordingStarted(RecordingStarted {
        recording_id: "rec1".into(),
        asset: "assets/rec1.wav".into(),
    }))
    .expect("started");
    for (seq, item) in [(1, "item_a"), (2, "item_b")] {
        let serde_json::Value::Object(payload) = json!({"type":"input_audio_buffer.committed","event_id":format!("e{seq}"),"item_id":item,"previous_item_id":null})
        else {
            unreachable!()
        };
        c.append_one(EntryBody::RealtimeEvent(RealtimeEvent {
            connection_id: "conn1".into(),
            direction: Direction::Incoming,
            observation: Observation::Received,
            observed_at: "2026-01-01T00:00:00.000Z".into(),
            sequence: seq,
            payload,
            remote_event_id: None,
            redactions: None,
            media: None,
        }))
        .expect("event");
    }
    let mut m = Message::new(Role::User, vec![Block::text("first")], 1);
    let mut replay = serde_json::Map::new();
    replay.insert("itemId".into(), json!("item_a"));
    replay.insert("connectionId".into(), json!("conn1"));
    m.replay = Some(replay);
    c.append_one(EntryBody::Message(m)).expect("message");
    let before = std::fs::read(h.dir().join("session.jsonl")).expect("read");

    let w = unfinished_work(&h).expect("status");
    assert_eq!(w.recordings, vec!["rec1".to_string()]);
    assert_eq!(
        w.pending_items,
        vec![("conn1".to_string(), "item_b".to_string())]
    );
    assert!(w.removal_intents.is_empty());
    // Reporting wrote nothing.
    assert_eq!(
        std::fs::read(h.dir().join("session.jsonl")).expect("read"),
        before
    );
}
