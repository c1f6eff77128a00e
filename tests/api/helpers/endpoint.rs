//! A programmable host endpoint on loopback: records every request it gets
//! and answers as the test says (JSON, delays, redirects, huge bodies…).

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Response, StatusCode, Uri};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

#[derive(Clone, Debug)]
pub struct Received {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    pub body: Bytes,
}

type Behavior =
    Arc<dyn Fn(Received) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>> + Send + Sync>;

pub struct FakeEndpoint {
    pub base: String,
    pub received: Arc<Mutex<Vec<Received>>>,
}

impl FakeEndpoint {
    pub async fn start<F, Fut>(behavior: F) -> Self
    where
        F: Fn(Received) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Response<Body>> + Send + 'static,
    {
        let behavior: Behavior = Arc::new(move |r| Box::pin(behavior(r)));
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let behavior = behavior.clone();
                let log = log.clone();
                async move {
                    let request = Received {
                        method,
                        uri,
                        headers,
                        body,
                    };
                    log.lock().unwrap().push(request.clone());
                    behavior(request).await
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeEndpoint { base, received }
    }

    /// Always answers this JSON.
    pub async fn json(body: serde_json::Value) -> Self {
        Self::start(move |_| {
            let body = body.clone();
            async move { json_response(StatusCode::OK, &body) }
        })
        .await
    }

    pub fn hits(&self) -> usize {
        self.received.lock().unwrap().len()
    }

    pub fn last(&self) -> Received {
        self.received
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("the endpoint was called")
    }
}

pub fn json_response(status: StatusCode, body: &serde_json::Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// A host endpoint that answers the order status only when the test lets
/// it, and says when a call arrived: a turn held in flight.
pub struct HeldEndpoint {
    pub endpoint: FakeEndpoint,
    pub arrived: tokio::sync::mpsc::UnboundedReceiver<()>,
    pub release: Arc<tokio::sync::Semaphore>,
}

impl HeldEndpoint {
    pub async fn start() -> Self {
        let (tx, arrived) = tokio::sync::mpsc::unbounded_channel();
        let release = Arc::new(tokio::sync::Semaphore::new(0));
        let gate = release.clone();
        let endpoint = FakeEndpoint::start(move |_request: Received| {
            let tx = tx.clone();
            let gate = gate.clone();
            async move {
                let _ = tx.send(());
                gate.acquire().await.unwrap().forget();
                json_response(
                    StatusCode::OK,
                    &serde_json::json!({"status": "enviado", "carrier": "Correos", "customer_name": "Ana Pérez"}),
                )
            }
        })
        .await;
        HeldEndpoint {
            endpoint,
            arrived,
            release,
        }
    }
}
