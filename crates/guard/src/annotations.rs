//! Where a pod's annotations come from, and therefore whether it asks for a fence.
//!
//! 1. `runtimeConfig` carries them (containerd's `io.kubernetes.cri.pod-annotations`
//!    capability): they are used as they are, and no API call is made.
//! 2. Otherwise, when `CNI_ARGS` names the pod and its namespace is in the netconf's
//!    allowlist, the pod is read from the API server; any failure fails the command.
//! 3. Otherwise the pod cannot ask for a fence: it passes through, with no API call.

use std::collections::BTreeMap;

use weft_cni::{Env, NetConf, POD_ANNOTATIONS_KEY};

use crate::config::GuardConfig;
use crate::error::GuardError;
use crate::kube::{self, ApiTarget, Timeouts};
use crate::pod_security::PodSecurity;

/// The short form some runtimes use for the same capability.
const POD_ANNOTATIONS_SHORT_KEY: &str = "podAnnotations";

/// Where the annotations were read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    RuntimeConfig,
    ApiServer,
    /// Not read at all; the reason says why (no pod identity, namespace not allowlisted).
    Skipped(String),
}

/// A pod's annotations and where they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub source: Source,
    pub annotations: BTreeMap<String, String>,
    /// The pod's security settings when its spec was read (the API server path), or why
    /// they could not be read.
    pub security: Option<Result<PodSecurity, String>>,
}

/// Finds the annotations for this invocation (see the module docs for the order).
pub fn resolve(env: &Env, conf: &NetConf, config: &GuardConfig) -> Result<Resolved, GuardError> {
    let runtime = &conf.runtime_config;
    if runtime.get(POD_ANNOTATIONS_KEY).is_some()
        || runtime.get(POD_ANNOTATIONS_SHORT_KEY).is_some()
    {
        return Ok(Resolved {
            source: Source::RuntimeConfig,
            annotations: runtime.pod_annotations.clone(),
            security: None,
        });
    }
    let skipped = |reason: String| {
        Ok(Resolved {
            source: Source::Skipped(reason),
            annotations: BTreeMap::new(),
            security: None,
        })
    };
    let (Some(namespace), Some(name)) = (env.args.k8s_pod_namespace(), env.args.k8s_pod_name())
    else {
        return skipped(
            "CNI_ARGS names no Kubernetes pod and runtimeConfig has no annotations".into(),
        );
    };
    if !config.namespaces.contains(namespace) {
        return skipped(format!(
            "namespace {namespace:?} is not in the netconf's namespaces"
        ));
    }
    let api_error = |source| GuardError::Api {
        namespace: namespace.to_string(),
        name: name.to_string(),
        source: Box::new(source),
    };
    let kubeconfig = config
        .kubeconfig
        .as_deref()
        .ok_or_else(|| GuardError::config("kubeconfig", "missing"))?;
    let target = ApiTarget::from_kubeconfig(kubeconfig).map_err(|e| api_error(e.into()))?;
    let timeouts = Timeouts {
        connect: config.api_connect_timeout,
        total: config.api_timeout,
    };
    let pod = kube::get_pod(&target, namespace, name, timeouts).map_err(api_error)?;
    Ok(Resolved {
        source: Source::ApiServer,
        annotations: pod.annotations,
        security: Some(pod.security),
    })
}
