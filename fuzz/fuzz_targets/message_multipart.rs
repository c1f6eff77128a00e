//! A multipart message request, parsed as the server does. Input: the
//! first byte sets the size of the chunks the body arrives in (1 to 256
//! bytes, so boundaries fall across chunks), then the content type up to
//! the first newline, then the body.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use warden_channel::image::MAX_IMAGE_BYTES;
use warden_channel::inbound::InboundMessage;

/// Drives a future whose stream is in memory: it never waits.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk) + 1;
    let newline = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
    let Ok(content_type) = std::str::from_utf8(&rest[..newline]) else {
        return;
    };
    let body = rest.get(newline + 1..).unwrap_or_default();
    let pieces: Vec<Result<Bytes, std::io::Error>> = body
        .chunks(chunk)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let parsed = block_on(InboundMessage::from_multipart(
        content_type,
        futures_util::stream::iter(pieces),
    ));
    if let Ok(message) = parsed
        && let Some(image) = message.image
    {
        assert!(image.bytes.len() <= MAX_IMAGE_BYTES);
    }
});
