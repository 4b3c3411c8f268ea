//! Request bodies in ASCII alone, for the emulator.
//!
//! Azurite's Table and Queue services decode each piece of a request body
//! as it arrives and join the texts (Azure/Azurite#2670), so a character of
//! several UTF-8 bytes that falls across two reads is stored as
//! replacement characters: a different value, with no error. Reads split a
//! body past 64 KiB on loopback, and far smaller ones across a network.
//! The service reads bodies whole. Written in ASCII alone, a body has no
//! character to split: JSON escapes the others as `\uXXXX` (UTF-16 units)
//! and XML as character references, which every reader takes as the same
//! text. Hand-written: serde_json has no ASCII-only output.

use std::fmt::Write as _;

/// `json` with every character outside ASCII written as its `\uXXXX`
/// escapes. Only for JSON whose characters outside ASCII are all inside
/// strings, as every JSON writer's are (the syntax itself is ASCII).
pub(crate) fn json(json: String) -> String {
    if json.is_ascii() {
        return json;
    }
    let mut out = String::with_capacity(json.len() * 2);
    let mut units = [0u16; 2];
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            for unit in c.encode_utf16(&mut units) {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\u{unit:04x}");
            }
        }
    }
    out
}

/// `c` as XML text: itself if ASCII, else a character reference.
pub(crate) fn push_xml_char(out: &mut String, c: char) {
    if c.is_ascii() {
        out.push(c);
    } else {
        // Writing to a String cannot fail.
        let _ = write!(out, "&#x{:X};", u32::from(c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_outside_ascii_is_escaped_and_reads_the_same() {
        let text =
            serde_json::json!({"k\u{e9}y": "a\u{e9}\u{4e2d}\u{1f600}\"\\\n", "n": 1}).to_string();
        let ascii = json(text.clone());
        assert!(ascii.is_ascii(), "{ascii}");
        assert!(
            ascii.contains("\\ud83d\\ude00"),
            "a surrogate pair: {ascii}"
        );
        let (a, b): (serde_json::Value, serde_json::Value) = (
            serde_json::from_str(&text).unwrap(),
            serde_json::from_str(&ascii).unwrap(),
        );
        assert_eq!(a, b);
        assert_eq!(json("plain".into()), "plain");
    }

    #[test]
    fn xml_outside_ascii_is_a_reference() {
        let mut out = String::new();
        for c in "a\u{e9}\u{1f600}".chars() {
            push_xml_char(&mut out, c);
        }
        assert_eq!(out, "a&#xE9;&#x1F600;");
    }
}
