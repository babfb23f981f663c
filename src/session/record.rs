//! Record level: turning the bytes of one line into a JSON object, or a [`Code`].
//!
//! Invariants:
//! - A hostile line can neither exhaust memory beyond [`MAX_RECORD_BYTES`] nor recurse deeper
//!   than [`MAX_DEPTH`] containers: the size is checked before anything is read, and the
//!   parser refuses a container deeper than [`MAX_DEPTH`] before it descends into it.
//! - A record is parsed once on the way in. Only a record that fails that parse is
//!   classified by the byte-level checks ([`prescan`]: depth, lone surrogates) and the
//!   classifying parse, so each rejection has the same code whichever path found it.
//! - Objects never silently drop a repeated key: a duplicate is [`Code::RecordDuplicateKey`].
//! - Nothing here allocates in proportion to anything but the record itself.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::diag::Code;

/// Largest record, in bytes, not counting the terminating "\n".
pub const MAX_RECORD_BYTES: usize = 1 << 20;
/// Most nested containers in one record; the record's own object is depth 1.
pub const MAX_DEPTH: usize = 128;

/// Checks the raw bytes of one record (without its "\n"): size, nesting depth and lone
/// surrogate escapes. Malformed JSON that passes these checks is left for the parser, and
/// so is UTF-8: serde_json validates every string it reads and rejects any non-ASCII byte
/// outside strings, so a record that parses is strict UTF-8 (a failed parse is classified
/// by [`parse_strict`]).
pub fn prescan(bytes: &[u8]) -> Result<(), Code> {
    if bytes.len() > MAX_RECORD_BYTES {
        return Err(Code::RecordTooLarge);
    }
    let mut depth = 0usize;
    let mut i = 0usize;
    let n = bytes.len();
    while i < n {
        match bytes[i] {
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(Code::RecordTooDeep);
                }
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'"' => {
                i = scan_string(bytes, i + 1)?;
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// Scans a string body starting just after its opening quote; returns the index just after
/// the closing quote (or `bytes.len()` for an unterminated string, which the parser rejects).
fn scan_string(bytes: &[u8], mut i: usize) -> Result<usize, Code> {
    loop {
        match memchr::memchr2(b'"', b'\\', &bytes[i..]) {
            None => return Ok(bytes.len()),
            Some(off) => {
                i += off;
                if bytes[i] == b'"' {
                    return Ok(i + 1);
                }
                // Backslash escape.
                match bytes.get(i + 1) {
                    Some(b'u') => {
                        let Some(unit) = hex4(bytes, i + 2) else {
                            // Malformed escape: a syntax error the parser reports.
                            i += 2;
                            continue;
                        };
                        i += 6;
                        if (0xD800..0xDC00).contains(&unit) {
                            let low = if bytes.get(i) == Some(&b'\\')
                                && bytes.get(i + 1) == Some(&b'u')
                            {
                                hex4(bytes, i + 2)
                            } else {
                                None
                            };
                            match low {
                                Some(low) if (0xDC00..0xE000).contains(&low) => i += 6,
                                _ => return Err(Code::RecordLoneSurrogate),
                            }
                        } else if (0xDC00..0xE000).contains(&unit) {
                            return Err(Code::RecordLoneSurrogate);
                        }
                    }
                    Some(_) => i += 2,
                    None => return Ok(bytes.len()),
                }
            }
        }
    }
}

fn hex4(bytes: &[u8], at: usize) -> Option<u16> {
    let digits = bytes.get(at..at + 4)?;
    let mut value = 0u16;
    for &d in digits {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return None,
        };
        value = (value << 4) | u16::from(v);
    }
    Some(value)
}

/// A parsed JSON value that borrows its strings from the record whenever they contain no
/// escapes. Objects are key/value vectors in document order: small records need no hashing
/// and no per-string allocation, which is what makes validation cheaper than building a
/// `serde_json::Value`.
#[derive(Debug, Clone, PartialEq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    /// An integer that fits `u64`.
    UInt(u64),
    /// A negative integer.
    Int(i64),
    Float(f64),
    Str(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

/// The members of a JSON object, in document order, keys unique.
pub type Obj<'a> = [(Cow<'a, str>, Json<'a>)];

impl<'a> Json<'a> {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Json::UInt(n) => Some(*n),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_object(&self) -> Option<&Obj<'a>> {
        match self {
            Json::Object(m) => Some(m),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&[Json<'a>]> {
        match self {
            Json::Array(v) => Some(v),
            _ => None,
        }
    }
    pub fn is_object(&self) -> bool {
        matches!(self, Json::Object(_))
    }
    pub fn is_string(&self) -> bool {
        matches!(self, Json::Str(_))
    }
    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }
    pub fn is_number(&self) -> bool {
        matches!(self, Json::UInt(_) | Json::Int(_) | Json::Float(_))
    }
    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        self.as_object().and_then(|m| get(m, key))
    }
    /// RFC 6901 JSON pointer lookup.
    pub fn pointer(&self, pointer: &str) -> Option<&Json<'a>> {
        if pointer.is_empty() {
            return Some(self);
        }
        let rest = pointer.strip_prefix('/')?;
        let mut cur = self;
        for token in rest.split('/') {
            let token = token.replace("~1", "/").replace("~0", "~");
            cur = match cur {
                Json::Object(m) => get(m, &token)?,
                Json::Array(v) => {
                    if token.len() > 1 && token.starts_with('0') {
                        return None;
                    }
                    v.get(token.parse::<usize>().ok()?)?
                }
                _ => return None,
            };
        }
        Some(cur)
    }
}

/// The member `key` of an object's members.
pub fn get<'v, 'a>(m: &'v Obj<'a>, key: &str) -> Option<&'v Json<'a>> {
    m.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// Parses one record into its top-level object's members.
///
/// A record that is valid UTF-8 is parsed first with the depth bounded by the parser itself
/// ([`StrictSeed`] refuses a container deeper than [`MAX_DEPTH`] before descending into it,
/// and serde_json refuses lone surrogate escapes in every string it reads), so a record that
/// parses there would have passed [`prescan`] too. Any failure, and any record that is not
/// UTF-8, takes the full path: [`prescan`] first, then [`parse_strict`], so every rejection
/// keeps exactly the code it had.
pub fn parse_record(bytes: &[u8]) -> Result<Vec<(Cow<'_, str>, Json<'_>)>, Code> {
    // The fast path: any error is only "not here"; the full path below classifies it.
    if bytes.len() <= MAX_RECORD_BYTES
        && let Ok(text) = simdutf8::basic::from_utf8(bytes)
        && let Ok(value) = parse_with(serde_json::Deserializer::from_str(text), || false)
    {
        return match value {
            Json::Object(map) => Ok(map),
            _ => Err(Code::RecordNotObject),
        };
    }
    prescan(bytes)?;
    if bytes.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
        return Err(Code::RecordBlankLine);
    }
    match parse_strict(bytes)? {
        Json::Object(map) => Ok(map),
        _ => Err(Code::RecordNotObject),
    }
}

/// Parses one record into a `serde_json::Value` after [`prescan`], with the full
/// [`MAX_DEPTH`] levels (serde_json alone stops at 127). For code that needs an owned value
/// of a record that may legitimately be 128 containers deep.
pub fn parse_value(bytes: &[u8]) -> Result<serde_json::Value, Code> {
    use serde::Deserialize;
    prescan(bytes)?;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.disable_recursion_limit();
    serde_json::Value::deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|_| Code::RecordSyntax)
}

/// Parses JSON bytes into a [`Json`], refusing repeated object keys. The caller has already
/// bounded the depth with [`prescan`], so the recursion limit is lifted to allow exactly
/// [`MAX_DEPTH`] levels.
pub fn parse_strict(bytes: &[u8]) -> Result<Json<'_>, Code> {
    // One SIMD check of the whole record, then a parse that does not check each string
    // again. A record that is not UTF-8 takes the byte parser, which classifies its failure
    // exactly as before (a duplicate key found first stays a duplicate key).
    if let Ok(text) = simdutf8::basic::from_utf8(bytes) {
        return parse_with(serde_json::Deserializer::from_str(text), || false);
    }
    parse_with(serde_json::Deserializer::from_slice(bytes), || {
        std::str::from_utf8(bytes).is_err()
    })
}

fn parse_with<'de, R: serde_json::de::Read<'de>>(
    mut de: serde_json::Deserializer<R>,
    invalid_utf8: impl FnOnce() -> bool,
) -> Result<Json<'de>, Code> {
    let duplicate = Cell::new(false);
    de.disable_recursion_limit();
    let result = StrictSeed {
        duplicate: &duplicate,
        depth: 1,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    match result {
        Ok(v) => Ok(v),
        Err(_) if duplicate.get() => Err(Code::RecordDuplicateKey),
        Err(_) if invalid_utf8() => Err(Code::RecordInvalidUtf8),
        Err(_) => Err(Code::RecordSyntax),
    }
}

#[derive(Clone, Copy)]
struct StrictSeed<'c> {
    duplicate: &'c Cell<bool>,
    /// Nesting depth of the value this seed reads if it is a container (the record's own
    /// object is 1); a container deeper than [`MAX_DEPTH`] is refused before its members are
    /// read, so the parser's recursion stays bounded without serde_json's own limit.
    depth: usize,
}

impl StrictSeed<'_> {
    /// The seed for the members of the container this seed reads.
    fn inner<E: de::Error>(self) -> Result<Self, E> {
        if self.depth > MAX_DEPTH {
            return Err(E::custom("too deep"));
        }
        Ok(StrictSeed {
            depth: self.depth + 1,
            ..self
        })
    }
}

impl<'de> DeserializeSeed<'de> for StrictSeed<'_> {
    type Value = Json<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Json<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v))
    }
}

fn has_duplicate_keys(members: &Obj<'_>) -> bool {
    if members.len() <= 16 {
        members
            .iter()
            .enumerate()
            .any(|(i, (k, _))| members[..i].iter().any(|(other, _)| other == k))
    } else {
        let mut seen = std::collections::HashSet::with_capacity(members.len());
        !members.iter().all(|(k, _)| seen.insert(k.as_ref()))
    }
}

impl<'de> Visitor<'de> for StrictSeed<'_> {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json<'de>, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json<'de>, E> {
        Ok(if v >= 0 {
            Json::UInt(v as u64)
        } else {
            Json::Int(v)
        })
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json<'de>, E> {
        Ok(Json::UInt(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Json<'de>, E> {
        Ok(Json::Float(v))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Owned(v)))
    }
    fn visit_unit<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }
    fn visit_none<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        let inner = self.inner()?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(inner)? {
            out.push(v);
        }
        Ok(Json::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        let inner = self.inner()?;
        let mut out = Vec::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let v = map.next_value_seed(inner)?;
            out.push((key, v));
        }
        if has_duplicate_keys(&out) {
            self.duplicate.set(true);
            return Err(de::Error::custom("duplicate key"));
        }
        Ok(Json::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        let mut s = String::from("{\"a\":");
        for _ in 1..depth {
            s.push('[');
        }
        s.push('1');
        for _ in 1..depth {
            s.push(']');
        }
        s.push('}');
        s
    }

    #[test]
    fn depth_limit_is_exactly_128() {
        assert!(parse_record(nested(128).as_bytes()).is_ok());
        assert_eq!(
            parse_record(nested(129).as_bytes()),
            Err(Code::RecordTooDeep)
        );
    }

    #[test]
    fn surrogates() {
        assert!(parse_record(br#"{"a":"\ud83d\ude00"}"#).is_ok());
        assert!(parse_record(br#"{"a":"\uD83D\uDE00"}"#).is_ok());
        for bad in [
            &br#"{"a":"\ud800"}"#[..],
            br#"{"a":"\ude00"}"#,
            br#"{"a":"\ud800\u0041"}"#,
            br#"{"a":"\ud800x"}"#,
            br#"{"\ud800":1}"#,
        ] {
            assert_eq!(parse_record(bad), Err(Code::RecordLoneSurrogate));
        }
        // An escaped backslash followed by "u" is not an escape.
        assert!(parse_record(br#"{"a":"\\ud800"}"#).is_ok());
    }

    #[test]
    fn duplicate_keys_and_shapes() {
        assert_eq!(
            parse_record(br#"{"a":1,"a":2}"#),
            Err(Code::RecordDuplicateKey)
        );
        assert_eq!(
            parse_record(br#"{"a":{"b":1,"b":1}}"#),
            Err(Code::RecordDuplicateKey)
        );
        assert_eq!(parse_record(b"[1]"), Err(Code::RecordNotObject));
        assert_eq!(parse_record(b"{"), Err(Code::RecordSyntax));
        assert_eq!(parse_record(b"{} {}"), Err(Code::RecordSyntax));
        assert_eq!(parse_record(b""), Err(Code::RecordBlankLine));
        assert_eq!(
            parse_record(b"{\"a\":\"\xff\"}"),
            Err(Code::RecordInvalidUtf8)
        );
        let big = format!("{{\"a\":\"{}\"}}", "x".repeat(MAX_RECORD_BYTES));
        assert_eq!(parse_record(big.as_bytes()), Err(Code::RecordTooLarge));
    }
}
