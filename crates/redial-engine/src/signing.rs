//! Signed deliveries, as the Standard Webhooks specification defines them
//! (<https://www.standardwebhooks.com>): each request to an endpoint or queue configured with
//! signing secrets carries `webhook-id` (the job's idempotency key: the same on every attempt),
//! `webhook-timestamp` (Unix seconds, when the attempt is sent) and `webhook-signature`
//! (`v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`, one per secret, space-separated,
//! so that a receiver holding either secret verifies during a rotation). Off unless configured.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::collections::BTreeMap;

/// A signing secret, written `whsec_` and its base64 bytes (24 to 64 of them). Never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret(Vec<u8>);

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningSecret(redacted)")
    }
}

impl SigningSecret {
    pub fn parse(s: &str) -> Result<SigningSecret, String> {
        let b64 = s.strip_prefix("whsec_").ok_or_else(|| {
            "a signing secret is written whsec_ followed by its base64 bytes".to_owned()
        })?;
        let bytes = STANDARD
            .decode(b64)
            .map_err(|e| format!("the part after whsec_ is not base64: {e}"))?;
        if !(24..=64).contains(&bytes.len()) {
            return Err(format!(
                "a signing secret holds 24 to 64 bytes, this one {} (make one with `openssl rand -base64 32`)",
                bytes.len()
            ));
        }
        Ok(SigningSecret(bytes))
    }

    fn mac(&self, id: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
        // Any key length is accepted by HMAC.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }
}

/// The value of `webhook-signature` for a message: `v1,<base64>` per secret, space-separated.
pub fn signature(secrets: &[SigningSecret], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .map(|s| {
            format!(
                "v1,{}",
                STANDARD.encode(s.mac(id, timestamp, body).finalize().into_bytes())
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Why a delivery does not verify.
#[derive(Debug, PartialEq, Eq)]
pub enum VerifyError {
    /// Its timestamp is further than the tolerance from now (a replayed or delayed message).
    Stale,
    /// No signature in the header matches any secret.
    NoMatch,
    /// A header is missing or malformed.
    Malformed(&'static str),
}

/// Checks a delivery as a receiver does: the timestamp within `tolerance_secs` of `now_secs`,
/// and one of the `v1,` signatures matching one of the secrets (compared in constant time).
pub fn verify(
    secrets: &[SigningSecret],
    id: &str,
    timestamp: &str,
    signatures: &str,
    body: &[u8],
    now_secs: i64,
    tolerance_secs: i64,
) -> Result<(), VerifyError> {
    let ts: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| VerifyError::Malformed("webhook-timestamp is not a number of seconds"))?;
    if (now_secs - ts).abs() > tolerance_secs {
        return Err(VerifyError::Stale);
    }
    for given in signatures.split_whitespace() {
        let Some(b64) = given.strip_prefix("v1,") else {
            continue;
        };
        let Ok(given) = STANDARD.decode(b64) else {
            continue;
        };
        for s in secrets {
            // verify_slice compares in constant time.
            if s.mac(id, ts, body).verify_slice(&given).is_ok() {
                return Ok(());
            }
        }
    }
    Err(VerifyError::NoMatch)
}

/// Which deliveries are signed, and with what: by endpoint (a URL origin), else by queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Signing {
    pub by_endpoint: BTreeMap<String, Vec<SigningSecret>>,
    pub by_queue: BTreeMap<String, Vec<SigningSecret>>,
}

impl Signing {
    /// The secrets for a job of `queue` sent to `endpoint`, if it is signed.
    pub fn secrets(&self, queue: &str, endpoint: &str) -> Option<&[SigningSecret]> {
        self.by_endpoint
            .get(endpoint)
            .or_else(|| self.by_queue.get(queue))
            .map(Vec::as_slice)
            .filter(|s| !s.is_empty())
    }

    pub fn is_empty(&self) -> bool {
        self.by_endpoint.is_empty() && self.by_queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification and its reference libraries.
    #[test]
    fn signs_the_specifications_example() {
        let secret =
            SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("secret");
        let sig = signature(
            std::slice::from_ref(&secret),
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        let ok = |ts: &str, sigs: &str, now: i64| {
            verify(
                std::slice::from_ref(&secret),
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                ts,
                sigs,
                br#"{"test": 2432232314}"#,
                now,
                300,
            )
        };
        assert_eq!(ok("1614265330", &sig, 1614265330), Ok(()));
        // Rotation: another secret's signature first, ours second.
        assert_eq!(
            ok("1614265330", &format!("v1,AAAA {sig}"), 1614265330),
            Ok(())
        );
        assert_eq!(
            ok("1614265330", &sig, 1614265330 + 301),
            Err(VerifyError::Stale)
        );
        assert_eq!(
            ok("1614265331", &sig, 1614265330),
            Err(VerifyError::NoMatch)
        );
        assert_eq!(
            ok("soon", &sig, 1614265330),
            Err(VerifyError::Malformed(
                "webhook-timestamp is not a number of seconds"
            ))
        );
    }

    #[test]
    fn secrets_are_whsec_base64_of_24_to_64_bytes_and_never_shown() {
        assert!(SigningSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_err());
        assert!(SigningSecret::parse("whsec_not base64!").is_err());
        assert!(SigningSecret::parse("whsec_c2hvcnQ=").is_err());
        let s = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("secret");
        assert_eq!(format!("{s:?}"), "SigningSecret(redacted)");
    }

    #[test]
    fn an_endpoints_secrets_come_before_its_queues() {
        let a = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("a");
        let b = SigningSecret::parse(&format!("whsec_{}", STANDARD.encode([7u8; 32]))).expect("b");
        let signing = Signing {
            by_endpoint: BTreeMap::from([("https://hooks.example.com".into(), vec![a.clone()])]),
            by_queue: BTreeMap::from([("mail".into(), vec![b.clone()])]),
        };
        assert_eq!(
            signing.secrets("mail", "https://hooks.example.com"),
            Some(&[a][..])
        );
        assert_eq!(
            signing.secrets("mail", "https://other.example.com"),
            Some(&[b][..])
        );
        assert_eq!(
            signing.secrets("default", "https://other.example.com"),
            None
        );
    }
}
