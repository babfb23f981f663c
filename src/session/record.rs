//! Record level: turning the bytes of one line into a JSON object, or a [`Code`].
//!
//! Invariants:
//! - Size, UTF-8, nesting depth and surrogate checks run on the raw bytes *before* any tree
//!   is built, so a hostile line can neither exhaust memory beyond [`MAX_RECORD_BYTES`] nor
//!   recurse deeper than [`MAX_DEPTH`] containers.
//! - Objects never silently drop a repeated key: a duplicate is [`Code::RecordDuplicateKey`].
//! - Nothing here allocates in proportion to anything but the record itself.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::diag::Code;

/// Largest record, in bytes, not counting the terminating "\n".
pub const MAX_RECORD_BYTES: usize = 1 << 20;
/// Most nested containers in one record; the record's own object is depth 1.
pub const MAX_DEPTH: usize = 128;

/// Checks the raw bytes of one record (without its "\n"): size, strict UTF-8, nesting depth
/// and lone surrogate escapes. Malformed JSON that passes these checks is left for the parser.
pub fn prescan(bytes: &[u8]) -> Result<(), Code> {
    if bytes.len() > MAX_RECORD_BYTES {
        return Err(Code::RecordTooLarge);
    }
    if std::str::from_utf8(bytes).is_err() {
        return Err(Code::RecordInvalidUtf8);
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

/// Parses one record into a JSON object after [`prescan`].
pub fn parse_record(bytes: &[u8]) -> Result<Map<String, Value>, Code> {
    prescan(bytes)?;
    if bytes.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
        return Err(Code::RecordBlankLine);
    }
    let value = parse_strict(bytes)?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(Code::RecordNotObject),
    }
}

/// Parses JSON bytes into a [`Value`], refusing repeated object keys. The caller has already
/// bounded the depth with [`prescan`], so the recursion limit is lifted to allow exactly
/// [`MAX_DEPTH`] levels.
pub fn parse_strict(bytes: &[u8]) -> Result<Value, Code> {
    let duplicate = Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.disable_recursion_limit();
    let result = StrictSeed {
        duplicate: &duplicate,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    match result {
        Ok(v) => Ok(v),
        Err(_) if duplicate.get() => Err(Code::RecordDuplicateKey),
        Err(_) => Err(Code::RecordSyntax),
    }
}

#[derive(Clone, Copy)]
struct StrictSeed<'a> {
    duplicate: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for StrictSeed<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(self)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let v = map.next_value_seed(self)?;
            if out.insert(key, v).is_some() {
                self.duplicate.set(true);
                return Err(de::Error::custom("duplicate key"));
            }
        }
        Ok(Value::Object(out))
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
