//! Diagnostics: every way a session file can break the v1 contract, as a stable code.
//!
//! Invariants:
//! - A [`Code`] string never changes once released; tests, fixtures (`fixtures/reject/<code>*.jsonl`)
//!   and scripts match on it.
//! - A diagnostic message is built only from static text and numbers. It never quotes bytes
//!   from the file, so message bodies, custom data, keys and anything that looks like a secret
//!   can never leak through a diagnostic.
//! - Only [`Code::FileIncompleteTail`] leaves the committed part of a file authoritative; every
//!   other code blocks authoritative projection and mutation.

use std::fmt;

/// Diagnostics kept per scan; the rest are only counted (`SessionIndex::diagnostics_total`).
pub const MAX_KEPT_DIAGNOSTICS: usize = 10_000;

macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $message:literal; )*) => {
        /// A stable diagnostic code. `as_str` is the dotted form (`entry.parent-missing`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Code {
            $( $(#[$doc])* $variant, )*
        }

        impl Code {
            /// Every code, in declaration order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The stable dotted code.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code,)* }
            }

            /// A one-line explanation that never contains file content.
            pub fn describe(self) -> &'static str {
                match self { $(Code::$variant => $message,)* }
            }

            /// Looks a code up by its dotted form.
            pub fn parse(code: &str) -> Option<Code> {
                match code { $($code => Some(Code::$variant),)* _ => None }
            }
        }
    };
}

codes! {
    // Record level: the bytes of one line.
    RecordInvalidUtf8 = "record.invalid-utf8", "record is not valid UTF-8";
    RecordBom = "record.bom", "file starts with a byte order mark";
    RecordTooLarge = "record.too-large", "record is longer than 1048576 bytes";
    RecordTooDeep = "record.too-deep", "record nests more than 128 containers";
    RecordLoneSurrogate = "record.lone-surrogate", "string contains an unpaired UTF-16 surrogate escape";
    RecordSyntax = "record.syntax", "record is not well-formed JSON";
    RecordNotObject = "record.not-object", "record is not a JSON object";
    RecordBlankLine = "record.blank-line", "blank line";
    RecordDuplicateKey = "record.duplicate-key", "an object repeats a key";
    // File level.
    FileEmpty = "file.empty", "file has no committed header";
    /// The final line has no "\n": it is not committed. Explicit recovery handles it.
    FileIncompleteTail = "file.incomplete-tail", "final line has no newline and is not committed";
    // Header (line 1).
    HeaderMissing = "header.missing", "first record is not a session header";
    HeaderDuplicate = "header.duplicate", "a second session header appears after line 1";
    HeaderUnsupportedVersion = "header.unsupported-version", "header version is not 1";
    HeaderMissingField = "header.missing-field", "header lacks a required key";
    HeaderUnknownField = "header.unknown-field", "header has a key beyond type, version, id and timestamp";
    HeaderFieldType = "header.field-type", "a header field has the wrong JSON type";
    HeaderInvalidId = "header.invalid-id", "header id does not match the ID pattern";
    HeaderInvalidTimestamp = "header.invalid-timestamp", "header timestamp is not RFC 3339 with a zone";
    // Entry envelope.
    EntryUnknownType = "entry.unknown-type", "entry type is not part of format v1";
    EntryMissingField = "entry.missing-field", "entry lacks a required key";
    EntryUnknownField = "entry.unknown-field", "entry has a key its type does not define";
    EntryFieldType = "entry.field-type", "an entry field has the wrong JSON type";
    EntryInvalidId = "entry.invalid-id", "an entry id does not match the ID pattern";
    EntryDuplicateId = "entry.duplicate-id", "entry id is used by an earlier entry";
    EntryInvalidTimestamp = "entry.invalid-timestamp", "entry timestamp is not RFC 3339 with a zone";
    EntryParentMissing = "entry.parent-missing", "parentId does not name an entry on an earlier line";
    EntryInvalidValue = "entry.invalid-value", "an entry field has a value outside its allowed set";
    // Type-specific rules.
    CustomEmptyType = "custom.empty-type", "customType is empty";
    LabelTargetMissing = "label.target-missing", "label targetId does not name an earlier entry";
    RemovalTargetMissing = "removal.target-missing", "message.removed targetId does not name an earlier entry";
    RemovalTargetNotMessage = "removal.target-not-message", "message.removed targets an entry that is not a message or custom_message";
    RemovalTargetNotAncestor = "removal.target-not-ancestor", "message.removed targets an entry that is not its ancestor";
    RealtimeObservationMismatch = "realtime.observation-mismatch", "observation does not fit the event direction";
    RealtimeSequenceOrder = "realtime.sequence-order", "sequence does not increase within its connection";
    RealtimeMediaInvalid = "realtime.media-invalid", "a media reference is malformed";
    GapInvalid = "gap.invalid", "a recording gap is malformed";
    // Message bodies.
    MessageMissingField = "message.missing-field", "message lacks a required key";
    MessageFieldType = "message.field-type", "a message field has the wrong JSON type";
    MessageInvalidRole = "message.invalid-role", "message role is not user, assistant or toolResult";
    MessageInvalidTimestamp = "message.invalid-timestamp", "message timestamp is not a nonnegative integer";
    MessageInvalidStopReason = "message.invalid-stop-reason", "stopReason is not one of stop, length, toolUse, error, aborted";
    // Content blocks.
    BlockNotObject = "block.not-object", "a content block is not an object";
    BlockMissingField = "block.missing-field", "a known content block lacks a required key";
    BlockUnknownField = "block.unknown-field", "a known content block has a key its type does not define";
    BlockFieldType = "block.field-type", "a content block field has the wrong JSON type";
    BlockInvalidRange = "block.invalid-range", "an audio range is empty, reversed or negative";
    BlockNotAllowed = "block.not-allowed", "custom_message content may hold only text and image blocks";
    // Asset references.
    AssetInvalidStatus = "asset.invalid-status", "asset status is not available or missing";
    AssetMissingField = "asset.missing-field", "asset reference lacks a required key";
    AssetUnknownField = "asset.unknown-field", "asset reference has an undefined key";
    AssetFieldType = "asset.field-type", "an asset field has the wrong JSON type";
    AssetInvalidPath = "asset.invalid-path", "asset path is not assets/ followed by one NAME";
    AssetInvalidByteRange = "asset.invalid-byte-range", "asset byteRange is empty, reversed or negative";
    AssetInvalidSha256 = "asset.invalid-sha256", "sha256 is not 64 hex digits";
}

impl Code {
    /// Whether the code stops authoritative projection and mutation of the file.
    pub fn blocks_projection(self) -> bool {
        self != Code::FileIncompleteTail
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem found in a file, at a 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// 1-based line number; 0 for problems of the file as a whole.
    pub line: u64,
    pub code: Code,
    /// Static explanation, optionally with a field name from the schema (never file content).
    pub message: String,
}

impl Diagnostic {
    pub(crate) fn new(line: u64, code: Code) -> Diagnostic {
        Diagnostic {
            line,
            code,
            message: code.describe().to_owned(),
        }
    }

    /// A diagnostic that names the schema field it is about. `field` is always a
    /// `&'static str` from this crate's schema tables, never a key read from the file.
    pub(crate) fn field(line: u64, code: Code, field: &'static str) -> Diagnostic {
        Diagnostic {
            line,
            code,
            message: format!("{} (field `{field}`)", code.describe()),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.line, self.code, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_dotted_and_parse_back() {
        let mut seen = std::collections::HashSet::new();
        for &code in Code::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "duplicate code {s}");
            assert!(s.contains('.'), "{s} is not dotted");
            assert_eq!(Code::parse(s), Some(code));
        }
    }
}
