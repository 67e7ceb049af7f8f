//! "Why can't A reach B": from the model without traffic, and from the ids a datapath drop
//! event carries, in the same words.

use std::net::IpAddr;

use crate::cluster::Cluster;
use crate::reference::{evaluate, Connection, Verdict as ReferenceVerdict};
use crate::simulate::{DropEvent, DropReason};
use crate::table::{
    NodeTables, Verdict, CLASS_BIT, IDENTITY_HOST, IDENTITY_REMOTE_NODE, IDENTITY_WORLD,
};
use crate::view::format_proto_port;

/// The wording of an isolated endpoint that nothing allows.
pub fn denied_by_default(policies: &[String]) -> String {
    format!("denied by default: selected by {}", policies.join(", "))
}

/// The decision for one connection attempt and why, from the policies themselves. Its
/// `Display` is the explanation.
pub fn explain(
    cluster: &Cluster,
    from: IpAddr,
    to: IpAddr,
    protocol: u8,
    port: u16,
) -> ReferenceVerdict {
    evaluate(
        cluster,
        &Connection {
            src: from,
            dst: to,
            protocol,
            port,
        },
    )
}

/// `policy-ns/policy-name ingress rule 2`, from a verdict's ids.
pub fn rule_text(tables: &NodeTables, v: &Verdict) -> String {
    let policy = tables
        .meta
        .policies
        .get(&v.policy)
        .cloned()
        .unwrap_or_else(|| format!("policy #{}", v.policy));
    format!("{policy} {} rule {}", v.direction(), v.rule)
}

/// `allowed by x/allow-b ingress rule 0`.
pub fn explain_allow(tables: &NodeTables, v: &Verdict) -> String {
    format!("allowed by {}", rule_text(tables, v))
}

/// Who an identity stands for.
pub fn identity_text(tables: &NodeTables, identity: u32) -> String {
    match identity {
        IDENTITY_WORLD => "outside the cluster".into(),
        IDENTITY_HOST => "this node".into(),
        IDENTITY_REMOTE_NODE => "another node".into(),
        id if id & CLASS_BIT != 0 => format!("address class #{}", id & !CLASS_BIT),
        id => match tables.meta.identities.get(&id) {
            Some(info) => format!("a pod of {} with {}", info.namespace, info.labels),
            None => format!("identity #{id}"),
        },
    }
}

/// A drop event in words, from the ids it carries and the tables it was dropped by.
pub fn explain_drop(tables: &NodeTables, e: &DropEvent) -> String {
    let endpoint = tables
        .meta
        .endpoints
        .get(&e.endpoint.into())
        .cloned()
        .unwrap_or_else(|| "an unknown endpoint".into());
    let what = format_proto_port(e.protocol, e.port);
    let (verb, other) = match e.direction {
        crate::policy::Direction::Egress => ("to", "egress"),
        crate::policy::Direction::Ingress => ("from", "ingress"),
    };
    let head = format!(
        "{other} of {endpoint} ({}): {what} {verb} {} ({}) dropped",
        e.endpoint,
        e.peer,
        identity_text(tables, e.peer_identity)
    );
    let selected_by = || -> Vec<String> {
        tables
            .meta
            .sets
            .get(&e.set)
            .map(|s| {
                let mut names: Vec<String> = s
                    .policies
                    .iter()
                    .map(|id| {
                        tables
                            .meta
                            .policies
                            .get(id)
                            .cloned()
                            .unwrap_or_else(|| format!("policy #{id}"))
                    })
                    .collect();
                names.sort();
                names
            })
            .unwrap_or_default()
    };
    match e.reason {
        DropReason::NoRule => format!(
            "{head}: {}; no rule allows {what}",
            denied_by_default(&selected_by())
        ),
        DropReason::Revoked => format!(
            "{head}: an established connection no longer allowed ({}; no rule allows {what})",
            denied_by_default(&selected_by())
        ),
        DropReason::Pending => {
            format!("{head}: the agent has not programmed this pod's policy yet (it starts denied)")
        }
    }
}
