//! Bounds shared by every user-supplied string (and the refusal of U+0000
//! anywhere in request JSON); defined in `warden-channel`,
//! where user strings first come in.

pub use warden_channel::bounds::{check_bounded, refuse_nul};
