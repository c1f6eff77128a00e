//! The challenge verifier: a siteverify-compatible endpoint (Cloudflare
//! Turnstile's protocol). A form POST of `secret`, `response` (the token),
//! `remoteip` and `idempotency_key`; the answer's `success`, `hostname` and
//! `action` decide. The secret is sent only there and never logged.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

/// Largest verifier answer read.
const MAX_ANSWER_BYTES: usize = 16 * 1024;

#[derive(Clone)]
pub struct Verifier {
    url: String,
    secret: zeroize::Zeroizing<String>,
    client: reqwest::Client,
    timeout: Duration,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifier")
            .field("url", &self.url)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// What the verifier said about a token, judged against what the
/// integration expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Valid,
    /// Refused by the verifier, or for another host or action.
    Invalid(&'static str),
}

/// The verifier could not be asked (down, timed out, 5xx, garbage): 503.
#[derive(Debug, thiserror::Error)]
#[error("the challenge verifier is unavailable: {0}")]
pub struct VerifierDown(pub String);

#[derive(Deserialize)]
struct Answer {
    success: bool,
    #[serde(default)]
    hostname: Option<String>,
    #[serde(default)]
    action: Option<String>,
}

impl Verifier {
    pub fn new(url: String, secret: String, timeout: Duration) -> Verifier {
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .user_agent(concat!("warden/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("the HTTP client configuration is valid");
        Verifier {
            url,
            secret: zeroize::Zeroizing::new(secret),
            client,
            timeout,
        }
    }

    /// Asks about `token`: valid only with `success`, the origin's host and
    /// the integration's action.
    pub async fn verify(
        &self,
        token: &str,
        remote_ip: &str,
        idempotency_key: &str,
        host: &str,
        action: &str,
    ) -> Result<Verdict, VerifierDown> {
        let ask = async {
            let mut trace_headers = reqwest::header::HeaderMap::new();
            crate::trace_context::inject_current(&mut trace_headers);
            let response = self
                .client
                .post(&self.url)
                .headers(trace_headers)
                .form(&[
                    ("secret", self.secret.as_str()),
                    ("response", token),
                    ("remoteip", remote_ip),
                    ("idempotency_key", idempotency_key),
                ])
                .send()
                .await
                .map_err(|e| VerifierDown(transport(&e)))?;
            let status = response.status();
            if !status.is_success() {
                return Err(VerifierDown(format!("it answered {status}")));
            }
            let bytes = read_bounded(response).await?;
            serde_json::from_slice::<Answer>(&bytes)
                .map_err(|_| VerifierDown("its answer is not siteverify JSON".into()))
        };
        // Waiting for the verifier is not local work (`local_work`).
        let answer = crate::local_work::outside(tokio::time::timeout(self.timeout, ask))
            .await
            .map_err(|_| VerifierDown("it did not answer in time".into()))??;
        Ok(if !answer.success {
            Verdict::Invalid("the verifier refused the token")
        } else if answer.hostname.as_deref() != Some(host) {
            Verdict::Invalid("the token was issued for another host")
        } else if answer.action.as_deref() != Some(action) {
            Verdict::Invalid("the token was issued for another action")
        } else {
            Verdict::Valid
        })
    }
}

fn transport(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        "it did not answer in time".into()
    } else if err.is_connect() {
        "it could not be reached".into()
    } else {
        "the connection failed".into()
    }
}

async fn read_bounded(mut response: reqwest::Response) -> Result<Vec<u8>, VerifierDown> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| VerifierDown(transport(&e)))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(VerifierDown("its answer is too large".into()));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
