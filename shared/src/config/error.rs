//! Config errors: every problem names the key path it is about, so an operator can find it in a
//! long file, and they are collected rather than reported one at a time.

use std::fmt;

/// One problem in the config, e.g. `connections[2].max_concurrent: invalid type …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted key path with array indexes (`providers[0].timeouts.connect_ms`); empty for
    /// problems with the whole file (unreadable, not TOML).
    pub path: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Every problem found in a config. Displays one problem per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    pub errors: Vec<ConfigError>,
}

impl ConfigErrors {
    pub fn single(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            errors: vec![ConfigError::new(path, message)],
        }
    }

    /// Whether any error is about exactly `path` (handy in tests and for UIs).
    pub fn has_path(&self, path: &str) -> bool {
        self.errors.iter().any(|error| error.path == path)
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, error) in self.errors.iter().enumerate() {
            if index > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Collects errors during validation.
#[derive(Debug, Default)]
pub(crate) struct Collector {
    pub errors: Vec<ConfigError>,
}

impl Collector {
    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ConfigError::new(path, message));
    }

    pub fn finish(self) -> Result<(), ConfigErrors> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors {
                errors: self.errors,
            })
        }
    }
}

/// `line L, column C` (1-based) of a byte offset, for parse errors.
pub(crate) fn location(source: &str, offset: usize) -> String {
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(1, |tail| tail.chars().count() + 1);
    format!("line {line}, column {column}")
}
