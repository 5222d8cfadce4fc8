//! The one place the gateway's outgoing HTTP clients are made, the CA roots they trust (the
//! system's, or the Mozilla roots built in), and bounded reading of what they answer.

use std::sync::OnceLock;

/// A client builder trusting the system's CA certificates, or the built-in Mozilla roots
/// when the system has none; every outgoing client (upstreams, telemetry, the bot, adapters'
/// `fetch`) starts from it.
#[expect(clippy::disallowed_methods, reason = "the one place a client builder is made")]
pub fn builder() -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder();
    match roots() {
        Roots::System => builder,
        Roots::BuiltIn => builder.tls_certs_only(
            webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().filter_map(|der| reqwest::Certificate::from_der(der).ok()),
        ),
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Roots {
    System,
    BuiltIn,
}

/// Looked up once: a client that trusts the system's roots fails to build when none load.
#[expect(clippy::disallowed_methods, reason = "trying the system's roots is what decides")]
fn roots() -> Roots {
    static ROOTS: OnceLock<Roots> = OnceLock::new();
    *ROOTS.get_or_init(|| match reqwest::Client::builder().build() {
        Ok(_) => Roots::System,
        Err(e) => {
            tracing::warn!(
                "no CA certificates could be loaded from the system ({e}); https upstreams are checked against \
                 the Mozilla roots built into switchyard (install the ca-certificates package, or set \
                 SSL_CERT_FILE, to use the system's)"
            );
            Roots::BuiltIn
        }
    })
}

/// A response body read whole, refused once it passes `max` bytes.
pub async fn read_bounded(response: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("reading the body failed: {e}"))? {
        if bytes.len() + chunk.len() > max {
            return Err(format!("the response is larger than {max} bytes"));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {

    #[test]
    #[expect(clippy::disallowed_methods, reason = "the built-in roots alone, whatever the system has")]
    fn the_built_in_roots_make_a_client() {
        let certs =
            webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().filter_map(|der| reqwest::Certificate::from_der(der).ok());
        let client = reqwest::Client::builder().tls_certs_only(certs).build();
        assert!(client.is_ok(), "{client:?}");
        assert!(webpki_root_certs::TLS_SERVER_ROOT_CERTS.len() > 100);
    }
}
