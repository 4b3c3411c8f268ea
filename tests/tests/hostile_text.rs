//! Hostile text at every public parser: filters, DateTimes, entities' and
//! query responses' JSON, continuation tokens, cursors, SAS ranges, the
//! stored forms of keys and values, connection strings, key tuples and the
//! service's batch responses. Random text drawn from the grammars' own
//! words, and valid inputs cut, spliced and shortened at random places.
//! Nothing may panic: each input is an error or a value, and a filter, a
//! DateTime or an entity that is read renders to text that reads back the
//! same. (No fuzzer here: `cargo fuzz` needs a nightly toolchain, so a
//! seeded generator stands in, the same inputs on every run.)

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Inputs per parser: 30,000 (a few seconds in a debug build), or
/// `TABLEKIT_HOSTILE_ROUNDS` for a longer search.
fn rounds() -> u32 {
    std::env::var("TABLEKIT_HOSTILE_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(30_000)
}

/// xorshift64: a seeded generator, so a failure is the same on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Words of the grammars under test, which random text is made of.
#[rustfmt::skip]
const ALPHA: &[&str] = &[
    "(", ")", " ", "eq", "ne", "gt", "lt", "ge", "le", "and", "or", "not", "'", "''", "\"", "X",
    "PartitionKey", "RowKey", "Timestamp", "datetime'", "guid'", "X'", "binary'", "L", "1", "-",
    ".", "e", "E", "+", "true", "false", "2020-01-01T00:00:00Z", "\u{e000}", "\u{fffd}", "é",
    "\u{1f600}", "\0", "\n", ";", "=", "==", "UseLocalStorage", "AccountName", "AccountKey",
    "TableEndpoint", "https://", "http://", "[", "]", "{", "}", ":", ",", "\\u", "d800", "value",
    "odata.type", "@", "Edm.Int64", "Edm.DateTime", "Edm.Binary", "Edm.Guid", "Edm.Double", "NaN",
    "Infinity", "9999999999999999999999", "0", "_", "~", "|", "/", "%", "%2", "%ff", "--",
    "boundary", "changeset", "HTTP/1.1 ", "204", "Content-Type: ", "\r\n",
    "multipart/mixed; boundary=", "batchresponse_", "changesetresponse_", "Z", "T", "00", "-01",
    "99", ":60", ".9999999", ".99999999", "ReadOnly=true", "Proxy=", "SharedAccessSignature=",
    "sv=", "&", "?", "se=", "sp=", "tn=", "spk=", "srk=", "epk=", "erk=",
];

/// Up to 24 of the grammars' words and random characters, run together.
fn text(r: &mut Rng) -> String {
    let n = r.below(24);
    let mut s = String::new();
    for _ in 0..n {
        if r.below(8) == 0 {
            let c = char::from_u32(r.below(0x11000) as u32).unwrap_or('x');
            s.push(c);
        } else {
            s.push_str(ALPHA[r.below(ALPHA.len())]);
        }
    }
    s
}

/// Cuts, splices or shortens `text` at 1 to 4 random places.
fn mutate(r: &mut Rng, text: &str) -> String {
    let mut v = text.as_bytes().to_vec();
    for _ in 0..1 + r.below(4) {
        let at = r.below(v.len() + 1);
        match r.below(3) {
            0 => v.truncate(at),
            1 => {
                let ins = self::text(r);
                v.splice(at..at, ins.into_bytes());
            }
            _ => {
                if at < v.len() {
                    v.remove(at);
                }
            }
        }
    }
    String::from_utf8_lossy(&v).into_owned()
}

/// Runs `f` on [`rounds`] inputs: random text, and the seeds mutated; a
/// panic fails the test, naming the input.
fn run(name: &str, f: impl Fn(&str)) {
    let mut r = Rng(0x9e3779b97f4a7c15);
    let seeds = [
        "PartitionKey eq 'a' and (RowKey gt 'b' or X eq 12L)",
        "{\"PartitionKey\":\"p\",\"RowKey\":\"r\",\"X@odata.type\":\"Edm.Int64\",\"X\":\"1\"}",
        "{\"value\":[{\"PartitionKey\":\"p\",\"RowKey\":\"r\",\"Timestamp\":\"2020-01-01T00:00:00Z\"}]}",
        "2020-01-01T00:00:00.1234567Z",
        "UseLocalStorage=./x;ReadOnly=true",
        "AccountName=a;AccountKey=AA==;TableEndpoint=https://a.table.core.windows.net",
        // Keys of the tuples `keys` decodes.
        "Sales|0000000123",
        "-9999999999999999995_a_b|1",
        "2020-01-01T00:00:00.0000000Z_00000000-0000-0000-0000-000000000000",
        "-9999999993_00000000000000000009",
    ];
    for i in 0..rounds() {
        let s = if i % 2 == 0 {
            text(&mut r)
        } else {
            let seed = seeds[r.below(seeds.len())];
            mutate(&mut r, seed)
        };
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(&s))) {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{name} panicked on {s:?}: {msg}");
        }
    }
}

#[test]
fn filters() {
    run("filter", |s| {
        if let Ok(f) = tablekit::filter::Filter::parse(s) {
            let t = f.to_string();
            let back = tablekit::filter::Filter::parse(&t);
            assert!(back.is_ok(), "{s:?} -> {t:?} does not parse: {back:?}");
            assert_eq!(back.unwrap().to_string(), t, "{s:?}");
        }
    });
}

#[test]
fn datetimes() {
    run("datetime", |s| {
        if let Ok(d) = tablekit::DateTime::parse(s) {
            assert_eq!(
                tablekit::DateTime::parse(&d.to_string()).unwrap(),
                d,
                "{s:?}"
            );
        }
    });
}

#[test]
fn json() {
    run("json", |s| {
        if let Ok(e) = tablekit::json::row_from_str(s) {
            let t = tablekit::json::to_string(&e);
            let back = tablekit::json::row_from_str(&t);
            assert_eq!(back.as_ref().ok(), Some(&e), "{s:?} -> {t:?}");
        }
        let _ = tablekit::json::from_str(s);
        let _ = tablekit::json::entities_from_str(s);
    });
}

#[test]
fn tokens() {
    run("tokens", |s| {
        if let Ok(token) = s.parse::<tablekit::backend::ContinuationToken>() {
            let text = token.to_string();
            assert_eq!(text.parse().ok(), Some(token), "{s:?} -> {text:?}");
        }
        let _ = s.parse::<tablekit::Cursor>();
        let _ = tablekit_azure::policy::SasRange::from_token(s);
        let mut b = s.as_bytes();
        let _ = tablekit::backend::sorted::decode_value(&mut b);
        let _ = tablekit::backend::sorted::decode_key(s.as_bytes());
    });
}

#[test]
fn connections() {
    run("connection", |s| {
        let _ = tablekit_stores::Location::parse(s);
        let _ = tablekit_azure::config::Account::from_connection_string(s);
    });
}

#[test]
fn keys() {
    use tablekit::key::KeyTuple;
    /// A key that decodes is a value whose key decodes to it again.
    fn again<K: KeyTuple + PartialEq + std::fmt::Debug>(s: &str) {
        if let Ok(k) = K::decode(s) {
            let text = tablekit::key::encode(&k);
            assert_eq!(K::decode(&text).ok(), Some(k), "{s:?} -> {text:?}");
        }
    }
    run("keys", |s| {
        again::<(String, u32)>(s);
        again::<(i64, String, bool)>(s);
        again::<tablekit::key::Padded<6>>(s);
        again::<(tablekit::DateTime, tablekit::uuid::Uuid)>(s);
        again::<(i32, u64)>(s);
    });
}

#[test]
fn batches() {
    use tablekit::{BatchOperation, Entity};
    let ops = vec![
        BatchOperation::Insert(Entity::new("p", "1")),
        BatchOperation::Insert(Entity::new("p", "2")),
        BatchOperation::Delete {
            partition_key: "p".into(),
            row_key: "3".into(),
            if_match: tablekit::IfMatch::Any,
        },
    ];
    let part = |status: &str, etag: &str| {
        format!(
            "--changesetresponse_C1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\nHTTP/1.1 {status}\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-cache\r\nDataServiceVersion: 3.0;\r\n{etag}\r\n"
        )
    };
    let ok = format!(
        "--batchresponse_B1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_C1\r\n\r\n{}{}{}--changesetresponse_C1--\r\n--batchresponse_B1--\r\n",
        part(
            "201 Created",
            "ETag: W/\"datetime'2026-11-21T22%3A39%3A04.2843441Z'\"\r\n"
        ),
        part(
            "204 No Content",
            "ETag: W/\"datetime'2026-11-21T22%3A39%3A04.2843443Z'\"\r\n"
        ),
        part("204 No Content", ""),
    );
    let failed = "--batchresponse_B1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_C1\r\n\r\n--changesetresponse_C1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\nHTTP/1.1 409 Conflict\r\nContent-ID: 2\r\nDataServiceVersion: 3.0;\r\nContent-Type: application/json;odata=minimalmetadata;charset=utf-8\r\n\r\n{\"odata.error\":{\"code\":\"EntityAlreadyExists\",\"message\":{\"lang\":\"en-US\",\"value\":\"1:The specified entity already exists.\\nRequestId:x\\nTime:y\"}}}\r\n--changesetresponse_C1--\r\n--batchresponse_B1--\r\n";
    let mut r = Rng(77);
    for i in 0..rounds() {
        let s = mutate(&mut r, if i % 2 == 0 { ok.as_str() } else { failed });
        let ct = if r.below(10) == 0 {
            text(&mut r)
        } else {
            "multipart/mixed; boundary=batchresponse_B1".to_owned()
        };
        if catch_unwind(AssertUnwindSafe(|| {
            let _ = tablekit_azure::batch::parse(&ct, &s, &ops);
        }))
        .is_err()
        {
            panic!("batch parse panicked on {ct:?} {s:?}");
        }
    }
}
