//! Runs the example host endpoint.
//!
//! ```sh
//! HOST_ENDPOINT_TOKEN=… WARDEN_JWKS_URL=http://127.0.0.1:8080/.well-known/service/capability-context/v1/jwks.json \
//!   HOST_ENDPOINT_LISTEN=127.0.0.1:9090 cargo run
//! ```

use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use warden_example_host_endpoint::{Config, Endpoint, router};

/// One line per call: what was asked and how it was answered (401 when the
/// token or the signature did not verify).
async fn log_call(request: Request, next: Next) -> Response {
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let response = next.run(request).await;
    println!("{method} {path} -> {}", response.status().as_u16());
    response
}

#[tokio::main]
async fn main() {
    let (listen, config) = Config::from_env();
    let listener = tokio::net::TcpListener::bind(&listen).await.expect("bind");
    println!(
        "host endpoint on http://{listen}, verifying against {}",
        config.jwks_url
    );
    let app = router(Endpoint::new(config)).layer(middleware::from_fn(log_call));
    axum::serve(listener, app).await.expect("serve");
}
