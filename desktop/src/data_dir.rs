//! Where the app keeps its data: the platform's data directory for the app (Linux:
//! `$XDG_DATA_HOME/dev.switchyard.desktop`), mode 700, its files 600, and the working directory.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;
use tauri::{AppHandle, Manager};

/// The app's files, all under one private folder.
#[derive(Debug, Clone)]
pub struct Paths {
    pub root: PathBuf,
}

impl Paths {
    /// The gateway's config, read as the headless gateway reads `--config`.
    pub fn config(&self) -> PathBuf {
        self.root.join("config.yaml")
    }

    /// The webview's own storage (its cache; the WebUI's theme choice).
    pub fn webview(&self) -> PathBuf {
        self.root.join("webview")
    }

    /// The secret of the client key this app made through the admin API (the gateway keeps
    /// only its digest), for "Copy a client key".
    pub fn client_key(&self) -> PathBuf {
        self.root.join("client_key")
    }
}

/// Finds the platform's data directory for the app, makes it the owner's alone (700, whoever
/// made it) and the working directory: the config's relative paths (`data_dir: ./data`) land
/// inside it.
pub fn prepare(app: &AppHandle) -> anyhow::Result<Paths> {
    let root = app.path().app_data_dir().context("the platform has no data directory for apps")?;
    switchyard::private_fs::create_dir(&root).with_context(|| format!("cannot create {}", root.display()))?;
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot make {} private (mode 700)", root.display()))?;
    std::env::set_current_dir(&root).with_context(|| format!("cannot work in {}", root.display()))?;
    let paths = Paths { root };
    // Files an earlier run or an editor left readable by others.
    for file in [paths.config(), paths.client_key()] {
        switchyard::private_fs::restrict(&file).with_context(|| format!("cannot make {} private", file.display()))?;
    }
    Ok(paths)
}

/// Writes `bytes` to `path`, mode 600 (replacing what was there).
pub fn write_private(path: &Path, bytes: impl AsRef<[u8]>) -> anyhow::Result<()> {
    switchyard::private_fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// Writes `bytes` to `path`, mode 600, only if nothing is there yet.
pub fn create_private(path: &Path, bytes: impl AsRef<[u8]>) -> anyhow::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(bytes.as_ref()).with_context(|| format!("cannot write {}", path.display()))?;
    file.sync_all().with_context(|| format!("cannot write {}", path.display()))
}
