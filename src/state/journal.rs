//! The state journal beside the database: each change is appended here on the request path
//! (one `write`, no fsync: a killed process loses nothing the kernel already has) and
//! replayed at start for whatever the writer had not yet committed to SQLite.

use std::fs::File;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Change;

/// A journal segment grows to about this size, then is sealed and a new one begun; a sealed
/// segment is deleted once the database holds all of it. Under sustained load the database
/// never catches up with the last change, so the journal could never be emptied whole.
const SEGMENT_BYTES: u64 = 16 << 20;

/// The staging buffer kept between writes.
const STAGED_KEPT: usize = 16 << 10;

#[derive(Serialize, Deserialize)]
struct Entry<C> {
    seq: u64,
    change: C,
}

pub struct Journal {
    /// The segment appended to.
    file: File,
    path: PathBuf,
    /// Its size.
    bytes: u64,
    /// The last sequence number in the sealed segment (`<path>.1`), while there is one.
    sealed_through: Option<u64>,
    /// The sequence number the next change gets.
    next_seq: u64,
    /// Whether anything was appended since the journal was last emptied.
    holds_changes: bool,
    /// Changes serialised and not yet written (see [`Journal::stage`]).
    staged: Vec<u8>,
}

impl Journal {
    /// Opens (creating) the journal and reads what it holds, the sealed segment first; a torn
    /// last line (the process died inside a write) is skipped.
    pub fn open(path: &Path) -> std::io::Result<(Journal, Vec<(u64, Change)>)> {
        let sealed = sealed_path(path);
        let mut entries = Vec::new();
        let sealed_through = if sealed.exists() {
            read_entries(&crate::private_fs::open(&sealed, true)?, &sealed, &mut entries)?;
            Some(entries.iter().map(|(seq, _)| *seq).max().unwrap_or(0))
        } else {
            None
        };
        let file = crate::private_fs::open(path, true)?;
        read_entries(&file, path, &mut entries)?;
        let last_seq = entries.iter().map(|(seq, _)| *seq).max().unwrap_or(0);
        let bytes = file.metadata()?.len();
        let journal = Journal {
            file,
            path: path.to_path_buf(),
            bytes,
            sealed_through,
            next_seq: last_seq + 1,
            holds_changes: bytes > 0,
            staged: Vec::with_capacity(STAGED_KEPT),
        };
        Ok((journal, entries))
    }

    /// Sequence numbers continue after `seq` (the last one the database has applied).
    pub fn continue_after(&mut self, seq: u64) {
        self.next_seq = self.next_seq.max(seq + 1);
    }

    /// Appends one change and returns its sequence number.
    #[cfg(test)]
    pub fn append(&mut self, change: &Change) -> u64 {
        let seq = self.stage(change);
        self.write_staged();
        seq
    }

    /// Serialises a change after the ones staged before it and returns its sequence number;
    /// nothing is written until [`Journal::write_staged`], so a request's changes cost one
    /// `write`.
    pub fn stage(&mut self, change: &Change) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        serde_json::to_writer(&mut self.staged, &Entry { seq, change }).expect("state changes serialise");
        self.staged.push(b'\n');
        seq
    }

    /// Writes what is staged, in one `write`.
    pub fn write_staged(&mut self) {
        if self.staged.is_empty() {
            return;
        }
        self.holds_changes = true;
        match self.file.write_all(&self.staged) {
            Ok(()) => self.bytes += self.staged.len() as u64,
            // The changes still reach the database through the writer; only a crash before
            // that commit would lose them.
            Err(e) => tracing::error!(journal = %self.path.display(), "cannot append to the state journal: {e}"),
        }
        self.clear_staged();
        if self.bytes >= SEGMENT_BYTES && self.sealed_through.is_none() {
            self.seal(self.next_seq - 1);
        }
    }

    fn clear_staged(&mut self) {
        // A burst's buffer is not kept: the usual one is a few hundred bytes.
        if self.staged.capacity() > STAGED_KEPT {
            self.staged = Vec::with_capacity(STAGED_KEPT);
        } else {
            self.staged.clear();
        }
    }

    /// The segment becomes the sealed one and a new one begins.
    fn seal(&mut self, through: u64) {
        let sealed = sealed_path(&self.path);
        let reopened = std::fs::rename(&self.path, &sealed).and_then(|()| crate::private_fs::open(&self.path, true));
        match reopened {
            Ok(file) => {
                self.file = file;
                self.bytes = 0;
                self.holds_changes = false;
                self.sealed_through = Some(through);
            }
            Err(e) => tracing::error!(journal = %self.path.display(), "cannot begin a new journal segment: {e}"),
        }
    }

    /// Lets go of what the database holds (through `committed`): the sealed segment once all
    /// of it is committed, the open one when everything is.
    pub fn truncate_through(&mut self, committed: u64) {
        if self.sealed_through.is_some_and(|last| committed >= last) {
            match std::fs::remove_file(sealed_path(&self.path)) {
                Ok(()) => self.sealed_through = None,
                Err(e) => {
                    tracing::error!(journal = %self.path.display(), "cannot remove a sealed journal segment: {e}")
                }
            }
        }
        if committed + 1 < self.next_seq {
            return;
        }
        // The database holds every change: what is staged need not be written either.
        self.clear_staged();
        if !self.holds_changes {
            return;
        }
        match self.file.set_len(0) {
            Ok(()) => {
                self.holds_changes = false;
                self.bytes = 0;
            }
            Err(e) => tracing::error!(journal = %self.path.display(), "cannot truncate the state journal: {e}"),
        }
    }

    /// Bytes on disk, both segments.
    #[cfg(test)]
    pub fn size(&self) -> u64 {
        let sealed = std::fs::metadata(sealed_path(&self.path)).map_or(0, |m| m.len());
        self.bytes + sealed
    }
}

fn sealed_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

fn read_entries(file: &File, path: &Path, into: &mut Vec<(u64, Change)>) -> std::io::Result<()> {
    for line in BufReader::new(file).split(b'\n') {
        let line = line?;
        match serde_json::from_slice::<Entry<Change>>(&line) {
            Ok(e) => into.push((e.seq, e.change)),
            Err(e) if !line.is_empty() => {
                tracing::warn!(journal = %path.display(), "skipping an unreadable journal line: {e}")
            }
            Err(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(i: usize) -> Change {
        Change::PruneLogs(i as u64)
    }

    #[test]
    fn a_journal_the_database_always_trails_stays_bounded_and_replays_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.journal");
        let (mut journal, _) = Journal::open(&path).unwrap();
        // The database always one change behind, as under sustained load: never empty.
        let mut largest = 0;
        for i in 0..1_000_000 {
            let seq = journal.append(&change(i));
            journal.truncate_through(seq - 1);
            if i % 1000 == 0 {
                largest = largest.max(journal.size());
            }
        }
        assert!(largest > SEGMENT_BYTES / 2, "the run wrote segments' worth: {largest}");
        assert!(largest < 2 * SEGMENT_BYTES + 4096, "the journal stays near two segments: {largest}");
        // What is not yet committed survives a restart, in order, across both segments.
        let sealed = journal.sealed_through;
        let through = journal.next_seq - 1;
        drop(journal);
        let (_, entries) = Journal::open(&path).unwrap();
        let seqs: Vec<u64> = entries.iter().map(|(seq, _)| *seq).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order");
        assert_eq!(seqs.last(), Some(&through));
        if let Some(sealed) = sealed {
            assert!(seqs.contains(&sealed), "the sealed segment is read back");
        }
    }

    #[test]
    fn a_sealed_segment_waits_for_the_database_to_commit_all_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.journal");
        let (mut journal, _) = Journal::open(&path).unwrap();
        let mut i = 0;
        while journal.sealed_through.is_none() {
            journal.append(&change(i));
            i += 1;
        }
        let sealed = journal.sealed_through.unwrap();
        journal.truncate_through(sealed - 1);
        assert!(sealed_path(&path).exists(), "one change of it is not committed yet");
        journal.truncate_through(sealed);
        assert!(!sealed_path(&path).exists(), "all of it is");
    }

    #[test]
    fn staged_lines_go_out_with_the_next_write_or_not_at_all_once_committed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.journal");
        let (mut journal, _) = Journal::open(&path).unwrap();
        let first = journal.stage(&change(1));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "staged is not written");
        let second = journal.append(&change(2));
        drop(journal);
        let (mut journal, entries) = Journal::open(&path).unwrap();
        let seqs: Vec<u64> = entries.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(seqs, [first, second], "both, in one write, in order");

        journal.truncate_through(second);
        let third = journal.stage(&change(3));
        journal.truncate_through(third);
        journal.write_staged();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "what the database holds is never written");
    }
}
