//! The signed capability context: the JWK set, rotation, secrecy of the
//! private halves, and verification with an independent RFC 9421
//! implementation (the `httpsig` crate), not the project's own code.

use crate::helpers::endpoint::*;
use crate::helpers::fixtures::*;
use crate::helpers::*;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use httpsig::prelude::message_component::{HttpMessageComponent, HttpMessageComponentId};
use httpsig::prelude::*;
use serde_json::{Value, json};
use sha2::Digest;
use warden::cli::{AdminCommand, SigningKeyCommand};

pub(crate) async fn jwks(app: &TestApp) -> (reqwest::header::HeaderMap, Value) {
    let r = app
        .client
        .get(app.url("/.well-known/service/capability-context/v1/jwks.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let headers = r.headers().clone();
    (headers, r.json().await.unwrap())
}

fn kids(set: &Value) -> Vec<String> {
    set["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap().to_owned())
        .collect()
}

/// Verifies a request the endpoint received against the JWK set with httpsig.
pub(crate) fn verify_with_httpsig(received: &Received, set: &Value) -> Result<String, String> {
    let header = |name: &str| {
        received
            .headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .ok_or(format!("no {name}"))
    };
    let parsed =
        HttpSignatureHeaders::try_parse(&header("signature")?, &header("signature-input")?)
            .map_err(|e| e.to_string())?;
    let (_, signature) = parsed.iter().next().ok_or("no signature")?;
    let params = signature.signature_params();
    let keyid = params.keyid.clone().ok_or("no keyid")?;
    let jwk = set["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == keyid.as_str())
        .ok_or("unknown kid")?;
    let x = URL_SAFE_NO_PAD.decode(jwk["x"].as_str().unwrap()).unwrap();
    let public = PublicKey::from_bytes(&AlgorithmName::Ed25519, &x).map_err(|e| e.to_string())?;
    // The receiver's own view of each covered component.
    let target_uri = format!("http://{}{}", header("host")?, received.uri);
    let components = params
        .covered_components
        .iter()
        .map(|id: &HttpMessageComponentId| {
            let value = match id.to_string().as_str() {
                "\"@method\"" => received.method.to_string(),
                "\"@target-uri\"" => target_uri.clone(),
                other => header(other.trim_matches('"')).unwrap(),
            };
            HttpMessageComponent::try_from((id, &[value][..])).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let base = HttpSignatureBase::try_new(&components, params).map_err(|e| e.to_string())?;
    base.verify_signature_headers(&public, signature)
        .map_err(|e| e.to_string())?;
    Ok(keyid)
}

async fn called_endpoint(app: &TestApp, key: &str) -> (FakeEndpoint, String) {
    let endpoint = FakeEndpoint::json(json!({"status": "ok"})).await;
    let mut definition = valid_definition("signed_status");
    definition["url"] = json!(format!("{}/orders/status?src=warden", endpoint.base));
    let (status, body) = app.create_capability(key, definition).await;
    assert_eq!(status, 201, "{body}");
    (endpoint, body["id"].as_str().unwrap().to_owned())
}

async fn run_test(app: &TestApp, key: &str, id: &str) {
    let (_, body) = app.test_capability(key, id, json!({"order": "A-1"})).await;
    assert_eq!(body["status"], "passed");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jwk_set_publishes_public_okp_keys_only(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (headers, set) = jwks(&app).await;
    assert!(
        headers["cache-control"]
            .to_str()
            .unwrap()
            .contains("max-age")
    );
    let keys = set["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1);
    let key = keys[0].as_object().unwrap();
    let mut members: Vec<&str> = key.keys().map(String::as_str).collect();
    members.sort();
    assert_eq!(
        members,
        vec!["alg", "crv", "kid", "kty", "use", "x"],
        "no private member such as d"
    );
    assert_eq!(
        (
            key["kty"].as_str(),
            key["crv"].as_str(),
            key["use"].as_str(),
            key["alg"].as_str()
        ),
        (Some("OKP"), Some("Ed25519"), Some("sig"), Some("EdDSA"))
    );
    // kid is the RFC 7638 thumbprint of the key.
    let canonical = format!(
        r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
        key["x"].as_str().unwrap()
    );
    assert_eq!(
        key["kid"].as_str().unwrap(),
        URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(canonical.as_bytes()))
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_verify_with_an_independent_rfc_9421_implementation(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let (endpoint, id) = called_endpoint(&app, &key).await;
    run_test(&app, &key, &id).await;
    let (_, set) = jwks(&app).await;
    let received = endpoint.last();
    assert_eq!(
        verify_with_httpsig(&received, &set),
        Ok(kids(&set)[0].clone())
    );

    // Content digest of the exact body; the signature parameters as documented.
    let digest =
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(&received.body));
    assert_eq!(
        received.headers["content-digest"],
        format!("sha-256=:{digest}:")
    );
    let input = received.headers["signature-input"].to_str().unwrap();
    for part in [
        "created=",
        "expires=",
        "nonce=",
        "keyid=",
        "alg=\"ed25519\"",
        "tag=\"warden-capability-context\"",
    ] {
        assert!(input.contains(part), "{input} lacks {part}");
    }
    // The claims: opaque account subject, the capability, the audience.
    let claims: Value =
        serde_json::from_str(received.headers["capability-context"].to_str().unwrap()).unwrap();
    assert!(claims["sub"].as_str().unwrap().starts_with("sub_"));
    assert!(
        !claims.to_string().contains("acme"),
        "never the account name"
    );
    assert_eq!(
        (claims["cap"].as_str(), claims["rev"].as_i64()),
        (Some(id.as_str()), Some(1))
    );
    assert_eq!(claims["aud"], endpoint.base.as_str());
    assert!(
        claims.get("usr").is_none(),
        "no end user in a contract test"
    );
    assert!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap() <= 60);

    // Tampering breaks the independent verification.
    let mut tampered = received.clone();
    tampered.body = bytes::Bytes::from_static(b"{\"order\":\"B-2\"}");
    let digest =
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(&tampered.body));
    tampered.headers.insert(
        "content-digest",
        format!("sha-256=:{digest}:").parse().unwrap(),
    );
    assert!(
        verify_with_httpsig(&tampered, &set).is_err(),
        "a changed body (with a matching digest) fails"
    );
    let mut moved = received.clone();
    moved.uri = "/orders/cancel".parse().unwrap();
    assert!(
        verify_with_httpsig(&moved, &set).is_err(),
        "a changed URL fails"
    );
    let mut method = received.clone();
    method.method = axum::http::Method::PUT;
    assert!(
        verify_with_httpsig(&method, &set).is_err(),
        "a changed method fails"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_publishes_both_keys_and_signs_with_the_new_one(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let (endpoint, id) = called_endpoint(&app, &key).await;
    let (_, before) = jwks(&app).await;
    let old_kid = kids(&before)[0].clone();

    let rotation = app
        .admin(AdminCommand::SigningKey(SigningKeyCommand::Rotate {
            activate_in_secs: 0,
            grace_secs: 3600,
        }))
        .await;
    assert_eq!(rotation["previous_kid"], old_kid.as_str());
    let new_kid = rotation["kid"].as_str().unwrap().to_owned();
    let (_, after) = jwks(&app).await;
    let mut published = kids(&after);
    published.sort();
    let mut expected = vec![old_kid.clone(), new_kid.clone()];
    expected.sort();
    assert_eq!(published, expected, "old and new keys are both published");

    // Running servers look the active key up again within a second.
    tokio::time::sleep(warden::signing::KEY_RECHECK).await;
    run_test(&app, &key, &id).await;
    assert_eq!(
        verify_with_httpsig(&endpoint.last(), &after),
        Ok(new_kid.clone()),
        "the running server signs with the new kid"
    );

    // A rotation without grace drops the replaced key from the set at once.
    let next = app
        .admin(AdminCommand::SigningKey(SigningKeyCommand::Rotate {
            activate_in_secs: 0,
            grace_secs: 0,
        }))
        .await;
    let (_, last) = jwks(&app).await;
    assert!(!kids(&last).contains(&new_kid), "the grace period is over");
    assert!(kids(&last).contains(&next["kid"].as_str().unwrap().to_owned()));
    assert!(
        kids(&last).contains(&old_kid),
        "the first key's own grace period still runs"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_halves_are_sealed_at_rest(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let now = warden::clock::now_millis();
    let row = app.store.active_signing_key(now).await.unwrap().unwrap();
    let private = warden::signing::keys::open_private(&app.context.keyring, &row).unwrap();
    assert!(
        !app.db.contains_bytes(private.as_bytes()).await,
        "the private key is in the database in clear"
    );
    assert!(
        app.db.contains_bytes(&row.public_key).await,
        "(the check does find what is stored in clear)"
    );
}
