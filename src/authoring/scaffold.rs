//! `switchyard adapter new NAME --lang L` and `switchyard policy new NAME --lang L`: write a
//! buildable starting project from the templates carried in the binary, with the WIT beside
//! it, so it works without the repo. Adapter templates are in `templates/LANG`, policy ones in
//! `templates/policy-LANG`.

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

/// The WIT world every policy implements, as this binary speaks it.
const POLICY_WIT: &str = include_str!("../../wit/policy/policy.wit");

/// Which kind of plugin a project is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Adapter,
    Policy,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Adapter => "adapter",
            Kind::Policy => "policy",
        }
    }

    /// The template folder for `lang`.
    fn folder(self, lang: Language) -> String {
        match self {
            Kind::Adapter => lang.folder().to_string(),
            Kind::Policy => format!("policy-{}", lang.folder()),
        }
    }

    /// Where the WIT goes in the project, and what it is.
    fn wit(self) -> (&'static str, &'static str) {
        match self {
            Kind::Adapter => ("wit/adapter.wit", WIT),
            Kind::Policy => ("wit/policy.wit", POLICY_WIT),
        }
    }
}

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

/// Checks a plugin name: the gateway knows an adapter by its file name, and sources write it;
/// a policy's is its file's name.
fn valid_name_of(kind: Kind, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` cannot name {} {}: use lowercase letters, digits and `-`, starting with a letter (e.g. `acme-chat`)",
            if kind == Kind::Adapter { "an" } else { "a" },
            kind.noun()
        ))
    }
}

/// Writes the project for `name` in `lang` into `dir` (which must not exist or be empty);
/// returns the files written.
pub fn new_project(name: &str, lang: Language, dir: &Path) -> Result<Vec<PathBuf>, String> {
    new_project_of(Kind::Adapter, name, lang, dir)
}

/// Writes the `kind` project for `name` in `lang` into `dir` (which must not exist or be
/// empty); returns the files written.
pub fn new_project_of(kind: Kind, name: &str, lang: Language, dir: &Path) -> Result<Vec<PathBuf>, String> {
    valid_name_of(kind, name)?;
    if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(format!("{} already exists and is not empty: choose another --dir", dir.display()));
    }
    let prefix = format!("{}/", kind.folder(lang));
    let ident = name.replace('-', "_");
    let mut written = Vec::new();
    let mut files: Vec<_> = Templates::iter().filter(|f| f.starts_with(&prefix)).collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("this build carries no {} template for {}", lang.folder(), kind.noun()));
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
    let (wit_path, wit_text) = kind.wit();
    let wit = dir.join(wit_path);
    write(&wit, wit_text.as_bytes())?;
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
        assert!(valid_name_of(Kind::Adapter, "acme-chat2").is_ok());
        for bad in ["", "Acme", "2fast", "a_b", "a/b", "../x", &"x".repeat(65)] {
            assert!(valid_name_of(Kind::Adapter, bad).is_err(), "{bad:?}");
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

    #[test]
    fn a_policy_project_carries_the_policy_template_and_wit() {
        let dir = tempfile::tempdir().unwrap();
        for lang in [Language::Rust, Language::Js, Language::Python] {
            let project = dir.path().join(lang.folder());
            let files = new_project_of(Kind::Policy, "no-passwords", lang, &project).unwrap();
            assert!(files.iter().any(|f| f.ends_with("wit/policy.wit")), "{lang:?}");
            assert!(!files.iter().any(|f| f.ends_with("wit/adapter.wit")), "{lang:?}");
            assert!(files.iter().any(|f| f.starts_with(project.join("cases"))), "{lang:?}: a case");
            let wit = std::fs::read_to_string(project.join("wit/policy.wit")).unwrap();
            assert!(wit.contains("world policy-world"));
            let build = std::fs::read_to_string(project.join("build.sh")).unwrap();
            assert!(build.contains("no-passwords") && !build.contains("{{"), "{lang:?}: {build}");
        }
        let err = new_project_of(Kind::Policy, "Bad", Language::Rust, &dir.path().join("x")).unwrap_err();
        assert!(err.contains("cannot name a policy"), "{err}");
    }
}
