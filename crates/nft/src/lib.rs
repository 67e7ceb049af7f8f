//! weft-nft
