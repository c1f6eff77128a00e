//! The default policy guest: Warden's default rules (`warden-policy-rules`),
//! exported through the guest SDK (`sdk/`, crate `warden-guest-sdk`), which
//! holds the whole export layer: WIT bindings, conversions and the
//! instance's cache of compiled schemas.

warden_guest_sdk::export_policy!();
