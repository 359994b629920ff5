//! Which web pages on other origins may call the HTTP API from a browser (CORS): none unless
//! the configuration names them (`server.cors_origins`), so a page elsewhere cannot read
//! answers with a user's token by default. The bearer token travels as a header, never as a
//! cookie, so the policy allows no credentials.

use anyhow::{bail, ensure};

/// The origins allowed to call the HTTP API from a browser.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CorsPolicy {
    /// Same-origin only: no CORS headers are sent.
    #[default]
    SameOrigin,
    /// Any origin (`*`).
    AnyOrigin,
    /// These origins exactly (`https://app.example.com`, `http://localhost:3000`).
    Origins(Vec<String>),
}

impl CorsPolicy {
    /// Reads `server.cors_origins`: full origins (scheme, host and port, no path), or `["*"]`.
    pub fn parse(origins: Option<&[String]>) -> anyhow::Result<Self> {
        let Some(origins) = origins.filter(|o| !o.is_empty()) else {
            return Ok(Self::SameOrigin);
        };
        if origins.iter().any(|o| o == "*") {
            ensure!(
                origins.len() == 1,
                "server.cors_origins: `*` allows every origin; list no other beside it"
            );
            return Ok(Self::AnyOrigin);
        }
        for origin in origins {
            let Some((scheme, rest)) = origin.split_once("://") else {
                bail!(
                    "server.cors_origins: `{origin}` is not an origin like https://app.example.com"
                );
            };
            ensure!(
                matches!(scheme, "http" | "https")
                    && !rest.is_empty()
                    && !rest.contains(['/', '?', '#', ' ']),
                "server.cors_origins: `{origin}` is not an origin like https://app.example.com \
                 (scheme, host and port only, no path)"
            );
        }
        Ok(Self::Origins(origins.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(origins: &[&str]) -> anyhow::Result<CorsPolicy> {
        let owned: Vec<String> = origins.iter().map(|s| (*s).to_owned()).collect();
        CorsPolicy::parse(Some(&owned))
    }

    #[test]
    fn origins_are_whole_origins_or_a_lone_star() {
        assert_eq!(CorsPolicy::parse(None).unwrap(), CorsPolicy::SameOrigin);
        assert_eq!(parse(&[]).unwrap(), CorsPolicy::SameOrigin);
        assert_eq!(parse(&["*"]).unwrap(), CorsPolicy::AnyOrigin);
        assert_eq!(
            parse(&["https://app.example.com", "http://localhost:3000"]).unwrap(),
            CorsPolicy::Origins(vec![
                "https://app.example.com".into(),
                "http://localhost:3000".into()
            ])
        );
        assert!(parse(&["*", "https://a.example"]).is_err());
        assert!(parse(&["app.example.com"]).is_err());
        assert!(parse(&["https://app.example.com/path"]).is_err());
        assert!(parse(&["ftp://app.example.com"]).is_err());
    }
}
