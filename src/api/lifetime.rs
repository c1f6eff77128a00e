//! How long a request may live and what may end it.
//!
//! - [`run_to_completion`]: the handler runs in a task of its own, so a
//!   client that hangs up cannot cancel it between two awaits. Without this,
//!   hyper drops the handler future when the socket closes, and a future
//!   dropped mid-way can leave a claimed idempotency key, a claimed
//!   `Client-Event-Id` or an open SQLite transaction (holding the write lock
//!   for every account) behind. The work finishes, or rolls back, on its own.
//! - [`body_deadline`]: the whole body must arrive within the configured
//!   time after the headers; a trickling upload fails like a broken one (the
//!   extractors answer 400 / 422 and the connection is closed).
//! - [`request_deadline`]: the client gets 503 when a request takes longer
//!   than the configured time. The detached work is not cancelled (see above);
//!   it is bounded by its own deadlines (database busy and acquire time-outs,
//!   guest deadline, call time-outs). A message turn has its own budget and
//!   is not cut here (docs/contract-decisions.md).

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Sleep;
use tracing::Instrument;

use super::admission::Admission;
use super::error::ApiError;
use std::sync::Arc;

/// The route whose time is bounded by the turn's own budget.
const TURN_PATH: &str = "/v1/channels/http/messages";

/// The per-request deadlines, from `ClientLimits`.
#[derive(Clone, Copy, Debug)]
pub struct RequestDeadlines {
    pub body_read: Duration,
    pub whole_request: Duration,
}

impl From<&crate::cli::ClientLimits> for RequestDeadlines {
    fn from(limits: &crate::cli::ClientLimits) -> Self {
        RequestDeadlines {
            body_read: Duration::from_millis(limits.body_read_timeout_ms),
            whole_request: Duration::from_millis(limits.request_timeout_ms),
        }
    }
}

/// Paths never refused for lack of room (`admission`): the health probe,
/// the key set hosts verify signatures with, and the static API document.
const ALWAYS_ADMITTED: [&str; 3] = ["/health", crate::api::jwks::JWKS_PATH, "/openapi.json"];

/// Middleware: runs the rest of the stack in its own task (see module doc),
/// which holds a place among the requests in progress until it ends.
pub async fn run_to_completion(
    State(admission): State<Arc<Admission>>,
    mut request: Request,
    next: Next,
) -> Response {
    if ALWAYS_ADMITTED.contains(&request.uri().path()) {
        return detached(false, async move { next.run(request).await }).await;
    }
    let place = match admission.admit_work() {
        Ok(place) => place,
        Err(refused) => return refused.into_response(),
    };
    match super::auth::PresentedKey::on_arrival(request.headers(), &admission) {
        Ok(Some(presented)) => {
            request.extensions_mut().insert(presented);
        }
        Ok(None) => {}
        Err(refused) => return refused.into_response(),
    }
    let local = match admission.admit_local().await {
        Ok(local) => local,
        Err(refused) => return refused.into_response(),
    };
    // A client slow to send its body does not keep the local place.
    let request = {
        let local = local.clone();
        request.map(|body| Body::new(PlaceFreeingBody::new(body, local)))
    };
    detached(local.past_capacity(), async move {
        let response = local.hold(next.run(request)).await;
        drop(place);
        response
    })
    .await
}

/// Runs `work` in a task of its own (see the module doc), on threads of
/// its own when it came `past_capacity` (`shedding_threads`), and waits
/// for it.
async fn detached(
    past_capacity: bool,
    work: impl Future<Output = Response> + Send + 'static,
) -> Response {
    let work = crate::shedding_threads::spawn(
        past_capacity,
        crate::trace_context::carry(work.instrument(tracing::Span::current())),
    );
    match work.await {
        Ok(response) => response,
        // Panics are caught inside (CatchPanicLayer); this is a runtime shutting down.
        Err(err) => {
            ApiError::Internal(anyhow::anyhow!("request task ended: {err}")).into_response()
        }
    }
}

/// Middleware: answers 503 when the request outlives its deadline.
pub async fn request_deadline(
    State(deadlines): State<RequestDeadlines>,
    request: Request,
    next: Next,
) -> Response {
    if request.uri().path() == TURN_PATH {
        return next.run(request).await;
    }
    match tokio::time::timeout(deadlines.whole_request, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(
                deadline_ms = deadlines.whole_request.as_millis() as u64,
                "request deadline elapsed; the client is told 503"
            );
            ApiError::DeadlineElapsed.into_response()
        }
    }
}

/// Middleware: the body must be complete within `body_read` of this point.
pub async fn body_deadline(
    State(deadlines): State<RequestDeadlines>,
    request: Request,
    next: Next,
) -> Response {
    let request = request.map(|body| Body::new(DeadlineBody::new(body, deadlines.body_read)));
    next.run(request).await
}

/// A body that fails once its deadline passes before it is complete.
struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
}

impl DeadlineBody {
    fn new(inner: Body, limit: Duration) -> Self {
        DeadlineBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(limit)),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the request body was not received within the body-read deadline")]
pub struct BodyDeadlineElapsed;

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending if this.deadline.as_mut().poll(cx).is_ready() => {
                tracing::info!("request body deadline elapsed; the upload is cut off");
                Poll::Ready(Some(Err(axum::Error::new(BodyDeadlineElapsed))))
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request body that, while its client is slow to send the next bytes,
/// gives the request's local place up (`local_work`), and takes it again
/// once the body is complete, before the handler works on it.
struct PlaceFreeingBody {
    inner: Body,
    place: Arc<crate::local_work::Place>,
    stepped_out: bool,
    step_in: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl PlaceFreeingBody {
    fn new(inner: Body, place: Arc<crate::local_work::Place>) -> Self {
        PlaceFreeingBody {
            inner,
            place,
            stepped_out: false,
            step_in: None,
        }
    }
}

impl http_body::Body for PlaceFreeingBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Some(step_in) = self.step_in.as_mut() {
            return match step_in.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.step_in = None;
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            };
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Pending => {
                if !self.stepped_out {
                    self.stepped_out = true;
                    self.place.step_out();
                }
                Poll::Pending
            }
            Poll::Ready(None) if self.stepped_out => {
                self.stepped_out = false;
                let place = self.place.clone();
                self.step_in = Some(Box::pin(async move { place.step_in().await }));
                self.poll_frame(cx)
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.step_in.is_none() && !self.stepped_out && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::http::StatusCode;
    use axum::middleware::from_fn_with_state;
    use tower::ServiceExt;

    /// Asks `app` for `/work`: the status and the name of the thread the
    /// handler ran on.
    async fn ask(app: &Router) -> (StatusCode, String) {
        let request = Request::get("/work").body(Body::empty()).unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn work_admitted_past_capacity_runs_on_the_shedding_threads() {
        let limits = crate::cli::ClientLimits {
            max_local_work: Some(1),
            ..crate::cli::ClientLimits::DEFAULT
        };
        let admission = Admission::from_limits(&limits);
        // Every path is this one handler (a fallback, not a route: routes
        // are made only through `routes!`, tests/api/openapi.rs).
        let app = Router::new()
            .fallback(|| async { std::thread::current().name().unwrap_or("").to_owned() })
            .layer(from_fn_with_state(admission.clone(), run_to_completion));

        let (status, thread) = ask(&app).await;
        assert_eq!(status, StatusCode::OK);
        assert_ne!(thread, "warden-shedding", "below capacity work stays put");

        // The only place held: an arrival waits the burst interval in vain,
        // is refused, and the server sheds; the next one finds the place
        // free, but comes while the server sheds.
        let held = admission.admit_local().await.unwrap();
        assert_eq!(ask(&app).await.0, StatusCode::SERVICE_UNAVAILABLE);
        drop(held);

        let (status, thread) = ask(&app).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(thread, "warden-shedding");
    }
}
