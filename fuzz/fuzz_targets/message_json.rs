//! A JSON message request's body, parsed as the server does (the body
//! extractor's `serde_json::from_slice`, then `from_payload`). A message
//! that passes respects its bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warden_channel::inbound::{InboundMessage, MAX_BODY_CHARS, MAX_METADATA_KEYS};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    if let Ok(message) = InboundMessage::from_payload(&value) {
        assert!((1..=MAX_BODY_CHARS).contains(&message.body.chars().count()));
        assert!(message.metadata.len() <= MAX_METADATA_KEYS);
        assert!(message.image.is_none());
    }
});
