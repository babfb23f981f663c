//! The session core: format v1 records, strict validation, and projection in three layers.
//!
//! Reading a session is a pipeline, each stage its own module:
//!
//! 1. [`record`] — bytes of one line → JSON object, with size/UTF-8/depth/surrogate limits
//!    checked before any tree is built.
//! 2. [`validate`] — schema and file rules, line by line, into a [`SessionIndex`] plus
//!    [`Diagnostic`]s with stable [`Code`]s.
//! 3. [`project`] — leaf → path → conversation, name, labels, custom state (index only).
//! 4. [`history`] — the projected entries read back by offset: effective history.
//! 5. [`context`] — generic, model-neutral context (unknown blocks and orphan tool results
//!    dropped here only).
//! 6. [`target`] — what a specific provider API cannot carry, reported without failing.
//!
//! Nothing in `session/` knows about the realtime provider, audio or the UI.

pub mod assets;
pub mod conflict;
pub mod context;
pub mod delete;
pub mod diag;
pub mod discover;
pub mod format;
pub mod fsio;
pub mod history;
pub mod index;
pub mod merge;
pub mod presence;
pub mod project;
pub mod record;
pub mod recover;
pub mod search;
pub mod search_cache;
pub mod secrets;
pub mod store;
pub mod target;
pub mod validate;

pub use diag::{Code, Diagnostic};
pub use index::{EntryKind, IndexEntry, SessionIndex};
pub use project::{
    LeafSelector, PositionSet, ProjectError, Projection, project, project_conversation,
};
pub use store::{Continuation, SessionHandle, Store, StoreError};
pub use validate::{Scanner, scan_bytes, scan_file_lean, scan_path, scan_reader};

use std::path::{Path, PathBuf};

/// The name of the records file inside a session directory.
pub const SESSION_FILE: &str = "session.jsonl";
/// The name of the assets directory inside a session directory.
pub const ASSETS_DIR: &str = "assets";
/// `customType` of the entry that names the device a recording was made on:
/// `{"id": "<this device's id>", "name": "Anna's MacBook Air"}` (`docs/format.md`).
pub const DEVICE_TYPE: &str = "persyk.device";
/// `customType` of the entry that names the file a recording was transcribed from, by its
/// file name only: `{"name": "memo.m4a"}` (`docs/format.md`).
pub const SOURCE_FILE_TYPE: &str = "persyk.source-file";

/// Resolves a user-supplied path to a session file: a directory means its `session.jsonl`,
/// anything else is taken as the file itself.
pub fn session_file(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(SESSION_FILE)
    } else {
        path.to_path_buf()
    }
}
