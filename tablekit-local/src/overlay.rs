//! The engine's file read, and never written: what the engine writes is
//! kept in memory over it. A read-only open of a store that was not closed
//! cleanly opens the engine on this, so that the engine's repair and the
//! journal's records are applied in memory alone, and the directory is
//! left as it was (see [`crate::LocalStorageBuilder::read_only`]).
//!
//! Written by hand: redb's own backends either write the file or hold the
//! whole of it in memory, and this needs the file's pages read as they are
//! and only the changed ones kept, a few dozen lines.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use redb::StorageBackend;

/// The size of the pieces written pages are kept in.
const PAGE: u64 = 4096;

/// A file read as it is, with the writes made to it kept in memory.
#[derive(Debug)]
pub(crate) struct Overlay {
    file: File,
    state: parking_lot::RwLock<State>,
}

#[derive(Debug)]
struct State {
    /// The length the engine gave the storage.
    len: u64,
    /// How much of the file may still be read from it: what was cut off
    /// once reads as zeros, even when the length grows again.
    file_len: u64,
    /// The pages written, by number.
    pages: BTreeMap<u64, Box<[u8]>>,
}

impl Overlay {
    /// The file `file`, opened for reading.
    pub(crate) fn new(file: File) -> io::Result<Overlay> {
        let len = file.metadata()?.len();
        Ok(Overlay {
            file,
            state: parking_lot::RwLock::new(State {
                len,
                file_len: len,
                pages: BTreeMap::new(),
            }),
        })
    }
}

impl State {
    /// Reads page `number` as it stands into `out` (a whole page).
    fn read_page(&self, file: &File, number: u64, out: &mut [u8]) -> io::Result<()> {
        if let Some(page) = self.pages.get(&number) {
            out.copy_from_slice(page);
            return Ok(());
        }
        out.fill(0);
        let start = number * PAGE;
        if start < self.file_len {
            let end = (start + PAGE).min(self.file_len);
            let from_file = usize::try_from(end - start).map_err(io::Error::other)?;
            file.read_exact_at(&mut out[..from_file], start)?;
        }
        Ok(())
    }
}

fn out_of_range() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "past the end of the storage")
}

impl StorageBackend for Overlay {
    fn len(&self) -> io::Result<u64> {
        Ok(self.state.read().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let state = self.state.read();
        let end = offset
            .checked_add(out.len() as u64)
            .filter(|end| *end <= state.len)
            .ok_or_else(out_of_range)?;
        let mut page = vec![0u8; PAGE as usize];
        let mut at = offset;
        while at < end {
            let number = at / PAGE;
            let within = (at % PAGE) as usize;
            let take = ((PAGE - at % PAGE).min(end - at)) as usize;
            state.read_page(&self.file, number, &mut page)?;
            let into = (at - offset) as usize;
            out[into..into + take].copy_from_slice(&page[within..within + take]);
            at += take as u64;
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut state = self.state.write();
        if len < state.len {
            // What is cut off reads as zeros from now on.
            state.file_len = state.file_len.min(len);
            let first_gone = len.div_ceil(PAGE);
            state.pages.split_off(&first_gone);
            if !len.is_multiple_of(PAGE) {
                let number = len / PAGE;
                let mut page = vec![0u8; PAGE as usize];
                state.read_page(&self.file, number, &mut page)?;
                page[(len % PAGE) as usize..].fill(0);
                state.pages.insert(number, page.into_boxed_slice());
            }
        }
        state.len = len;
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut state = self.state.write();
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|end| *end <= state.len)
            .ok_or_else(out_of_range)?;
        let mut at = offset;
        while at < end {
            let number = at / PAGE;
            let within = (at % PAGE) as usize;
            let take = ((PAGE - at % PAGE).min(end - at)) as usize;
            if !state.pages.contains_key(&number) {
                let mut page = vec![0u8; PAGE as usize];
                state.read_page(&self.file, number, &mut page)?;
                state.pages.insert(number, page.into_boxed_slice());
            }
            let from = (at - offset) as usize;
            if let Some(page) = state.pages.get_mut(&number) {
                page[within..within + take].copy_from_slice(&data[from..from + take]);
            }
            at += take as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_file_under_what_was_written_and_never_writes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let original: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &original).unwrap();
        let overlay = Overlay::new(File::open(&path).unwrap()).unwrap();
        let mut model = original.clone();
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..500 {
            match rng.u8(..4) {
                0 => {
                    let len = rng.u64(..20_000);
                    overlay.set_len(len).unwrap();
                    model.resize(len as usize, 0);
                }
                1 | 2 if !model.is_empty() => {
                    let at = rng.usize(..model.len());
                    let n = rng.usize(..=(model.len() - at).min(9_000));
                    let data: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
                    overlay.write(at as u64, &data).unwrap();
                    model[at..at + n].copy_from_slice(&data);
                }
                _ => {}
            }
            assert_eq!(overlay.len().unwrap(), model.len() as u64);
            let at = rng.usize(..=model.len());
            let n = rng.usize(..=model.len() - at);
            let mut out = vec![0xAA; n];
            overlay.read(at as u64, &mut out).unwrap();
            assert_eq!(out, model[at..at + n]);
        }
        assert!(overlay.read(model.len() as u64, &mut [0]).is_err());
        assert!(overlay.write(model.len() as u64, &[0]).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), original);
    }
}
