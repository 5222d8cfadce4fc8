//! The OpenID provider as the gateway talks to it: its metadata (discovery) and signing keys,
//! fetched when first needed and kept for an hour (keys again at once when a token names one
//! not yet seen), and the authorization code exchanged for an ID token.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use serde::Deserialize;

use crate::config::SsoConfig;

/// Largest discovery document, key set or token answer read.
const MAX_ANSWER_BYTES: usize = 1 << 20;
/// Each call to the provider.
const TIMEOUT: Duration = Duration::from_secs(10);
/// How long metadata and keys are trusted before they are read again.
const KEEP: Duration = Duration::from_secs(3600);
/// Keys are read again for an unknown key id at most this often.
const KEY_REFRESH: Duration = Duration::from_secs(30);

/// What discovery says (the fields the gateway uses).
#[derive(Debug, Clone, Deserialize)]
pub struct Metadata {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_uri: String,
    #[serde(default)]
    pub code_challenge_methods_supported: Vec<String>,
}

struct Known {
    metadata: Arc<Metadata>,
    keys: Arc<JwkSet>,
    read: Instant,
    keys_read: Instant,
}

pub struct Provider {
    pub config: SsoConfig,
    http: reqwest::Client,
    known: Mutex<Option<Known>>,
}

impl Provider {
    pub fn new(config: SsoConfig) -> anyhow::Result<Provider> {
        // No redirects: an answer that moves elsewhere is an error, not a new address to trust.
        let http =
            crate::http_client::builder().timeout(TIMEOUT).redirect(reqwest::redirect::Policy::none()).build()?;
        Ok(Provider { config, http, known: Mutex::new(None) })
    }

    /// Metadata and keys, read now if never read or older than [`KEEP`], or the keys alone
    /// when `fresh_keys` (a token named a key not in them) and they were not just read.
    pub async fn known(&self, fresh_keys: bool) -> Result<(Arc<Metadata>, Arc<JwkSet>), String> {
        let cached = {
            let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
            known.as_ref().map(|k| (k.metadata.clone(), k.keys.clone(), k.read.elapsed(), k.keys_read.elapsed()))
        };
        match cached {
            Some((metadata, keys, age, keys_age)) if age < KEEP && !(fresh_keys && keys_age > KEY_REFRESH) => {
                Ok((metadata, keys))
            }
            Some((metadata, _, age, _)) if age < KEEP => {
                let keys = Arc::new(self.read_keys(&metadata).await?);
                if let Some(known) = self.known.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                    known.keys = keys.clone();
                    known.keys_read = Instant::now();
                }
                Ok((metadata, keys))
            }
            _ => {
                let metadata = Arc::new(self.discover().await?);
                let keys = Arc::new(self.read_keys(&metadata).await?);
                let now = Instant::now();
                *self.known.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(Known { metadata: metadata.clone(), keys: keys.clone(), read: now, keys_read: now });
                Ok((metadata, keys))
            }
        }
    }

    async fn discover(&self) -> Result<Metadata, String> {
        let url = format!("{}/.well-known/openid-configuration", self.config.issuer.trim_end_matches('/'));
        let metadata: Metadata = self.get_json(&url).await?;
        // The issuer a provider says must be the one configured, byte for byte (OIDC Discovery 4.3).
        if metadata.issuer != self.config.issuer {
            return Err(format!(
                "the provider calls itself `{}`, not the configured issuer `{}`",
                metadata.issuer, self.config.issuer
            ));
        }
        if !metadata.code_challenge_methods_supported.is_empty()
            && !metadata.code_challenge_methods_supported.iter().any(|m| m == "S256")
        {
            return Err("the provider does not support PKCE with S256".into());
        }
        Ok(metadata)
    }

    async fn read_keys(&self, metadata: &Metadata) -> Result<JwkSet, String> {
        self.get_json(&metadata.jwks_uri).await
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, String> {
        let mut response = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("{url}: {}", e.without_url()))?;
        let status = response.status();
        let bytes = crate::http_client::read_bounded(&mut response, MAX_ANSWER_BYTES).await?;
        if !status.is_success() {
            return Err(format!("{url} answered {status}"));
        }
        serde_json::from_slice(&bytes).map_err(|e| format!("{url}: not the JSON expected: {e}"))
    }

    /// The ID token the provider gives for `code` (with the PKCE verifier the sign-in kept).
    pub async fn exchange(
        &self,
        metadata: &Metadata,
        code: &str,
        redirect_uri: &str,
        verifier: &str,
    ) -> Result<String, String> {
        #[derive(Deserialize)]
        struct Tokens {
            id_token: Option<String>,
            error: Option<String>,
        }
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", verifier),
        ];
        let mut request = self.http.post(&metadata.token_endpoint);
        // A confidential client authenticates with HTTP Basic (which every provider must take,
        // RFC 6749 2.3.1, each part form-encoded); a public one names itself in the body.
        match &self.config.client_secret {
            Some(secret) => {
                let encode = |s: &str| serde_urlencoded::to_string([("", s)]).unwrap_or_default()[1..].to_string();
                request = request.basic_auth(encode(&self.config.client_id), Some(encode(secret.expose())));
            }
            None => form.push(("client_id", self.config.client_id.as_str())),
        }
        let body = serde_urlencoded::to_string(&form).map_err(|e| e.to_string())?;
        let mut response = request
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| format!("the token endpoint: {}", e.without_url()))?;
        let status = response.status();
        let bytes = crate::http_client::read_bounded(&mut response, MAX_ANSWER_BYTES).await?;
        let tokens: Tokens = serde_json::from_slice(&bytes)
            .map_err(|_| format!("the token endpoint answered {status} with something other than JSON"))?;
        match tokens {
            Tokens { id_token: Some(token), .. } if status.is_success() => Ok(token),
            Tokens { error: Some(error), .. } => {
                Err(format!("the token endpoint refused the code: {}", crate::logsafe::Escaped(&error)))
            }
            _ => Err(format!("the token endpoint answered {status} without an ID token")),
        }
    }
}
