//! The errors of the file system and of the engine as tablekit's, by
//! meaning.

use std::path::Path;

use tablekit_core::{Error, StorageFailure};

/// A file system error as tablekit's: a full disk, else an I/O failure.
pub(crate) fn io_error(path: &Path, error: &std::io::Error) -> Error {
    Error::Storage {
        path: path.display().to_string(),
        failure: if error.kind() == std::io::ErrorKind::StorageFull {
            StorageFailure::DiskFull
        } else {
            StorageFailure::Io
        },
        message: error.to_string(),
    }
}

/// The engine's error as tablekit's, by meaning.
pub(crate) fn storage_error(path: &Path, error: redb::Error) -> Error {
    let failure = match &error {
        // A file that ends before its pages do: cut short, damage.
        redb::Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            StorageFailure::Damaged
        }
        // A file the engine does not take for its own (its header does not
        // read): damage, since only a store's file is opened.
        redb::Error::Io(io) if io.kind() == std::io::ErrorKind::InvalidData => {
            StorageFailure::Damaged
        }
        redb::Error::Io(io) => return io_error(path, io),
        redb::Error::DatabaseAlreadyOpen | redb::Error::LockProtocolMismatch => {
            StorageFailure::Locked
        }
        redb::Error::Corrupted(_) | redb::Error::UpgradeRequired(_) => StorageFailure::Damaged,
        // The store's engine tables have one type each, ever: another in
        // the engine's list of tables is that list damaged.
        redb::Error::TableTypeMismatch { .. }
        | redb::Error::TypeDefinitionChanged { .. }
        | redb::Error::TableIsMultimap(_)
        | redb::Error::TableIsNotMultimap(_) => StorageFailure::Damaged,
        _ => StorageFailure::Io,
    };
    Error::Storage {
        path: path.display().to_string(),
        failure,
        message: error.to_string(),
    }
}
