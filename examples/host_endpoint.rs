//! The example host endpoint (`examples/host-endpoint`, its library) as a
//! binary of this workspace, so `cargo test` builds it into the shared
//! target directory (`target/debug/examples/host_endpoint`) for
//! scripts/mcp-clients-run.sh. Same settings as that crate's `main.rs`:
//! `Config::from_env`.

use warden_example_host_endpoint::{Config, Endpoint, router};

#[tokio::main]
async fn main() {
    let (listen, config) = Config::from_env();
    let listener = tokio::net::TcpListener::bind(&listen).await.expect("bind");
    println!("host endpoint on http://{listen}");
    axum::serve(listener, router(Endpoint::new(config)))
        .await
        .expect("serve");
}
