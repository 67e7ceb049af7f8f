//! The nfnetlink wire format, kept apart from the typed model.

pub(crate) mod attr;
pub(crate) mod consts;
pub(crate) mod message;
