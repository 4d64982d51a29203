//! softpart-nri's config file (default /etc/softpart/nri.toml):
//!
//! ```toml
//! # Namespaces whose pods may have homes from their annotations; "*" for
//! # every namespace. None (the default): annotations are logged and ignored.
//! namespaces = ["db", "batch"]
//! # The plugin's index: containerd calls plugins in ascending order. Keep
//! # it above the index of any resource-policy plugin that sets cpusets, so
//! # that the plugin sees the cpuset it chose.
//! index = "90"
//! ```

use crate::wanted::Allowed;
use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::path::Path;

pub const DEFAULT_PATH: &str = "/etc/softpart/nri.toml";
pub const DEFAULT_INDEX: &str = "90";

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    namespaces: Vec<String>,
    index: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub allowed: Allowed,
    pub index: String,
}

impl Config {
    pub fn parse(text: &str) -> Result<Config> {
        let f: File = toml::from_str(text)?;
        let allowed = if f.namespaces.iter().any(|n| n == "*") {
            if f.namespaces.len() > 1 {
                bail!("field namespaces: \"*\" (every namespace) together with names");
            }
            Allowed::All
        } else {
            for n in &f.namespaces {
                let ok = !n.is_empty()
                    && n.len() <= 63
                    && n.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
                if !ok {
                    bail!("field namespaces: {n:?} is not a Kubernetes namespace name");
                }
            }
            Allowed::Only(f.namespaces.into_iter().collect())
        };
        let index = f.index.unwrap_or_else(|| DEFAULT_INDEX.to_string());
        if index.len() != 2 || !index.bytes().all(|b| b.is_ascii_digit()) {
            bail!("field index: {index:?} is not two digits (00 to 99)");
        }
        Ok(Config { allowed, index })
    }

    /// The file at `path`; a missing file at the default path is the
    /// defaults (no namespace allowed).
    pub fn load(path: &Path, given: bool) -> Result<Config> {
        match std::fs::read_to_string(path) {
            Ok(text) => Config::parse(&text).with_context(|| format!("{}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !given => Config::parse(""),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_allow_no_namespace_and_run_at_index_90() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.allowed, Allowed::Only(Default::default()));
        assert_eq!(c.index, "90");
        assert!(!c.allowed.allows("default"));
    }

    #[test]
    fn namespaces_are_named_or_all() {
        let c = Config::parse("namespaces = [\"db\", \"batch-2\"]\nindex = \"95\"").unwrap();
        assert!(c.allowed.allows("db") && !c.allowed.allows("web"));
        assert_eq!(c.index, "95");
        assert_eq!(
            Config::parse("namespaces = [\"*\"]").unwrap().allowed,
            Allowed::All
        );
    }

    #[test]
    fn errors_name_the_field_and_the_value() {
        for (text, want) in [
            ("namespaces = [\"*\", \"db\"]", "field namespaces"),
            ("namespaces = [\"Db\"]", "\"Db\""),
            ("index = \"9\"", "field index: \"9\""),
            ("nmaespaces = []", "nmaespaces"),
        ] {
            let e = format!("{:#}", Config::parse(text).unwrap_err());
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
