//! One HTTP exchange with a host endpoint: the guarded client (own
//! resolver, no proxies, no redirects), the per-attempt deadline over the
//! whole exchange, and a response read no further than the size cap.

use crate::trace_context::Leaf;
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use super::address_guard::{AddressPolicy, AddressRefused, GuardedResolver, NameLookup};
use super::failure::CallFailure;

/// Largest endpoint answer read (documented); a bigger one is a failed call.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// The HTTP client every call goes through.
#[derive(Clone)]
pub struct HttpCaller {
    client: reqwest::Client,
    policy: AddressPolicy,
    max_response_bytes: usize,
}

pub struct Exchange<'a> {
    pub method: reqwest::Method,
    pub url: &'a url::Url,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub timeout: Duration,
}

impl HttpCaller {
    pub fn new(policy: AddressPolicy, lookup: Arc<dyn NameLookup>) -> Self {
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(GuardedResolver { lookup, policy }))
            .redirect(reqwest::redirect::Policy::none())
            // Environment proxies would bypass the address guard.
            .no_proxy()
            .user_agent(concat!("warden/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .build()
            .expect("the HTTP client configuration is valid");
        HttpCaller {
            client,
            policy,
            max_response_bytes: MAX_RESPONSE_BYTES,
        }
    }

    pub fn with_max_response_bytes(mut self, limit: usize) -> Self {
        self.max_response_bytes = limit;
        self
    }

    /// Refuses what the resolver cannot see: literal addresses, and plain
    /// http anywhere but loopback under the development switch.
    pub fn check_target(&self, url: &url::Url) -> Result<(), CallFailure> {
        let refuse = |why| Err(CallFailure::AddressRefused(why));
        let host = match url.host() {
            Some(host) => host,
            None => return refuse(AddressRefused::NoHost),
        };
        let literal: Option<IpAddr> = match host {
            url::Host::Ipv4(v4) => Some(v4.into()),
            url::Host::Ipv6(v6) => Some(v6.into()),
            url::Host::Domain(_) => None,
        };
        if let Some(ip) = literal {
            self.policy.check(ip).map_err(CallFailure::AddressRefused)?;
        }
        match url.scheme() {
            "https" => Ok(()),
            "http" if self.policy.allow_loopback => {
                let loopback = literal
                    .map(|ip| ip.is_loopback())
                    .unwrap_or(matches!(host, url::Host::Domain("localhost")));
                if loopback {
                    Ok(())
                } else {
                    refuse(AddressRefused::PlainHttp)
                }
            }
            _ => refuse(AddressRefused::Scheme),
        }
    }

    /// One attempt: send, then read a JSON answer, all within `timeout`.
    /// One exchange, under its own HTTP client span (OpenTelemetry HTTP
    /// conventions: method, server address and port, status; never the URL's
    /// query, the headers or the body), whose `traceparent` the request
    /// carries.
    pub async fn exchange(&self, exchange: Exchange<'_>) -> Result<serde_json::Value, CallFailure> {
        use opentelemetry::KeyValue;
        let mut span = Leaf::start(opentelemetry::trace::SpanKind::Client, || {
            let method = method_name(&exchange.method);
            (
                method.clone(),
                crate::trace_context::attributes(
                    [
                        KeyValue::new("http.request.method", method),
                        KeyValue::new(
                            "server.address",
                            exchange.url.host_str().unwrap_or("").to_owned(),
                        ),
                        KeyValue::new(
                            "server.port",
                            i64::from(exchange.url.port_or_known_default().unwrap_or(0)),
                        ),
                    ],
                    2,
                ),
            )
        });
        let exchanged = self.exchange_in_span(exchange, &mut span).await;
        if let Err(failure) = &exchanged {
            span.set_attribute(|| KeyValue::new("error.type", failure.reason().as_str()));
        }
        exchanged
    }

    async fn exchange_in_span(
        &self,
        mut exchange: Exchange<'_>,
        span: &mut Leaf,
    ) -> Result<serde_json::Value, CallFailure> {
        self.check_target(exchange.url)?;
        span.inject(&mut exchange.headers);
        let timeout = exchange.timeout;
        let attempt = async {
            let response = self
                .client
                .request(exchange.method, exchange.url.clone())
                .headers(exchange.headers)
                .body(exchange.body)
                .send()
                .await
                .map_err(classify)?;
            let status = response.status().as_u16();
            span.set_attribute(|| {
                opentelemetry::KeyValue::new("http.response.status_code", i64::from(status))
            });
            self.read_json(response).await
        };
        // Waiting for the endpoint is not local work (`local_work`).
        crate::local_work::outside(tokio::time::timeout(timeout, attempt))
            .await
            .unwrap_or(Err(CallFailure::Timeout {
                timeout_ms: timeout.as_millis() as u64,
            }))
    }

    async fn read_json(
        &self,
        mut response: reqwest::Response,
    ) -> Result<serde_json::Value, CallFailure> {
        let status = response.status();
        if status.is_redirection() {
            return Err(CallFailure::RedirectRefused {
                status: status.as_u16(),
            });
        }
        if !status.is_success() {
            return Err(CallFailure::HttpStatus {
                status: status.as_u16(),
            });
        }
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            })
            .is_some_and(|ct| {
                ct == "application/json"
                    || (ct.starts_with("application/") && ct.ends_with("+json"))
            });
        if !is_json {
            return Err(CallFailure::NotJson);
        }
        let limit = self.max_response_bytes;
        let declared = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|len| len > limit as u64) {
            return Err(CallFailure::ResponseTooLarge { limit });
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(classify)? {
            if body.len() + chunk.len() > limit {
                return Err(CallFailure::ResponseTooLarge { limit });
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|_| CallFailure::NotJson)
    }
}

/// Maps a transport error to a failure, finding the guard's refusal in the chain.
fn classify(err: reqwest::Error) -> CallFailure {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    while let Some(e) = source {
        if let Some(refused) = e.downcast_ref::<AddressRefused>() {
            return CallFailure::AddressRefused(*refused);
        }
        source = e.source();
    }
    // The only deadline inside the client is the connect time-out: the
    // endpoint could not be reached. The call's own deadline is `exchange`'s.
    CallFailure::ConnectFailed
}

/// A method's name, borrowed for the methods a capability can use (the
/// client span's name and `http.request.method`, on every call).
fn method_name(method: &reqwest::Method) -> std::borrow::Cow<'static, str> {
    use reqwest::Method;
    match *method {
        Method::GET => "GET".into(),
        Method::POST => "POST".into(),
        Method::PUT => "PUT".into(),
        Method::PATCH => "PATCH".into(),
        Method::DELETE => "DELETE".into(),
        _ => method.as_str().to_owned().into(),
    }
}
