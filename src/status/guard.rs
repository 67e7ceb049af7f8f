//! The egress guard's part of `weft status`.
