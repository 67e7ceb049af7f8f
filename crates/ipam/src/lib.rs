//! weft-ipam
