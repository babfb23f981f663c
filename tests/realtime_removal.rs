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
    c.append_one(removal::intent_body(&a, "item_a", "conn1"))
        .expect("intent a");
    c.append_one(removal::intent_body(&b, "item_b", "conn1"))
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
    let ids: Vec<&str> = p.conversation.iter().map(|&x| index.id(x)).collect();
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
