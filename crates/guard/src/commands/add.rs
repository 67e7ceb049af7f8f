//! ADD: pass `prevResult` through and, for a pod that asks for it, install the fence and
//! prove it before answering. Any failure after the install removes what was installed.

use std::path::Path;

use weft_cni::{Env, NetConf};

use crate::annotations;
use crate::config::GuardConfig;
use crate::contract::{Contract, Decision};
use crate::error::GuardError;
use crate::fault::{self, Step};
use crate::fence;
use crate::frames::{self, Stamp};
use crate::netns::PodNetns;
use crate::pod_security;
use crate::ruleset;
use crate::state::{Record, Store};
use crate::verify;

pub fn run(env: &Env, conf: &NetConf) -> Result<Option<String>, GuardError> {
    let prev = conf.prev_result.as_ref().ok_or_else(|| {
        GuardError::config(
            "prevResult",
            "missing: weft-guard is a chained plugin and must come after the plugin that creates the pod's interface",
        )
    })?;
    let config = GuardConfig::from_netconf(conf)?;
    // The previous plugin's result, converted to the version this request speaks.
    let output = prev.to_json(conf.version);
    let resolved = annotations::resolve(env, conf, &config)?;
    let contract = match Decision::from_annotations(&resolved.annotations, &config)? {
        Decision::PassThrough => return Ok(Some(output)),
        Decision::Enforce(contract) => contract,
    };
    pod_security::admit(&resolved, contract.proxy_uid, &config)?;
    let (container_id, ifname) = super::attachment(env)?;
    let netns = super::netns_path(env)?;
    enforce(
        &config,
        &contract,
        &container_id,
        &ifname,
        Path::new(netns),
        fault::from_env(),
    )?;
    Ok(Some(output))
}

/// Installs and proves the fence for one attachment.
pub fn enforce(
    config: &GuardConfig,
    contract: &Contract,
    container_id: &str,
    ifname: &str,
    netns: &Path,
    fault: Option<Step>,
) -> Result<(), GuardError> {
    let pod = PodNetns::open(netns)?;
    let inside = pod.enter()?;
    let sock = inside.nft_socket()?;
    // Read inside the pod: the frame fence covers every device it has but lo.
    let spec = ruleset::fence(contract, Stamp::random()?, &frames::devices()?)?;
    let store = Store::new(config.network_state_dir());
    let record = Record {
        container_id: container_id.to_string(),
        ifname: ifname.to_string(),
        netns: netns.display().to_string(),
        netns_id: inside.identity(&sock)?,
        proxy_uid: contract.proxy_uid,
        allow_cidrs: ruleset::cidr_strings(&contract.allow_cidrs),
        contract_version: contract.contract_version,
    };
    fault::check(fault, Step::StateWrite)?;
    // Recorded before installing, so whatever happens next DEL and GC can find it.
    store.write(&record)?;

    let installed = (|| {
        fault::check(fault, Step::BeforeInstall)?;
        fence::install(&sock, &spec, fault)?;
        fault::check(fault, Step::AfterInstall)?;
        let mut differences = verify::prove(
            &inside,
            &sock,
            &spec,
            contract.proxy_uid,
            ifname,
            verify::Probe::Datagram,
        )?;
        if fault == Some(Step::Verify) {
            differences.push(GuardError::Fault(Step::Verify.name()).to_string());
        }
        if differences.is_empty() {
            Ok(())
        } else {
            Err(GuardError::NotVerified(differences.join("; ")))
        }
    })();

    if let Err(error) = installed {
        // Leave nothing that could later read as enforced: the table goes, then the record.
        let mut failures = Vec::new();
        if let Err(e) = fence::remove(&sock) {
            failures.push(e.to_string());
        }
        if let Err(e) = store.remove(container_id, ifname) {
            failures.push(e.to_string());
        }
        if failures.is_empty() {
            return Err(error);
        }
        return Err(GuardError::Other(format!(
            "{error}; rolling back also failed: {}",
            failures.join("; ")
        )));
    }
    Ok(())
}
