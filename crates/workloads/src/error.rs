//! The error every workload's configuration check returns.

use std::fmt;

/// A bad workload configuration (TPC-C, SmallBank, YCSB), or an unknown
/// YCSB preset; the message says which value and why.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}
