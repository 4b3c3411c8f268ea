//! Lowercase hex, written by hand: a change row's key and a lane's key are
//! made on every write with a change feed, where `format!("{:016x}")`
//! cost several times as much; and hex of bytes (an MD5, an instance's
//! name in a RowKey), one way for all.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Appends `n` as 16 lowercase hex digits, as `{n:016x}` writes it.
pub(crate) fn push_hex16(out: &mut String, n: u64) {
    for shift in (0..16).rev() {
        out.push(char::from(DIGITS[((n >> (shift * 4)) & 0xf) as usize]));
    }
}

/// `bytes` in lowercase hex, two digits a byte.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_what_format_writes() {
        for n in [0, 1, 0xabc, u64::MAX, 0x0123_4567_89ab_cdef] {
            let mut text = String::new();
            push_hex16(&mut text, n);
            assert_eq!(text, format!("{n:016x}"));
        }
        let bytes = [0u8, 1, 0x7f, 0x80, 0xab, 0xff];
        let expected: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex(&bytes), expected);
        assert_eq!(hex(b""), "");
    }
}
