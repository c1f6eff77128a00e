//! The open loops' client (`load::open_loop`, `overload`): HTTP/1.1 on
//! hyper's connection API, one request at a time per connection, idle
//! connections kept for the next request.
//!
//! The generator shares the machine's two cores with the server under
//! test, so what it spends on a request is CPU the server does not get.
//! reqwest, which these loops used before, parses the URL, builds the
//! headers and goes through its pool, redirect and time-out layers for
//! every request: ~52 µs of CPU a request on one 2-core machine, 0.6 of a
//! core at 11,000 requests a second past capacity. Here the request's
//! parts are made once and each request clones them.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HOST, HeaderName, HeaderValue, RETRY_AFTER};
use hyper::{HeaderMap, Method, Request, Uri};
use hyper_util::rt::TokioIo;

use crate::load::{ORDER, RequestSpec, random_order};

/// One request, sent again and again over connections kept open.
pub struct OpenClient {
    address: SocketAddr,
    method: Method,
    /// The path and query (the request line's origin form).
    target: Uri,
    headers: HeaderMap,
    body: Option<BodyTemplate>,
    timeout: Duration,
    /// Kept connections, and since when each has been idle.
    idle: Mutex<Vec<(SendRequest<Full<Bytes>>, Instant)>>,
}

/// How long a kept connection may stay idle and still be used: Warden
/// closes one idle for its header-read time-out (10 s by default), and a
/// request sent just as it does fails. As a client pool with an idle
/// time-out below the server's, the generator drops such a connection
/// instead (one run lost 5 requests at once, 10 s into the phase, on
/// connections opened at its start and idle since).
const IDLE_LIMIT: Duration = Duration::from_secs(5);

/// A request's body; with the order number drawn per request where the
/// spec asks (`RequestSpec::vary_order`).
enum BodyTemplate {
    Fixed(Bytes),
    VariedOrder { before: Bytes, after: Bytes },
}

/// What the server answered.
pub struct Answer {
    pub status: u16,
    pub retry_after: bool,
}

/// Why no answer came.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Broken {
    /// The client's time-out.
    TimedOut,
    /// The connection could not be made.
    Connect,
    /// The answer's body could not be read whole (a reset).
    Unread,
    /// Any other socket error: among them a request sent on a keep-alive
    /// connection that the server closed ("connection closed before
    /// message completed").
    Other,
}

impl OpenClient {
    /// A client for `spec` (an `http://` URL with an IP address), giving up
    /// on a request after `timeout`.
    pub fn new(spec: &RequestSpec, timeout: Duration) -> Self {
        let url: Uri = spec.url.parse().expect("a request URL");
        let authority = url.authority().expect("an absolute URL").clone();
        let address: SocketAddr = authority
            .as_str()
            .parse()
            .expect("the open loops address the server by IP and port");
        let mut headers = HeaderMap::new();
        headers.insert(HOST, HeaderValue::from_str(authority.as_str()).unwrap());
        for (name, value) in &spec.headers {
            headers.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        let body = spec
            .body
            .as_deref()
            .map(|body| match body.split_once(ORDER) {
                Some((before, after)) if spec.vary_order => BodyTemplate::VariedOrder {
                    before: Bytes::copy_from_slice(before.as_bytes()),
                    after: Bytes::copy_from_slice(after.as_bytes()),
                },
                _ => BodyTemplate::Fixed(Bytes::copy_from_slice(body.as_bytes())),
            });
        OpenClient {
            address,
            method: spec.method.parse().unwrap(),
            target: url
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .parse()
                .unwrap(),
            headers,
            body,
            timeout,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Sends the request once and reads the whole answer.
    pub async fn send(&self) -> Result<Answer, Broken> {
        tokio::time::timeout(self.timeout, self.exchange())
            .await
            .unwrap_or(Err(Broken::TimedOut))
    }

    async fn exchange(&self) -> Result<Answer, Broken> {
        let mut request = self.request();
        loop {
            let (mut sender, fresh) = self.connection().await?;
            match sender.try_send_request(request).await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let retry_after = response.headers().contains_key(RETRY_AFTER);
                    response
                        .into_body()
                        .collect()
                        .await
                        .map_err(|_| Broken::Unread)?;
                    self.idle.lock().unwrap().push((sender, Instant::now()));
                    return Ok(Answer {
                        status,
                        retry_after,
                    });
                }
                // A kept connection the server closed before the request
                // was written gives it back unsent: it goes again, on
                // another connection (as reqwest's pool does). Never twice
                // on a new one.
                Err(mut unsent) => match unsent.take_message() {
                    Some(again) if !fresh => request = again,
                    _ => return Err(Broken::Other),
                },
            }
        }
    }

    /// A kept connection ready for a request, or a new one (`true`).
    async fn connection(&self) -> Result<(SendRequest<Full<Bytes>>, bool), Broken> {
        loop {
            let kept = self.idle.lock().unwrap().pop();
            let Some((mut sender, idle_since)) = kept else {
                break;
            };
            if idle_since.elapsed() >= IDLE_LIMIT {
                continue;
            }
            // Ready once it has finished the last exchange; an error when
            // the server has closed it.
            if sender.ready().await.is_ok() {
                return Ok((sender, false));
            }
        }
        let stream = tokio::net::TcpStream::connect(self.address)
            .await
            .map_err(|_| Broken::Connect)?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|_| Broken::Connect)?;
        tokio::spawn(connection);
        Ok((sender, true))
    }

    fn request(&self) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(self.body_now()));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.target.clone();
        *request.headers_mut() = self.headers.clone();
        request
    }

    fn body_now(&self) -> Bytes {
        match &self.body {
            None => Bytes::new(),
            Some(BodyTemplate::Fixed(body)) => body.clone(),
            Some(BodyTemplate::VariedOrder { before, after }) => {
                let mut body = BytesMut::with_capacity(before.len() + ORDER.len() + after.len());
                body.put_slice(before);
                body.put_slice(random_order().as_bytes());
                body.put_slice(after);
                body.freeze()
            }
        }
    }
}
