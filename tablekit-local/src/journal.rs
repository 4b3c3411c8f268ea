//! The journal: a file of the changes committed since the engine's last
//! durable commit, so that a write is durable with one append and one sync
//! of a small record, instead of the engine's commit (which writes several
//! pages all over its file before its sync).
//!
//! # How a group of writes becomes durable
//! 1. The writer runs the group's jobs in one engine transaction, recording
//!    each change ([`crate::logged`]).
//! 2. The engine commits the transaction without a sync of its own
//!    (`Durability::None`). Readers are not shown it yet.
//! 3. The changes of the groups committed since the last sync go into the
//!    journal as one record, and the journal is synced: from here they are
//!    durable, and readers are shown them ([`crate::writer`]). A record is
//!    written only once the one before it is synced, so that records reach
//!    the disk in their order.
//! 4. When the journal would be full, or the engine would hold more than
//!    [`MOST_HELD`] changes without a durable commit, every record written
//!    is synced first, and the next group is committed durably by the
//!    engine instead (a *checkpoint*), which also stores, in the engine,
//!    the number of the last record it holds. The journal then starts
//!    again at its beginning.
//!
//! On open, the records after that number are applied again (*replayed*)
//! in one engine commit without a sync of its own, and the journal goes on
//! after them: they stay in the journal until the next checkpoint, so a
//! crash before it replays them again, which changes nothing (a record's
//! changes are puts and removals of whole values, so applying them again
//! in order gives the same state). The replay needs no room beyond what
//! the engine's state took before, so a store reopened on a full disk
//! still reads. A clean close checkpoints, so the journal then holds
//! nothing to replay.
//!
//! # The file
//! `tablekit.journal`, at most [`CAPACITY`] bytes, written from its start
//! again after each checkpoint. A record is a header (a magic number, the
//! record's number, its length, and a CRC-32 of all three and the changes),
//! then the changes, padded to a whole block of [`BLOCK`] bytes so that a
//! sync never rewrites a block of an earlier record. Records run from
//! number one past the checkpoint's, one after another; replay stops at the
//! first block that is not the next record (an old record of an earlier
//! round, zeros, the end of the file, or a record cut short by a crash,
//! which was never acknowledged). A record that fails its checksum with a
//! whole later record after it is damage, not a crash's tail, and the open
//! fails, naming it.
//!
//! Overwriting blocks the file already has costs a sync of the data only,
//! where an append must also sync the file's length (on this project's test
//! machine, about 10,000 syncs a second against 6,600). So the journal
//! grows by [`GROWTH`] bytes of zeros at a time, written with the record
//! that needs them and synced with it: one sync in every [`GROWTH`] bytes
//! also syncs a new length, and every other record is written in place.
//!
//! Written by hand: the engine (redb) has no journal of its own, and the
//! format is a few dozen lines.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// The journal's file in a store's directory.
pub(crate) const FILE_NAME: &str = "tablekit.journal";

/// The most bytes the journal takes: a checkpoint comes once it is full.
/// Larger means fewer checkpoints and a longer replay after a crash.
pub(crate) const CAPACITY: u64 = 4 << 20;

/// The most changes (puts and removals of the engine's values) the engine
/// holds without a durable commit of its own: a checkpoint comes once a
/// group would pass it, however much room the journal has left.
///
/// The engine never overwrites a page that its last durable commit
/// reaches: a change copies its page, and the original is free for reuse
/// only after the next durable commit. So between two checkpoints the file
/// takes about one page more for each page changed, and writes spread over
/// a large store change a page each. With checkpoints only when the journal
/// was full (4 MiB of records: 16,000 changes when 16 writers share their
/// groups), 400,000 writes all over 100,000 rows left the store taking 2.2
/// times the disk a SQLite database of the same rows took, half of it free
/// pages; a checkpoint every 512 changes leaves 1.24-1.28 times. It costs a
/// durable commit of the engine per 512 changes: a single writer's, which
/// filled the journal after about 1,000, comes twice as often (its rate
/// did not change measurably), and 16 writers appending to their own
/// ranges wrote about 5% fewer rows a second in the bench (`bench/disk`,
/// medians of 8 alternating runs). A transaction's rows written in key
/// order count once (see [`crate::logged::Recorded::count`]), so a bulk
/// load checkpoints when the journal is full, as before.
pub(crate) const MOST_HELD: u64 = 512;

/// The bytes of zeros the journal grows by when a record would pass its
/// end.
pub(crate) const GROWTH: u64 = 1 << 20;

/// Records start on a block of this many bytes.
pub(crate) const BLOCK: u64 = 4096;

const MAGIC: [u8; 4] = *b"TKJ1";
const HEADER: usize = 20;

/// What [`Journal::write`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Appended {
    /// The record is written and synced: the changes are durable.
    Written,
    /// Nothing written: the record does not fit before the end of the
    /// journal. The caller commits the changes durably with the engine
    /// instead, and calls [`Journal::restart`].
    Full,
}

/// The journal of a writable store.
pub(crate) struct Journal {
    /// Shared with the thread that syncs it ([`Journal::file`]).
    file: Arc<File>,
    /// Where the next record goes.
    offset: u64,
    /// The number of the last record written (or of the checkpoint, if none
    /// since).
    last: u64,
    /// Where the last record began, to take it back.
    last_offset: u64,
    /// The bytes the file has (whole blocks), where a record overwrites.
    length: u64,
}

/// One record read back: its number and its changes.
pub(crate) struct Record {
    pub(crate) number: u64,
    pub(crate) changes: Vec<u8>,
}

impl Journal {
    /// Opens the journal in `dir` (creating it if missing), and reads the
    /// records after number `checkpoint`, to replay. Until
    /// [`restart`](Journal::restart) is called, nothing is written.
    pub(crate) fn open(dir: &Path, checkpoint: u64) -> io::Result<(Journal, Vec<Record>)> {
        let path = dir.join(FILE_NAME);
        let created = !path.exists();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        if created {
            // The new name is durable once the directory is.
            File::open(dir)?.sync_all()?;
        }
        let records = read_after(&file, checkpoint)?;
        let length = file.metadata()?.len() / BLOCK * BLOCK;
        let journal = Journal {
            file: Arc::new(file),
            offset: 0,
            last: checkpoint,
            last_offset: 0,
            length,
        };
        Ok((journal, records))
    }

    /// Whether the journal in `dir` holds records after number
    /// `checkpoint`, without changing anything (for a read-only open).
    pub(crate) fn has_records_after(dir: &Path, checkpoint: u64) -> io::Result<bool> {
        let path = dir.join(FILE_NAME);
        match File::open(&path) {
            Ok(file) => Ok(read_record(&file, 0, checkpoint + 1)?.is_some()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The records after number `checkpoint` of the journal in `dir`, read
    /// without changing anything (for a read-only open); none when there
    /// is no journal.
    pub(crate) fn records_after(dir: &Path, checkpoint: u64) -> io::Result<Vec<Record>> {
        match File::open(dir.join(FILE_NAME)) {
            Ok(file) => read_after(&file, checkpoint),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// The number of the last record written, or of the checkpoint if none
    /// has been written since.
    pub(crate) fn last(&self) -> u64 {
        self.last
    }

    /// Whether no record was written since the last checkpoint.
    pub(crate) fn is_empty(&self) -> bool {
        self.offset == 0
    }

    /// Goes on after `records` (read by [`open`](Journal::open) after
    /// number `checkpoint`, and applied to the engine without a
    /// checkpoint): the next record follows them.
    pub(crate) fn continue_after(&mut self, checkpoint: u64, records: &[Record]) {
        self.offset = records
            .iter()
            .map(|record| padded(HEADER + record.changes.len()))
            .sum();
        self.last = records.last().map_or(checkpoint, |record| record.number);
        self.last_offset = self.offset;
    }

    /// Starts the journal again at its beginning, after a checkpoint that
    /// holds everything up to record `checkpoint`.
    pub(crate) fn restart(&mut self, checkpoint: u64) {
        self.offset = 0;
        self.last = checkpoint;
        self.last_offset = 0;
    }

    /// Empties the file, after a checkpoint at a clean close: a closed store
    /// takes no room for its journal.
    pub(crate) fn clear(&mut self) -> io::Result<()> {
        self.file.set_len(0)?;
        self.length = 0;
        self.file.sync_all()
    }

    /// Writes `changes` as the next record and syncs it.
    ///
    /// # Errors
    /// The file's. Nothing of a record that failed is ever replayed: the
    /// next record overwrites it, under the same number.
    #[cfg(test)]
    pub(crate) fn append(&mut self, changes: &[u8]) -> io::Result<Appended> {
        let appended = self.write(&[changes])?;
        if appended == Appended::Written {
            self.file.sync_data()?;
        }
        Ok(appended)
    }

    /// Whether `bytes` more (records' [`record_len`]s) fit before the
    /// journal's end.
    pub(crate) fn has_room(&self, bytes: u64) -> bool {
        self.offset + bytes <= CAPACITY
    }

    /// The journal's file, to sync a record [`write`](Journal::write) wrote
    /// (on another thread: a sync covers every record written before it).
    pub(crate) fn file(&self) -> Arc<File> {
        Arc::clone(&self.file)
    }

    /// Writes `parts`, one after another, as the next record's changes,
    /// without a sync: the record is durable once the
    /// [`file`](Journal::file) is synced, and until then the next record
    /// must not be written, so that records reach the disk in order (a
    /// whole record after one a crash cut short is damage).
    ///
    /// # Errors
    /// The file's. Nothing of a record that failed is ever replayed: the
    /// next record overwrites it, under the same number.
    pub(crate) fn write(&mut self, parts: &[&[u8]]) -> io::Result<Appended> {
        let changes: usize = parts.iter().map(|part| part.len()).sum();
        let length = padded(HEADER + changes);
        if !self.has_room(length) {
            return Ok(Appended::Full);
        }
        let number = self.last + 1;
        let mut record = Vec::with_capacity(length as usize);
        record.extend_from_slice(&MAGIC);
        record.extend_from_slice(&number.to_le_bytes());
        record.extend_from_slice(&(changes as u32).to_le_bytes());
        record.extend_from_slice(&checksum(number, parts).to_le_bytes());
        for part in parts {
            record.extend_from_slice(part);
        }
        let end = self.offset + length;
        let grown = if end > self.length {
            // Zeros up to the new length first, then the record: if the
            // record is never synced, what lies after it is zeros or the
            // end of the file, where a replay stops.
            let grown = (end.max(self.length + GROWTH)).min(CAPACITY);
            let zeros = vec![0; (grown - end) as usize];
            // Growing ahead only saves syncs: on a disk with too little
            // room for it, the record alone is written.
            match self.file.write_all_at(&zeros, end) {
                Ok(()) => grown,
                Err(_) => end,
            }
        } else {
            self.length
        };
        record.resize(length as usize, 0);
        self.file.write_all_at(&record, self.offset)?;
        self.length = grown;
        self.last_offset = self.offset;
        self.offset += length;
        self.last = number;
        Ok(Appended::Written)
    }

    /// Takes back the last record written (the engine failed to commit its
    /// changes): its first block is zeroed and synced, so it is never
    /// replayed, and the next record takes its place and number.
    pub(crate) fn retract(&mut self) -> io::Result<()> {
        self.file
            .write_all_at(&[0; BLOCK as usize], self.last_offset)?;
        self.file.sync_data()?;
        self.offset = self.last_offset;
        self.last -= 1;
        Ok(())
    }
}

/// The bytes a record of `changes` bytes takes in the journal.
pub(crate) fn record_len(changes: usize) -> u64 {
    padded(HEADER + changes)
}

/// `length` rounded up to whole blocks.
fn padded(length: usize) -> u64 {
    (length as u64).div_ceil(BLOCK) * BLOCK
}

/// The checksum of record `number` whose changes are `parts`, one after
/// another.
fn checksum(number: u64, parts: &[&[u8]]) -> u32 {
    let length: usize = parts.iter().map(|part| part.len()).sum();
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&MAGIC);
    hasher.update(&number.to_le_bytes());
    hasher.update(&(length as u32).to_le_bytes());
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize()
}

/// The records after number `checkpoint`, from the journal's start.
///
/// # Errors
/// The file's, and [`io::ErrorKind::InvalidData`] when the journal ends at
/// a block that is not the next record, but a whole record with a later
/// number follows it: a crash cannot leave that (each record is synced
/// before the next is written), so the record is damaged, and the writes
/// after it cannot be applied in order.
fn read_after(file: &File, checkpoint: u64) -> io::Result<Vec<Record>> {
    let mut records = Vec::new();
    let mut offset = 0;
    let mut number = checkpoint + 1;
    while let Some(changes) = read_record(file, offset, number)? {
        offset += padded(HEADER + changes.len());
        records.push(Record { number, changes });
        number += 1;
    }
    if let Some(later) = later_record(file, offset, number)? {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "record {number} of the journal is damaged, and record {later} after it is \
                 whole: the writes from record {number} on cannot be applied. Move \
                 {FILE_NAME} away and open the store with \
                 `LocalStorageBuilder::accept_lost_journal` to go on without them"
            ),
        ));
    }
    Ok(records)
}

/// The number of a whole record after `offset` whose number is `number` or
/// later (within what a journal can hold), if there is one.
fn later_record(file: &File, offset: u64, number: u64) -> io::Result<Option<u64>> {
    let most = CAPACITY / BLOCK;
    let mut at = offset + BLOCK;
    while at + HEADER as u64 <= CAPACITY {
        let mut header = [0u8; HEADER];
        if !read_exact_or_end(file, &mut header, at)? {
            return Ok(None);
        }
        let stored = u64::from_le_bytes(header[4..12].try_into().unwrap_or_default());
        if header[..4] == MAGIC
            && stored > number
            && stored <= number + most
            && read_record(file, at, stored)?.is_some()
        {
            return Ok(Some(stored));
        }
        at += BLOCK;
    }
    Ok(None)
}

/// The changes of record `number` at `offset`, or `None` if what is there
/// is not that record, whole.
fn read_record(file: &File, offset: u64, number: u64) -> io::Result<Option<Vec<u8>>> {
    let mut header = [0u8; HEADER];
    if !read_exact_or_end(file, &mut header, offset)? {
        return Ok(None);
    }
    let field = |at: usize, len: usize| &header[at..at + len];
    let stored_number = u64::from_le_bytes(field(4, 8).try_into().unwrap_or_default());
    let length = u32::from_le_bytes(field(12, 4).try_into().unwrap_or_default()) as u64;
    let sum = u32::from_le_bytes(field(16, 4).try_into().unwrap_or_default());
    if field(0, 4) != MAGIC
        || stored_number != number
        || offset + padded(HEADER) > CAPACITY
        || offset + HEADER as u64 + length > CAPACITY
    {
        return Ok(None);
    }
    let mut changes = vec![0; length as usize];
    if !read_exact_or_end(file, &mut changes, offset + HEADER as u64)?
        || checksum(number, &[&changes]) != sum
    {
        return Ok(None);
    }
    Ok(Some(changes))
}

/// Fills `buf` from `offset`; `false` if the file ends first.
fn read_exact_or_end(file: &File, buf: &mut [u8], offset: u64) -> io::Result<bool> {
    match file.read_exact_at(buf, offset) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_in_order_and_stop_at_an_old_round() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, records) = Journal::open(dir.path(), 0).unwrap();
        assert!(records.is_empty());
        for i in 0..5u8 {
            assert_eq!(journal.append(&[i; 5000]).unwrap(), Appended::Written);
        }
        let (_, records) = Journal::open(dir.path(), 0).unwrap();
        let numbers: Vec<_> = records.iter().map(|r| r.number).collect();
        assert_eq!(numbers, [1, 2, 3, 4, 5]);
        assert_eq!(records[3].changes, [3; 5000]);
        // After a checkpoint at 5, the old records are never read again,
        // though their bytes are still in the file.
        let (mut journal, records) = Journal::open(dir.path(), 5).unwrap();
        assert!(records.is_empty());
        journal.restart(5);
        journal.append(b"six").unwrap();
        let (_, records) = Journal::open(dir.path(), 5).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].changes, b"six");
        assert!(Journal::has_records_after(dir.path(), 5).unwrap());
        assert!(!Journal::has_records_after(dir.path(), 6).unwrap());
    }

    #[test]
    fn a_record_written_in_parts_reads_back_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, _) = Journal::open(dir.path(), 0).unwrap();
        let parts: [&[u8]; 3] = [b"first", b"", &[7; 5000]];
        assert_eq!(journal.write(&parts).unwrap(), Appended::Written);
        journal.file().sync_data().unwrap();
        let (_, records) = Journal::open(dir.path(), 0).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].changes, parts.concat());
    }

    #[test]
    fn a_last_record_cut_short_or_changed_ends_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, _) = Journal::open(dir.path(), 0).unwrap();
        for i in 0..3u8 {
            journal.append(&[i; 100]).unwrap();
        }
        let path = dir.path().join(FILE_NAME);
        let whole = std::fs::read(&path).unwrap();
        // The last record changed, as a crash that tore it leaves it.
        let mut bytes = whole.clone();
        bytes[2 * BLOCK as usize + HEADER + 7] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let (_, records) = Journal::open(dir.path(), 0).unwrap();
        assert_eq!(records.len(), 2);
        std::fs::write(&path, &whole[..BLOCK as usize + 50]).unwrap();
        let (_, records) = Journal::open(dir.path(), 0).unwrap();
        assert_eq!(records.len(), 1);
    }

    #[test]
    fn a_changed_record_with_whole_ones_after_it_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, _) = Journal::open(dir.path(), 0).unwrap();
        for i in 0..3u8 {
            journal.append(&[i; 5000]).unwrap();
        }
        let path = dir.path().join(FILE_NAME);
        let mut bytes = std::fs::read(&path).unwrap();
        // Record 2 (two blocks from the first) has a byte changed; 3 is whole.
        bytes[2 * BLOCK as usize + HEADER + 7] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let error = Journal::open(dir.path(), 0).err().expect("damage");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(
            error
                .to_string()
                .contains("record 2 of the journal is damaged"),
            "{error}"
        );
        // Whole records of an earlier round after the end are no damage.
        let (_, records) = Journal::open(dir.path(), 2).unwrap();
        assert!(records.is_empty());
    }

    #[test]
    fn a_retracted_record_is_never_read_and_its_number_is_reused() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, _) = Journal::open(dir.path(), 0).unwrap();
        journal.append(b"one").unwrap();
        journal.append(b"two").unwrap();
        journal.retract().unwrap();
        let (_, records) = Journal::open(dir.path(), 0).unwrap();
        assert_eq!(records.len(), 1);
        journal.append(b"again").unwrap();
        let (_, records) = Journal::open(dir.path(), 0).unwrap();
        let changes: Vec<_> = records.iter().map(|r| r.changes.clone()).collect();
        assert_eq!(changes, [b"one".to_vec(), b"again".to_vec()]);
    }

    #[test]
    fn a_full_journal_asks_for_a_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, _) = Journal::open(dir.path(), 0).unwrap();
        let mut written = 0;
        while journal.append(&[7; 100_000]).unwrap() == Appended::Written {
            written += 1;
        }
        assert_eq!(written, CAPACITY / padded(HEADER + 100_000));
        journal.restart(journal.last());
        assert_eq!(journal.append(&[8; 10]).unwrap(), Appended::Written);
        assert_eq!(journal.last(), written + 1);
    }

    #[test]
    fn the_journal_grows_by_zeros_then_writes_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let length = || std::fs::metadata(&path).unwrap().len();
        let (mut journal, _) = Journal::open(dir.path(), 0).unwrap();
        assert_eq!(length(), 0);
        journal.append(b"one").unwrap();
        assert_eq!(length(), GROWTH);
        // Past the first growth's end, the file grows once more.
        while journal.offset <= GROWTH {
            journal.append(&[1; 10_000]).unwrap();
        }
        assert_eq!(length(), 2 * GROWTH);
        // What lies after the last record is zeros, where a replay stops.
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes[journal.offset as usize..].iter().all(|&b| b == 0));
        let (_, records) = Journal::open(dir.path(), 0).unwrap();
        assert_eq!(records.len() as u64, journal.last());
        // Never past the capacity; a new round overwrites in place.
        while journal.append(&[2; 10_000]).unwrap() == Appended::Written {}
        assert_eq!(length(), CAPACITY);
        journal.restart(journal.last());
        journal.append(b"again").unwrap();
        assert_eq!(length(), CAPACITY);
        // A reopened journal knows its length and does not grow it again.
        let checkpoint = journal.last() - 1;
        drop(journal);
        let (mut journal, records) = Journal::open(dir.path(), checkpoint).unwrap();
        assert_eq!(records.len(), 1);
        journal.continue_after(checkpoint, &records);
        journal.append(b"more").unwrap();
        assert_eq!(length(), CAPACITY);
        journal.clear().unwrap();
        assert_eq!(length(), 0);
    }
}
