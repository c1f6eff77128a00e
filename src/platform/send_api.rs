//! The one client of the platform's send API:
//! `POST {base}/{phone_number_id}/messages` with the bearer token and the
//! text-message body. No proxies, no redirects, a deadline per call; the
//! answer is classified, never read beyond its status. A request that
//! cannot be built (an id or token that cannot be a header value) is a
//! permanent failure: no attempt could ever send it.

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde::Serialize;
use zeroize::Zeroizing;

use super::inbound::MAX_TEXT_CHARS;

/// Carries the inbound message's platform id on every attempt of its
/// reply, so a send API that deduplicates can drop a resend after a crash
/// between the send and its acknowledgement (docs/contract-decisions.md).
pub const IDEMPOTENCY_HEADER: &str = "Idempotency-Key";

#[derive(Clone)]
pub struct SendApi {
    client: reqwest::Client,
    base: url::Url,
}

/// Why a send failed.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// Worth a retry: no answer, 408, 429, 5xx, or the token refused (an
    /// operator may register a new one).
    #[error("transient send failure: {0}")]
    Transient(String),
    /// The platform refused this message; resending cannot help.
    #[error("the platform refused the message: {0}")]
    Refused(String),
    /// The request cannot be built from what is stored; never retried.
    #[error("the send request cannot be built: {0}")]
    Unbuildable(&'static str),
}

#[derive(Serialize)]
struct TextMessage<'a> {
    messaging_product: &'static str,
    recipient_type: &'static str,
    to: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    text: TextBody<'a>,
}

#[derive(Serialize)]
struct TextBody<'a> {
    body: &'a str,
}

impl SendApi {
    /// `base` must be https, or http on loopback when `allow_loopback`.
    pub fn new(base: &str, timeout: Duration, allow_loopback: bool) -> anyhow::Result<Self> {
        let base = url::Url::parse(base.trim_end_matches('/'))
            .map_err(|e| anyhow::anyhow!("WARDEN_PLATFORM_API_URL {base:?} is not a URL: {e}"))?;
        let loopback = matches!(base.host(), Some(url::Host::Domain("localhost")))
            || matches!(base.host(), Some(url::Host::Ipv4(ip)) if ip.is_loopback())
            || matches!(base.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback());
        let allowed =
            base.scheme() == "https" || (allow_loopback && loopback && base.scheme() == "http");
        if !allowed || base.cannot_be_a_base() {
            anyhow::bail!(
                "WARDEN_PLATFORM_API_URL must be an https:// URL (http:// only on loopback with WARDEN_DEV_ALLOW_LOOPBACK)"
            );
        }
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .build()?;
        Ok(SendApi { client, base })
    }

    /// Sends one text reply. `phone_number_id` is digits (checked at registration).
    pub async fn send_text(
        &self,
        phone_number_id: &str,
        token: &str,
        to: &str,
        body: &str,
        dedup_key: &str,
    ) -> Result<(), SendError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| SendError::Unbuildable("the send API's URL takes no path"))?
            .pop_if_empty()
            .push(phone_number_id)
            .push("messages");
        let message = TextMessage {
            messaging_product: "whatsapp",
            recipient_type: "individual",
            to,
            kind: "text",
            text: TextBody {
                body: truncate(body, MAX_TEXT_CHARS),
            },
        };
        let idempotency_key = HeaderValue::from_str(dedup_key)
            .map_err(|_| SendError::Unbuildable("the message id cannot be an Idempotency-Key"))?;
        let bearer = Zeroizing::new(format!("Bearer {token}"));
        let mut authorization = HeaderValue::from_str(&bearer)
            .map_err(|_| SendError::Unbuildable("the access token cannot be a header value"))?;
        authorization.set_sensitive(true);
        let mut trace_headers = reqwest::header::HeaderMap::new();
        crate::trace_context::inject_current(&mut trace_headers);
        let request = self
            .client
            .post(url)
            .headers(trace_headers)
            .header(AUTHORIZATION, authorization)
            .header(IDEMPOTENCY_HEADER, idempotency_key)
            .json(&message)
            .build()
            .map_err(|_| SendError::Unbuildable("the request is not valid"))?;
        let response = self
            .client
            .execute(request)
            .await
            // The error may name the URL, never the token.
            .map_err(|e| SendError::Transient(e.without_url().to_string()))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let what = format!("the send API answered {}", status.as_u16());
        match status.as_u16() {
            401 | 403 | 408 | 429 | 500..=599 => Err(SendError::Transient(what)),
            _ => Err(SendError::Refused(what)),
        }
    }
}

/// At most `max` characters, cut at a character boundary.
fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_that_cannot_be_built_is_permanent_and_never_sent() {
        // Nothing listens on port 9: a request that were sent would be transient.
        let api = SendApi::new("http://127.0.0.1:9/v21.0", Duration::from_secs(1), true).unwrap();
        let send = |token: &'static str, key: &'static str| {
            let api = api.clone();
            async move { api.send_text("123", token, "346", "hola", key).await }
        };
        for (token, key) in [
            ("EAAG", "wamid.A\r\nX-Injected: 1"),
            ("EAAG", "wamid.\0"),
            ("EAAG\n", "wamid.B"),
        ] {
            let sent = send(token, key).await;
            assert!(
                matches!(sent, Err(SendError::Unbuildable(_))),
                "{token:?} {key:?}: {sent:?}"
            );
        }
        assert!(matches!(
            send("EAAG", "wamid.C").await,
            Err(SendError::Transient(_))
        ));
    }
}
