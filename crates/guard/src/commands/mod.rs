//! One module per CNI command. Each returns what to print on stdout.

pub mod add;
pub mod check;
pub mod del;
pub mod gc;
pub mod status;

use weft_cni::Env;

use crate::error::GuardError;

/// The attachment identity every attachment command has (weft-cni validated it).
pub(crate) fn attachment(env: &Env) -> Result<(String, String), GuardError> {
    match (&env.container_id, &env.ifname) {
        (Some(id), Some(ifname)) => Ok((id.clone(), ifname.clone())),
        _ => Err(GuardError::Other(
            "CNI_CONTAINERID and CNI_IFNAME are required".into(),
        )),
    }
}

/// `CNI_NETNS`, required by ADD and CHECK.
pub(crate) fn netns_path(env: &Env) -> Result<&str, GuardError> {
    env.netns
        .as_deref()
        .ok_or_else(|| GuardError::Other("CNI_NETNS is required".into()))
}
