//! Config errors as the operator sees them: file, line, field, what is wrong, and the fix.

use std::fmt;
use std::path::PathBuf;

/// One problem at one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// `sources[1].models[0].kind`; empty for the document itself.
    pub path: String,
    pub line: Option<usize>,
    pub message: String,
    pub fix: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}\n    fix: pass the right path with --config FILE, or start from config.example.yaml", file.display())]
    Read { file: PathBuf, source: std::io::Error },
    #[error("{}", Report { file, errors })]
    Invalid { file: PathBuf, errors: Vec<FieldError> },
}

struct Report<'a> {
    file: &'a PathBuf,
    errors: &'a [FieldError],
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        write!(f, "config file {} has {n} error{}:", self.file.display(), if n == 1 { "" } else { "s" })?;
        for e in self.errors {
            write!(f, "\n  {}:", self.file.display())?;
            if let Some(line) = e.line {
                write!(f, "{line}:")?;
            }
            if !e.path.is_empty() {
                write!(f, " {}:", e.path)?;
            }
            write!(f, " {}\n      fix: {}", e.message, e.fix)?;
        }
        Ok(())
    }
}
