//! Files that hold secrets (the runtime file with upstream keys, the state database and its
//! journal, uploaded adapters) belong to the gateway's user alone: directories 700, files 600.

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

const DIR_MODE: u32 = 0o700;
const FILE_MODE: u32 = 0o600;

/// Creates `dir` (and its parents) and makes it the owner's alone, also when it existed.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, Permissions::from_mode(DIR_MODE))
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
    fn files_and_directories_are_the_owners_alone_even_when_they_existed_open() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, Permissions::from_mode(0o755)).unwrap();
        create_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        let file = dir.join("runtime.yaml");
        std::fs::write(&file, "old").unwrap();
        std::fs::set_permissions(&file, Permissions::from_mode(0o644)).unwrap();
        write(&file, "new").unwrap();
        assert_eq!((mode(&file), std::fs::read_to_string(&file).unwrap().as_str()), (0o600, "new"));
        restrict(&dir.join("missing")).unwrap();
    }
}
