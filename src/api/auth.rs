//! Bearer-key authentication for `/v1/*` (contract section 5). The key alone
//! selects the account; missing, malformed, unknown, revoked and
//! other-environment keys are all the same 401.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};

use super::AppState;
use super::admission::{AccountPermit, Admission};
use super::error::ApiError;
use crate::crypto::api_key;
use crate::domain::account::AccountId;
use crate::store::StoreResult;
use crate::store::accounts::KeyRefusal;
use crate::store::policy::TurnBasis;

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
        let (caller, ()) = Caller::authenticate(parts, state, |key_hash| async move {
            let judged = state
                .store
                .authenticate(&key_hash, &state.environment)
                .await?;
            Ok(judged.map(|account| (account, ())))
        })
        .await?;
        Ok(caller)
    }
}

impl Caller {
    /// Every caller extractor's one shape: the bearer key (missing or
    /// malformed is the 401 before any read), then `authenticate` with its
    /// hash (one store read that judges the key and joins what the route
    /// needs of its account), a refusal's 401, and the account's place.
    pub(super) async fn authenticate<Joined, Read>(
        parts: &mut Parts,
        state: &AppState,
        authenticate: impl FnOnce(String) -> Read,
    ) -> Result<(Self, Joined), ApiError>
    where
        Read: Future<Output = StoreResult<Result<(AccountId, Joined), KeyRefusal>>>,
    {
        let presented = match parts.extensions.remove::<PresentedKey>() {
            Some(presented) => presented,
            None => PresentedKey::of(bearer_token(&parts.headers).ok_or(ApiError::Unauthorized)?),
        };
        let known = state.admission.known_keys();
        let (account, joined) = match authenticate(presented.hash.clone()).await? {
            Ok(admitted) => {
                known.admitted(&presented.hash, admitted.0);
                admitted
            }
            Err(refusal) => {
                known.refused(&presented.hash);
                return Err(refused(refusal));
            }
        };
        let caller = Caller {
            account,
            _admitted: state.admission.admit_account(account)?,
        };
        Ok((caller, joined))
    }
}

/// A request's bearer key, hashed once on arrival (`lifetime`) and carried
/// to the `Caller` in the request's extensions.
#[derive(Clone)]
pub struct PresentedKey {
    hash: String,
}

impl PresentedKey {
    /// The presented key of a request just arrived, if it bears a
    /// well-formed one; the 503 at once when this server lately admitted
    /// the key (`known_keys`) and its account has as many requests in
    /// progress as it may, so that such a request neither waits for a local
    /// place nor reads the store to be refused.
    pub fn on_arrival(
        headers: &HeaderMap,
        admission: &Admission,
    ) -> Result<Option<PresentedKey>, ApiError> {
        let Some(token) = bearer_token(headers) else {
            return Ok(None);
        };
        let presented = PresentedKey::of(token);
        if let Some(account) = admission.known_keys().account_of(&presented.hash) {
            admission.refuse_account_at_bound(account)?;
        }
        Ok(Some(presented))
    }

    fn of(token: &str) -> PresentedKey {
        PresentedKey {
            hash: api_key::hash(token),
        }
    }
}

/// The 401 of a refused key (every refusal is the same on the wire).
fn refused(refusal: KeyRefusal) -> ApiError {
    tracing::info!(?refusal, "API key refused");
    ApiError::Unauthorized
}

/// The caller of a message's turn, with its account's [`TurnBasis`] read in
/// the same statement as the key (one round trip fewer on PostgreSQL): the
/// policy and the capability version as of the request's arrival.
#[derive(Debug)]
pub struct TurnCaller {
    pub caller: Caller,
    pub basis: TurnBasis,
}

impl FromRequestParts<AppState> for TurnCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let (caller, basis) = Caller::authenticate(parts, state, |key_hash| async move {
            state
                .store
                .authenticate_for_turn(&key_hash, &state.environment)
                .await
        })
        .await?;
        Ok(TurnCaller { caller, basis })
    }
}

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    let well_formed = scheme.eq_ignore_ascii_case("bearer")
        && !token.is_empty()
        && token.len() <= api_key::MAX_KEY_LEN
        && token.bytes().all(|b| b.is_ascii_graphic());
    well_formed.then_some(token)
}
