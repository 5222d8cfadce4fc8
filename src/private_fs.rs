//! Files that hold secrets (the runtime file with upstream keys, the state database and its
//! journal, uploaded adapters) belong to the gateway's user alone: directories 700, files 600.

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

const DIR_MODE: u32 = 0o700;
const FILE_MODE: u32 = 0o600;

/// Creates `dir` (and its parents) as the owner's alone. An existing directory keeps the mode
/// its operator gave it (it may be shared on purpose); one others can read is warned about.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        let mode = std::fs::metadata(dir)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                dir = %dir.display(),
                "the directory is open to other users (mode {mode:o}); the files in it are 600, but `chmod 700` it to hide their names too"
            );
        }
        return Ok(());
    }
    std::fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
}

/// The owner of `dir` when the process runs as root and `dir` belongs to someone else: files
/// root made there (the state database, the admin token) would lock that user out.
pub fn root_in_someone_elses(dir: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let owner = std::fs::metadata(dir).ok()?.uid();
    (euid == 0 && owner != 0).then_some(owner)
}

/// Opens `path` for writing with mode 600 (truncating it, or appending with `append`); an
/// existing file is brought to 600 too.
pub fn open(path: &Path, append: bool) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).mode(FILE_MODE);
    if append {
        options.read(true).append(true);
    } else {
        options.write(true).truncate(true);
    }
    let file = options.open(path)?;
    file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    Ok(file)
}

/// Writes `bytes` to `path` as a file of mode 600.
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    io::Write::write_all(&mut open(path, false)?, bytes.as_ref())
}

/// Brings an existing file to mode 600 (one an older version wrote 644); missing is fine.
pub fn restrict(path: &Path) -> io::Result<()> {
    match std::fs::set_permissions(path, Permissions::from_mode(FILE_MODE)) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn new_directories_and_every_file_written_are_the_owners_alone() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data/nested");
        create_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        std::fs::set_permissions(&dir, Permissions::from_mode(0o750)).unwrap();
        create_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o750, "an operator's choice for an existing directory stays");
        let file = dir.join("runtime.yaml");
        std::fs::write(&file, "old").unwrap();
        std::fs::set_permissions(&file, Permissions::from_mode(0o644)).unwrap();
        write(&file, "new").unwrap();
        assert_eq!((mode(&file), std::fs::read_to_string(&file).unwrap().as_str()), (0o600, "new"));
        restrict(&dir.join("missing")).unwrap();
    }
}
