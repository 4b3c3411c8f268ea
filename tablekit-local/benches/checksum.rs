//! What checking a stored row's checksum costs, done the way the store does
//! it (one pass over the row's bytes, before they are decoded) and the way
//! a decoder that hashes each piece as it takes it would (in the same pass
//! as the decode): the same CRC-32, over a row of this crate's shape (26
//! bytes of key; 200 of row: its time, a count, and five properties of a
//! name, a 100-byte token, a date, a kind and a version).
//!
//! `cargo bench -p tablekit-local --bench checksum`
//!
//! A load measurement, not a statistical micro-benchmark: no criterion.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// The checksum of a row, as `seal::checksum` makes it: the key's length,
/// the key, then the row's bytes, in one pass.
fn one_pass(key: &[u8], row: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&(key.len() as u64).to_le_bytes());
    hasher.update(key);
    hasher.update(row);
    hasher.finalize()
}

/// The same checksum, the row's bytes hashed piece by piece at the `cuts`
/// a decoder takes them at.
fn piece_by_piece(key: &[u8], row: &[u8], cuts: &[usize]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&(key.len() as u64).to_le_bytes());
    hasher.update(key);
    let mut at = 0;
    for &cut in cuts {
        hasher.update(&row[at..cut]);
        at = cut;
    }
    hasher.update(&row[at..]);
    hasher.finalize()
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let key: Vec<u8> = (0..26).collect();
    let row: Vec<u8> = (0..200u32).map(|i| (i * 7) as u8).collect();
    // The time, the count, then each property's tag and value.
    let cuts = [8, 9, 10, 22, 23, 125, 126, 135, 136, 150, 151, 160];
    assert_eq!(one_pass(&key, &row), piece_by_piece(&key, &row, &cuts));
    let n = 2_000_000u32;
    let (mut whole, mut pieces) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..n {
            black_box(one_pass(black_box(&key), black_box(&row)));
        }
        whole.push(start.elapsed() / n);
        let start = Instant::now();
        for _ in 0..n {
            black_box(piece_by_piece(black_box(&key), black_box(&row), &cuts));
        }
        pieces.push(start.elapsed() / n);
    }
    let (whole, pieces) = (median(whole), median(pieces));
    println!(
        "checksum of a 226-byte row: one pass {whole:?}; piece by piece as a decoder takes \
         them {pieces:?} ({:.1}x)",
        pieces.as_secs_f64() / whole.as_secs_f64()
    );
}
