//! The state journal beside the database: each change is appended here on the request path
//! (one `write`, no fsync: a killed process loses nothing the kernel already has) and
//! replayed at start for whatever the writer had not yet committed to SQLite.

use std::fs::File;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Change;

#[derive(Serialize, Deserialize)]
struct Entry<C> {
    seq: u64,
    change: C,
}

pub struct Journal {
    file: File,
    path: PathBuf,
    /// The sequence number the next change gets.
    next_seq: u64,
    /// Whether anything was appended since the journal was last emptied.
    holds_changes: bool,
}

impl Journal {
    /// Opens (creating) the journal and reads what it holds; a torn last line (the process
    /// died inside a write) is skipped.
    pub fn open(path: &Path) -> std::io::Result<(Journal, Vec<(u64, Change)>)> {
        let file = crate::private_fs::open(path, true)?;
        let mut entries = Vec::new();
        for line in BufReader::new(&file).split(b'\n') {
            let line = line?;
            match serde_json::from_slice::<Entry<Change>>(&line) {
                Ok(e) => entries.push((e.seq, e.change)),
                Err(e) if !line.is_empty() => {
                    tracing::warn!(journal = %path.display(), "skipping an unreadable journal line: {e}")
                }
                Err(_) => {}
            }
        }
        let last_seq = entries.iter().map(|(seq, _)| *seq).max().unwrap_or(0);
        let holds_changes = file.metadata()?.len() > 0;
        let journal = Journal { file, path: path.to_path_buf(), next_seq: last_seq + 1, holds_changes };
        Ok((journal, entries))
    }

    /// Sequence numbers continue after `seq` (the last one the database has applied).
    pub fn continue_after(&mut self, seq: u64) {
        self.next_seq = self.next_seq.max(seq + 1);
    }

    /// Appends one change and returns its sequence number.
    pub fn append(&mut self, change: &Change) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.holds_changes = true;
        let mut line = serde_json::to_vec(&Entry { seq, change }).expect("state changes serialise");
        line.push(b'\n');
        if let Err(e) = self.file.write_all(&line) {
            // The change still reaches the database through the writer; only a crash before
            // that commit would lose it.
            tracing::error!(journal = %self.path.display(), "cannot append to the state journal: {e}");
        }
        seq
    }

    /// Empties the journal when everything in it is committed (through `committed`).
    pub fn truncate_through(&mut self, committed: u64) {
        if !self.holds_changes || committed + 1 < self.next_seq {
            return;
        }
        match self.file.set_len(0) {
            Ok(()) => self.holds_changes = false,
            Err(e) => tracing::error!(journal = %self.path.display(), "cannot truncate the state journal: {e}"),
        }
    }
}
