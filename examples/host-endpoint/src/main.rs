//! Runs the example host endpoint.
//!
//! ```sh
//! HOST_ENDPOINT_TOKEN=… WARDEN_JWKS_URL=http://127.0.0.1:8080/.well-known/service/capability-context/v1/jwks.json \
//!   HOST_ENDPOINT_LISTEN=127.0.0.1:9090 cargo run
//! ```

use warden_example_host_endpoint::{Config, Endpoint, router};

#[tokio::main]
async fn main() {
    let listen = std::env::var("HOST_ENDPOINT_LISTEN").unwrap_or_else(|_| "127.0.0.1:9090".into());
    let config = Config {
        token: std::env::var("HOST_ENDPOINT_TOKEN")
            .expect("set HOST_ENDPOINT_TOKEN: the token stored in Warden as the credential"),
        jwks_url: std::env::var("WARDEN_JWKS_URL").unwrap_or_else(|_| {
            "http://127.0.0.1:8080/.well-known/service/capability-context/v1/jwks.json".into()
        }),
        origin: std::env::var("HOST_ENDPOINT_ORIGIN")
            .unwrap_or_else(|_| format!("http://{listen}")),
    };
    let listener = tokio::net::TcpListener::bind(&listen).await.expect("bind");
    println!(
        "host endpoint on http://{listen}, verifying against {}",
        config.jwks_url
    );
    axum::serve(listener, router(Endpoint::new(config)))
        .await
        .expect("serve");
}
