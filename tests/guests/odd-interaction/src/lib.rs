//! A custom guest whose interactions do not fit the contract's closed
//! object: the default rules everywhere, but a selection's options come back
//! as their bare labels (strings) instead of objects. The service must
//! refuse such output with a located reason, never fail on it.

use warden_guest_sdk::{InteractionKind, Policy, Shaped, Value, Violation, rules};

struct OddInteraction;

impl Policy for OddInteraction {
    fn shape_interaction(endpoint_result: &str) -> Result<Shaped, Vec<Violation>> {
        let mut shaped = rules::interaction::shape_text(endpoint_result)?;
        if shaped.kind == InteractionKind::Selection
            && let Some(options) = shaped.public.get_mut("options").and_then(Value::as_array_mut)
        {
            for option in options.iter_mut() {
                let label = option.get("label").cloned().unwrap_or(Value::Null);
                *option = label;
            }
        }
        Ok(shaped)
    }
}

warden_guest_sdk::export_policy!(OddInteraction);
