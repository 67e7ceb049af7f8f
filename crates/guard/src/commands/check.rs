//! CHECK: the namespace's state must be exactly what the pod asks for now.
//!
//! An opted-in pod's fence is proven as ADD proves it (exact readback, nothing ahead of
//! it, the probe refused). A pod that does not opt in must have no fence: a stale one is
//! reported too, since it no longer matches what the pod asks for.

use std::path::Path;

use weft_cni::{Env, NetConf};

use crate::annotations;
use crate::config::GuardConfig;
use crate::contract::Decision;
use crate::error::GuardError;
use crate::fence;
use crate::frames::{self, Stamp};
use crate::netns::PodNetns;
use crate::pod_security;
use crate::ruleset::{self, FAMILY, TABLE};
use crate::verify;

pub fn run(env: &Env, conf: &NetConf) -> Result<Option<String>, GuardError> {
    if conf.prev_result.is_none() {
        return Err(GuardError::config(
            "prevResult",
            "missing: CHECK needs the attachment's result from the runtime",
        ));
    }
    let config = GuardConfig::from_netconf(conf)?;
    let resolved = annotations::resolve(env, conf, &config)?;
    let decision = Decision::from_annotations(&resolved.annotations, &config)?;
    let (_, ifname) = super::attachment(env)?;
    let pod = PodNetns::open(Path::new(super::netns_path(env)?))?;
    let inside = pod.enter()?;
    let sock = inside.nft_socket()?;
    match decision {
        Decision::PassThrough => {
            if fence::read(&sock)?.is_some() || fence::read_frames(&sock)?.is_some() {
                return Err(GuardError::CheckFailed(format!(
                    "the pod does not opt in to the guard, but a table {TABLE} ({FAMILY} or {}) exists in its namespace (a stale fence)",
                    frames::FAMILY
                )));
            }
        }
        Decision::Enforce(contract) => {
            // A pod that could go around the fence is not fenced, whatever the table says.
            pod_security::admit(&resolved, contract.proxy_uid, &config)
                .map_err(|e| GuardError::CheckFailed(e.to_string()))?;
            // The stamp is the fence's secret: CHECK takes it from the installed table (a
            // fence without one fails the comparison for that reason) and the devices from
            // the namespace as it is now, so one added since ADD shows as not fenced.
            let stamp = fence::read(&sock)?
                .as_ref()
                .and_then(frames::stamp_of)
                .unwrap_or(Stamp {
                    mark: 0,
                    priority: 0,
                });
            let spec = ruleset::fence(&contract, stamp, &frames::devices()?)?;
            let differences = verify::prove(
                &inside,
                &sock,
                &spec,
                contract.proxy_uid,
                &ifname,
                verify::Probe::DatagramAndFrame,
            )?;
            if !differences.is_empty() {
                return Err(GuardError::CheckFailed(format!(
                    "egress fence for proxy uid {} is not in force: {}",
                    contract.proxy_uid,
                    differences.join("; ")
                )));
            }
        }
    }
    Ok(None)
}
