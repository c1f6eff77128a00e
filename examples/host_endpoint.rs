//! The example host endpoint (`examples/host-endpoint`, its library) as a
//! binary of this workspace, so `cargo test` builds it into the shared
//! target directory (`target/debug/examples/host_endpoint`) for
//! scripts/mcp-clients-run.sh. Same settings as that crate's `main.rs`:
//! HOST_ENDPOINT_TOKEN, HOST_ENDPOINT_LISTEN, WARDEN_JWKS_URL.

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
        origin: format!("http://{listen}"),
    };
    let listener = tokio::net::TcpListener::bind(&listen).await.expect("bind");
    println!("host endpoint on http://{listen}");
    axum::serve(listener, router(Endpoint::new(config)))
        .await
        .expect("serve");
}
