//! Bounds shared by every user-supplied string; defined in `warden-channel`,
//! where user strings first come in.

pub use warden_channel::bounds::check_bounded;
