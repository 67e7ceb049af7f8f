//! weft-netlink
