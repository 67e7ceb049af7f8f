//! How the libraries' errors reach a runtime: as the spec's error codes with a message that
//! says what failed.

use weft_cni::CniError;

pub fn netlink(context: &str, e: weft_netlink::Error) -> CniError {
    CniError::internal(format!("{context}: {e}"))
}

pub fn ipam(e: weft_ipam::StoreError) -> CniError {
    use weft_ipam::StoreError as S;
    match &e {
        S::Io { .. } | S::NotWritable { .. } => CniError::io(format!("ipam: {e}")),
        S::InvalidNetworkName { .. } | S::InvalidRanges(_) | S::UnsupportedFormat { .. } => {
            CniError::invalid_config(format!("ipam: {e}"))
        }
        S::InvalidOwner { .. } => CniError::invalid_environment(format!("ipam: {e}")),
        // A requested address is the runtime's input (CNI_ARGS IP= or runtimeConfig ips).
        S::RequestedOutsideRanges { .. }
        | S::RequestedNotUsable { .. }
        | S::RequestedTwiceInSet { .. }
        | S::AddressInUse { .. }
        | S::OwnerHoldsOther { .. } => CniError::invalid_config(format!("ipam: {e}")),
        _ => CniError::internal(format!("ipam: {e}")),
    }
}
