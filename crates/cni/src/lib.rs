//! weft-cni
