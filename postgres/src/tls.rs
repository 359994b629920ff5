//! TLS to PostgreSQL with rustls, in libpq's terms, so that a connection string copied from a
//! managed service's console means what it says there:
//! - `sslmode=disable`: plain TCP;
//! - `allow`/`prefer` (the default): TLS when the server offers it, the certificate not checked;
//! - `require`: TLS or nothing, the certificate not checked (checked as `verify-ca` when
//!   `sslrootcert` names a file, as libpq does);
//! - `verify-ca`: the chain must lead to a trusted root;
//! - `verify-full`: that, and the certificate must name the host connected to.
//!
//! Trusted roots are the PEM certificates of `sslrootcert` when given (a managed service's CA
//! bundle), else Mozilla's (webpki-roots, compiled in, so a container without a CA store works).
//! tokio-postgres itself knows only `disable`, `prefer` and `require` and no `sslrootcert`: both
//! options are taken out of the string here, and the connector does the rest. Client
//! certificates are not supported.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::PgError;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<Self, PgError> {
        Ok(match value {
            "disable" => Self::Disable,
            "allow" => Self::Allow,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            _ => return Err(PgError::BadUrl),
        })
    }

    /// libpq's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Allow => "allow",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    /// What tokio-postgres is told: whether to try TLS, and whether it must succeed.
    fn driver(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Allow | Self::Prefer => "prefer",
            Self::Require | Self::VerifyCa | Self::VerifyFull => "require",
        }
    }
}

/// A connection string's TLS options, and the string without the ones tokio-postgres refuses.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    pub mode: SslMode,
    pub root_cert: Option<PathBuf>,
    /// The connection string for tokio-postgres.
    pub driver_url: String,
}

/// Splits `sslmode` and `sslrootcert` out of a URL (`postgresql://…?sslmode=…`) or a key/value
/// string (`host=… sslmode=…`). Values are not echoed in errors: the string may hold a password.
pub fn tls_settings(url: &str) -> Result<TlsSettings, PgError> {
    let mut mode = SslMode::Prefer;
    let mut root_cert = None;
    let mut take = |key: &str, value: &str| -> Result<bool, PgError> {
        match key {
            "sslmode" => mode = SslMode::parse(value)?,
            "sslrootcert" => root_cert = Some(PathBuf::from(value)),
            _ => return Ok(false),
        }
        Ok(true)
    };
    let mut kept = Vec::new();
    let driver_base = if let Some((base, query)) = url
        .split_once('?')
        .filter(|_| url.starts_with("postgres://") || url.starts_with("postgresql://"))
    {
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if !take(key, value)? {
                kept.push(pair.to_owned());
            }
        }
        base.to_owned()
    } else if url.contains("://") {
        url.to_owned()
    } else {
        // Key/value: unquoted `key=value` words; a quoted value is left to tokio-postgres.
        let mut words = Vec::new();
        for word in url.split_whitespace() {
            match word.split_once('=') {
                Some((key, value)) if !value.starts_with('\'') && take(key, value)? => {}
                _ => words.push(word.to_owned()),
            }
        }
        words.push(format!("sslmode={}", mode.driver()));
        return Ok(TlsSettings {
            mode,
            root_cert,
            driver_url: words.join(" "),
        });
    };
    kept.push(format!("sslmode={}", mode.driver()));
    Ok(TlsSettings {
        mode,
        root_cert,
        driver_url: format!("{driver_base}?{}", kept.join("&")),
    })
}

/// The rustls connector for a connection string's settings.
pub fn connector(settings: &TlsSettings) -> Result<MakeRustlsConnect, PgError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = Arc::new(root_store(settings.root_cert.as_deref())?);
    let verify_chain = match settings.mode {
        SslMode::VerifyCa | SslMode::VerifyFull => true,
        SslMode::Require => settings.root_cert.is_some(),
        SslMode::Disable | SslMode::Allow | SslMode::Prefer => false,
    };
    let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| PgError::Connect {
            message: format!("the TLS roots: {e}"),
        })?;
    let verifier: Arc<dyn ServerCertVerifier> = match (settings.mode, verify_chain) {
        (SslMode::VerifyFull, _) => webpki,
        (_, true) => Arc::new(ChainOnly(webpki)),
        (_, false) => Arc::new(Unchecked(provider.clone())),
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| PgError::Connect {
            message: format!("TLS: {e}"),
        })?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

fn root_store(root_cert: Option<&Path>) -> Result<RootCertStore, PgError> {
    let mut roots = RootCertStore::empty();
    let Some(path) = root_cert else {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        return Ok(roots);
    };
    let unreadable = |why: String| PgError::Connect {
        message: format!("sslrootcert {}: {why}", path.display()),
    };
    let certs = CertificateDer::pem_file_iter(path).map_err(|e| unreadable(e.to_string()))?;
    for cert in certs {
        let cert = cert.map_err(|e| unreadable(e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| unreadable(format!("not a CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(unreadable("no certificate in it".into()));
    }
    Ok(roots)
}

/// `verify-ca`: the chain is checked; the name in the certificate is not.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer` and `require` without a root: encrypted, the certificate taken as it comes (the
/// handshake's signatures are still checked, so the session is with the certificate's key).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpq_tls_options_are_taken_out_of_urls() {
        let s = tls_settings(
            "postgresql://u:p@db.example:5432/app?sslmode=verify-full&sslrootcert=/ca.pem&connect_timeout=3",
        )
        .expect("parses");
        assert_eq!(s.mode, SslMode::VerifyFull);
        assert_eq!(s.root_cert.as_deref(), Some(Path::new("/ca.pem")));
        assert_eq!(
            s.driver_url,
            "postgresql://u:p@db.example:5432/app?connect_timeout=3&sslmode=require"
        );
        let plain = tls_settings("postgresql://u@h/app").expect("parses");
        assert_eq!(plain.mode, SslMode::Prefer);
        assert_eq!(plain.driver_url, "postgresql://u@h/app?sslmode=prefer");
    }

    #[test]
    fn libpq_tls_options_are_taken_out_of_key_value_strings() {
        let s = tls_settings("host=h user=u sslmode=verify-ca sslrootcert=/ca.pem dbname=app")
            .expect("parses");
        assert_eq!(s.mode, SslMode::VerifyCa);
        assert_eq!(s.driver_url, "host=h user=u dbname=app sslmode=require");
        assert!(matches!(
            tls_settings("host=h sslmode=sometimes"),
            Err(PgError::BadUrl)
        ));
    }

    #[test]
    fn a_root_file_without_certificates_is_refused_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("empty.pem");
        std::fs::write(&path, "not a certificate\n").expect("write");
        let err = root_store(Some(&path)).expect_err("no certificate");
        assert!(err.to_string().contains("empty.pem"), "{err}");
    }
}
