//! The baselines, each its own process so /proc measures it alone.
//!
//! - `role endpoint`: the host endpoint, a fixed JSON answer (with a field
//!   `order_status` does not declare, so Warden has something to prune);
//! - `role relay URL`: the bare relay, the least a service between a client
//!   and that endpoint can do: forward the body with one reqwest call and
//!   return the answer, with no validation, signing or storage.
//!
//! - `role otlp`: an OTLP/HTTP trace collector that takes every export
//!   (`POST /v1/traces`, read whole) and answers success, for the observed
//!   run (`observed.rs`).
//!
//! Each binds a free loopback port and prints it as its first line.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

const ANSWER: &str = r#"{"status":"shipped","carrier":"Correos","warehouse":"internal-7","lines":[{"sku":"A1","qty":1}]}"#;

pub fn run(args: &[String]) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let app = match args.first().map(String::as_str) {
            Some("endpoint") => Router::new().fallback(|_body: Bytes| async {
                ([(header::CONTENT_TYPE, "application/json")], ANSWER)
            }),
            Some("relay") => {
                let relay = Arc::new(Relay {
                    client: reqwest::Client::new(),
                    url: args[1].clone(),
                });
                Router::new()
                    .route("/relay", axum::routing::post(relay_call))
                    .with_state(relay)
            }
            Some("otlp") => Router::new().route(
                "/v1/traces",
                axum::routing::post(|_export: Bytes| async {
                    // An empty ExportTraceServiceResponse: zero bytes.
                    (
                        [(header::CONTENT_TYPE, "application/x-protobuf")],
                        Bytes::new(),
                    )
                }),
            ),
            other => panic!("unknown role {other:?}"),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        println!("{port}");
        std::io::stdout().flush().unwrap();
        axum::serve(listener, app).await.unwrap();
    });
}

struct Relay {
    client: reqwest::Client,
    url: String,
}

async fn relay_call(State(relay): State<Arc<Relay>>, body: Bytes) -> Response {
    let sent = relay
        .client
        .post(&relay.url)
        .header(header::CONTENT_TYPE, "application/json")
        .timeout(Duration::from_secs(5))
        .body(body)
        .send()
        .await;
    match sent {
        Ok(answer) => match answer.bytes().await {
            Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
            Err(_) => StatusCode::BAD_GATEWAY.into_response(),
        },
        Err(_) => StatusCode::BAD_GATEWAY.into_response(),
    }
}
