//! `weft status`: what this node's weft looks like (CNI configuration, plugin binaries,
//! datapath, kernel features), as a report and a non-zero exit when something is wrong.

pub mod guard;
