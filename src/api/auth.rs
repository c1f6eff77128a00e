//! Bearer-key authentication for `/v1/*` (contract section 5). The key alone
//! selects the account; missing, malformed, unknown, revoked and
//! other-environment keys are all the same 401.

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;

use super::AppState;
use super::admission::AccountPermit;
use super::error::ApiError;
use crate::crypto::api_key;
use crate::domain::account::AccountId;

/// The authenticated caller: every `/v1/*` handler takes one. It holds the
/// account's place among its requests in progress (`admission`) until the
/// handler returns.
#[derive(Debug)]
pub struct Caller {
    pub account: AccountId,
    _admitted: AccountPermit,
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = bearer_token(parts).ok_or(ApiError::Unauthorized)?;
        match state
            .store
            .authenticate(&api_key::hash(token), &state.environment)
            .await?
        {
            Ok(account) => Ok(Caller {
                account,
                _admitted: state.admission.admit_account(account)?,
            }),
            Err(refusal) => {
                tracing::info!(?refusal, "API key refused");
                Err(ApiError::Unauthorized)
            }
        }
    }
}

pub(super) fn bearer_token(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    let well_formed = scheme.eq_ignore_ascii_case("bearer")
        && !token.is_empty()
        && token.len() <= api_key::MAX_KEY_LEN
        && token.bytes().all(|b| b.is_ascii_graphic());
    well_formed.then_some(token)
}
