//! Single sign-on's checks, without I/O: an ID token verified against the provider's keys
//! (signature, issuer, audience, expiry on our clock, nonce), the role its claims map to, and
//! the PKCE challenge of a verifier.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::{RoleRule, SsoConfig};
use crate::domain::Role;

/// Clock difference tolerated between us and the provider, in seconds.
const LEEWAY_SECONDS: i64 = 60;
/// Algorithms an ID token may be signed with: asymmetric only (never `none`, never a shared
/// secret an attacker could guess from the client secret).
const ALLOWED: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];
/// Longest ID token read.
pub const MAX_ID_TOKEN_BYTES: usize = 64 << 10;

/// Why a sign-in was refused; the message is what the person sees on the login page.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SsoError {
    #[error("the ID token is not a signed JWT the gateway can read")]
    Malformed,
    #[error("the ID token is signed with {0:?}, which the gateway does not accept")]
    Algorithm(String),
    #[error("the ID token names a signing key the provider does not publish")]
    UnknownKey,
    #[error("the ID token's signature does not verify with the provider's key")]
    Signature,
    #[error("the ID token's issuer is not the configured issuer")]
    Issuer,
    #[error("the ID token's audience is not this gateway's client_id")]
    Audience,
    #[error("the ID token has expired")]
    Expired,
    #[error("the ID token was issued in the future")]
    NotYetValid,
    #[error("the ID token's nonce is not the one this sign-in sent")]
    Nonce,
    #[error("no role for {0}: the configured access.sso.roles match none of its groups or email")]
    NoRole(String),
}

/// The claims the gateway reads from an ID token.
#[derive(Debug, Clone, PartialEq)]
pub struct Person {
    /// What the trail and the WebUI call them: email, else preferred_username, else sub.
    pub name: String,
    pub email: Option<String>,
    pub groups: Vec<String>,
}

#[derive(Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    aud: Value,
    exp: i64,
    iat: i64,
    nonce: Option<String>,
    azp: Option<String>,
    email: Option<String>,
    #[serde(default)]
    email_verified: Option<bool>,
    preferred_username: Option<String>,
    #[serde(flatten)]
    rest: serde_json::Map<String, Value>,
}

/// What a sign-in expects of its ID token.
pub struct Expected<'a> {
    pub issuer: &'a str,
    pub client_id: &'a str,
    pub nonce: &'a str,
    pub groups_claim: &'a str,
    pub now_seconds: i64,
}

/// Verifies `token` with `keys` and returns the person it names.
pub fn verify_id_token(token: &str, keys: &JwkSet, expected: &Expected<'_>) -> Result<Person, SsoError> {
    if token.len() > MAX_ID_TOKEN_BYTES {
        return Err(SsoError::Malformed);
    }
    let header = jsonwebtoken::decode_header(token).map_err(|_| SsoError::Malformed)?;
    if !ALLOWED.contains(&header.alg) {
        return Err(SsoError::Algorithm(format!("{:?}", header.alg)));
    }
    let jwk = match &header.kid {
        Some(kid) => keys.find(kid),
        // Without a kid, only a provider with a single key is unambiguous.
        None if keys.keys.len() == 1 => keys.keys.first(),
        None => None,
    }
    .ok_or(SsoError::UnknownKey)?;
    let key = DecodingKey::from_jwk(jwk).map_err(|_| SsoError::UnknownKey)?;
    let mut validation = Validation::new(header.alg);
    validation.set_required_spec_claims(&["iss", "aud", "exp", "sub"]);
    // Expiry is checked below on the gateway's clock; issuer and audience there too, so each
    // failure says what it is.
    validation.validate_exp = false;
    validation.validate_aud = false;
    let data = jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(|e| match e.kind() {
        jsonwebtoken::errors::ErrorKind::InvalidSignature => SsoError::Signature,
        jsonwebtoken::errors::ErrorKind::InvalidAlgorithm => SsoError::Signature,
        _ => SsoError::Malformed,
    })?;
    let claims = data.claims;
    if claims.iss != expected.issuer {
        return Err(SsoError::Issuer);
    }
    let audiences: Vec<&str> = match &claims.aud {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !audiences.contains(&expected.client_id) {
        return Err(SsoError::Audience);
    }
    // With other audiences beside us, the token must have been issued to us.
    if audiences.len() > 1 && claims.azp.as_deref() != Some(expected.client_id) {
        return Err(SsoError::Audience);
    }
    if expected.now_seconds >= claims.exp.saturating_add(LEEWAY_SECONDS) {
        return Err(SsoError::Expired);
    }
    if claims.iat > expected.now_seconds.saturating_add(LEEWAY_SECONDS) {
        return Err(SsoError::NotYetValid);
    }
    let nonce_matches = claims
        .nonce
        .as_deref()
        .is_some_and(|n| Sha256::digest(n.as_bytes()) == Sha256::digest(expected.nonce.as_bytes()));
    if !nonce_matches {
        return Err(SsoError::Nonce);
    }
    let groups = match claims.rest.get(expected.groups_claim) {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).take(1000).map(str::to_string).collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    };
    // An email the provider has not verified does not name anyone.
    let email = claims.email.filter(|_| claims.email_verified != Some(false));
    let name = email.clone().or(claims.preferred_username).unwrap_or(claims.sub);
    Ok(Person { name, email, groups })
}

/// The highest role any rule gives `person`, or the configured default.
pub fn role_for(person: &Person, sso: &SsoConfig) -> Result<Role, SsoError> {
    let matches = |rule: &RoleRule| {
        rule.group.as_ref().is_some_and(|g| person.groups.contains(g))
            || rule.email.as_ref().is_some_and(|e| person.email.as_ref().is_some_and(|m| m.eq_ignore_ascii_case(e)))
    };
    sso.roles
        .iter()
        .filter(|rule| matches(rule))
        .map(|rule| rule.role)
        .max()
        .or(sso.default_role)
        .ok_or_else(|| SsoError::NoRole(person.name.clone()))
}

/// PKCE's S256 challenge of `verifier`.
pub fn pkce_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sso(rules: &[(&str, &str, Role)], default_role: Option<Role>) -> SsoConfig {
        let roles = rules
            .iter()
            .map(|(kind, value, role)| RoleRule {
                group: (*kind == "group").then(|| value.to_string()),
                email: (*kind == "email").then(|| value.to_string()),
                role: *role,
            })
            .collect();
        SsoConfig {
            issuer: "https://idp.example.com".into(),
            client_id: "switchyard".into(),
            client_secret: None,
            redirect_url: None,
            scopes: vec!["openid".into()],
            groups_claim: "groups".into(),
            roles,
            default_role,
            session_minutes: crate::config::InRange::new(60),
        }
    }

    fn person(email: &str, groups: &[&str]) -> Person {
        Person { name: email.into(), email: Some(email.into()), groups: groups.iter().map(|g| g.to_string()).collect() }
    }

    #[test]
    fn the_highest_matching_role_wins_and_nobody_unmatched_gets_in() {
        let config = sso(
            &[
                ("group", "ops", Role::Operator),
                ("group", "admins", Role::Admin),
                ("email", "Ann@Example.com", Role::Viewer),
            ],
            None,
        );
        assert_eq!(role_for(&person("x@e", &["ops", "admins"]), &config), Ok(Role::Admin));
        assert_eq!(role_for(&person("ann@example.com", &[]), &config), Ok(Role::Viewer));
        assert_eq!(role_for(&person("x@e", &["ops"]), &config), Ok(Role::Operator));
        assert!(matches!(role_for(&person("eve@e", &["guests"]), &config), Err(SsoError::NoRole(n)) if n == "eve@e"));
        let open = sso(&[], Some(Role::Viewer));
        assert_eq!(role_for(&person("eve@e", &[]), &open), Ok(Role::Viewer));
    }

    #[test]
    fn the_pkce_challenge_is_rfc_7636s_example() {
        // RFC 7636, appendix B.
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn what_is_not_a_signed_jwt_is_refused_before_any_key_is_looked_at() {
        let keys = JwkSet { keys: vec![] };
        let expected =
            Expected { issuer: "https://idp", client_id: "c", nonce: "n", groups_claim: "groups", now_seconds: 0 };
        assert_eq!(verify_id_token("not.a.jwt", &keys, &expected), Err(SsoError::Malformed));
        // alg none, and a shared-secret algorithm: never accepted.
        let none = format!("{}.e30.", URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#));
        assert!(matches!(verify_id_token(&none, &keys, &expected), Err(SsoError::Malformed | SsoError::Algorithm(_))));
        let hs = format!("{}.e30.c2ln", URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","kid":"k"}"#));
        assert_eq!(verify_id_token(&hs, &keys, &expected), Err(SsoError::Algorithm("HS256".into())));
        let rs = format!("{}.e30.c2ln", URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","kid":"k"}"#));
        assert_eq!(verify_id_token(&rs, &keys, &expected), Err(SsoError::UnknownKey));
        let huge = "a".repeat(MAX_ID_TOKEN_BYTES + 1);
        assert_eq!(verify_id_token(&huge, &keys, &expected), Err(SsoError::Malformed));
    }
}
