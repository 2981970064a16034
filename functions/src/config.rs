//! Typed configuration of the HTTP functions, read from the environment.

use std::time::Duration;

/// Settings shared by every entry point that serves [`crate::app`].
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest accepted request body; larger ones get 413 before any parsing.
    pub max_body_bytes: usize,
    /// How long the health check waits for the database.
    pub health_timeout: Duration,
}

/// Why configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(pub String);

impl ServerConfig {
    /// Default body limit: 1 MiB. Tool arguments are small and bounded (raw shell text is at
    /// most 16,000 bytes); anything larger is a mistake or an attack.
    pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

    /// Reads `WC_MAX_BODY_BYTES`; everything else has defaults.
    pub fn from_env() -> Result<Self, ConfigError> {
        let mut cfg = Self::default();
        if let Ok(v) = std::env::var("WC_MAX_BODY_BYTES") {
            cfg.max_body_bytes = v.parse().ok().filter(|n| *n >= 1024).ok_or_else(|| {
                ConfigError("WC_MAX_BODY_BYTES must be an integer >= 1024".into())
            })?;
        }
        Ok(cfg)
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            health_timeout: Duration::from_secs(3),
        }
    }
}
