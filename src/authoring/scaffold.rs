//! `switchyard adapter new NAME --lang L`: writes a buildable starting project from the
//! templates carried in the binary, with the WIT beside it, so it works without the repo.

use std::path::{Path, PathBuf};

use rust_embed::RustEmbed;

// Debug builds read the folder at run time; release builds carry it.
#[derive(RustEmbed)]
#[folder = "src/authoring/templates/"]
#[exclude = "*/node_modules/*"]
#[exclude = "*/.venv/*"]
#[exclude = "*/gen/*"]
#[exclude = "*/target/*"]
#[exclude = "*/bindings/*"]
#[exclude = "*/__pycache__/*"]
#[exclude = "*/.tools/*"]
#[exclude = "*.wasm"]
struct Templates;

/// The WIT world every adapter implements, as this binary speaks it.
const WIT: &str = include_str!("../../wit/adapter.wit");

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    Rust,
    Js,
    Python,
    C,
}

impl Language {
    fn folder(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Js => "js",
            Language::Python => "python",
            Language::C => "c",
        }
    }
}

/// Checks an adapter name: the gateway knows an adapter by its file name, and sources write it.
pub fn valid_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` cannot name an adapter: use lowercase letters, digits and `-`, starting with a letter (e.g. `acme-chat`)"
        ))
    }
}

/// Writes the project for `name` in `lang` into `dir` (which must not exist or be empty);
/// returns the files written.
pub fn new_project(name: &str, lang: Language, dir: &Path) -> Result<Vec<PathBuf>, String> {
    valid_name(name)?;
    if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(format!("{} already exists and is not empty: choose another --dir", dir.display()));
    }
    let prefix = format!("{}/", lang.folder());
    let ident = name.replace('-', "_");
    let mut written = Vec::new();
    let mut files: Vec<_> = Templates::iter().filter(|f| f.starts_with(&prefix)).collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("this build carries no {} template", lang.folder()));
    }
    for file in files {
        let relative = &file[prefix.len()..];
        let target = dir.join(relative.replace("{{name}}", name));
        let content = Templates::get(&file).expect("listed by iter").data;
        let content = match std::str::from_utf8(&content) {
            Ok(text) => text.replace("{{name}}", name).replace("{{ident}}", &ident).into_bytes(),
            Err(_) => content.into_owned(),
        };
        write(&target, &content)?;
        if relative.ends_with(".sh") {
            make_executable(&target)?;
        }
        written.push(target);
    }
    let wit = dir.join("wit/adapter.wit");
    write(&wit, WIT.as_bytes())?;
    written.push(wit);
    Ok(written)
}

fn write(path: &Path, content: &[u8]) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::write(path, content).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn make_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("cannot make {} executable: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_what_a_source_can_write() {
        assert!(valid_name("acme-chat2").is_ok());
        for bad in ["", "Acme", "2fast", "a_b", "a/b", "../x", &"x".repeat(65)] {
            assert!(valid_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_rust_project_is_written_with_its_name_and_the_wit() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("acme");
        let files = new_project("acme-chat", Language::Rust, &project).unwrap();
        assert!(files.iter().any(|f| f.ends_with("wit/adapter.wit")));
        let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("name = \"acme-chat\""), "{manifest}");
        assert!(!manifest.contains("{{"), "every placeholder is filled: {manifest}");
        assert!(new_project("acme-chat", Language::Rust, &project).unwrap_err().contains("not empty"));
    }
}
