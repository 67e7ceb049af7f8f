//! weft-datapath
