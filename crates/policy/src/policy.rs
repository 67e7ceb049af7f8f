//! The compact, validated NetworkPolicy the engine works on, and its construction from the
//! wire type with every refusal naming the field (`spec.ingress[0].ports[1].endPort`).

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use weft_model::Issue;

use crate::names::port_name_problem;
use crate::selector::{Problem, Selector};
use crate::view::Protocol;
use crate::wire;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    Ingress,
    Egress,
}

impl Direction {
    pub const BOTH: [Direction; 2] = [Direction::Ingress, Direction::Egress];

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPolicy {
    pub namespace: String,
    pub name: String,
    /// Which pods of `namespace` the policy selects.
    pub pod_selector: Selector,
    /// `Some` exactly when `Ingress` is one of the policy's types (explicit or defaulted):
    /// the selected pods are isolated for ingress and these rules are their allows.
    pub ingress: Option<Vec<Rule>>,
    pub egress: Option<Vec<Rule>>,
}

/// One ingress or egress rule: traffic matching any peer and any port is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// `None`: `from`/`to` missing or empty, every peer (every address) matches.
    pub peers: Option<Vec<Peer>>,
    /// `None`: `ports` missing or empty, every protocol and port matches.
    pub ports: Option<Vec<PortRule>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// Pods selected by `pods` in the namespaces of `namespaces` (both selectors in one peer
    /// are an AND).
    Pods {
        namespaces: NamespaceScope,
        pods: Selector,
    },
    IpBlock(IpBlock),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceScope {
    /// No `namespaceSelector`: the policy's own namespace.
    Own,
    Selected(Selector),
}

/// `cidr` minus every `except` (each a strict subset of `cidr`, same family).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpBlock {
    pub cidr: IpNet,
    pub except: Vec<IpNet>,
}

impl IpBlock {
    pub fn contains(&self, addr: IpAddr) -> bool {
        self.cidr.contains(&addr) && !self.except.iter().any(|e| e.contains(&addr))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortRule {
    pub protocol: Protocol,
    pub port: PortMatch,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PortMatch {
    /// No `port`: every port of the protocol.
    Any,
    /// `port`, or `port`..=`endPort`.
    Range(u16, u16),
    /// A container port name, resolved against the destination pod's container ports
    /// (name and protocol must both match).
    Named(String),
}

impl fmt::Display for PortRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let proto = self.protocol.as_str().to_ascii_lowercase();
        match &self.port {
            PortMatch::Any => write!(f, "{proto}/any"),
            PortMatch::Range(lo, hi) if lo == hi => write!(f, "{proto}/{lo}"),
            PortMatch::Range(lo, hi) => write!(f, "{proto}/{lo}-{hi}"),
            PortMatch::Named(n) => write!(f, "{proto}/{n}"),
        }
    }
}

impl NetworkPolicy {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn rules(&self, direction: Direction) -> Option<&[Rule]> {
        match direction {
            Direction::Ingress => self.ingress.as_deref(),
            Direction::Egress => self.egress.as_deref(),
        }
    }

    /// Validates a wire policy as the API server does, and applies its defaults
    /// (`policyTypes`: Ingress, plus Egress when there are egress rules).
    pub fn from_wire(w: &wire::NetworkPolicy) -> Result<NetworkPolicy, Vec<Issue>> {
        let object = object_name(w);
        let mut problems: Vec<Problem> = Vec::new();
        let name = w.metadata.name.clone().unwrap_or_default();
        let namespace = w.metadata.namespace.clone().unwrap_or_default();
        if name.is_empty() {
            problems.push(Problem::new("metadata.name", "missing"));
        }
        if namespace.is_empty() {
            problems.push(Problem::new(
                "metadata.namespace",
                "missing: a NetworkPolicy belongs to a namespace",
            ));
        }
        let empty = wire::Spec::default();
        let spec = w.spec.as_ref().unwrap_or(&empty);
        let pod_selector = Selector::from_wire(
            spec.pod_selector.as_ref().unwrap_or(&Default::default()),
            "spec.podSelector",
        )
        .unwrap_or_else(|mut p| {
            problems.append(&mut p);
            Selector::everything()
        });
        let (ingress_on, egress_on) = policy_types(spec).unwrap_or_else(|mut p| {
            problems.append(&mut p);
            (true, true)
        });
        let mut ingress = Vec::new();
        for (i, r) in spec.ingress.iter().flatten().enumerate() {
            let field = format!("spec.ingress[{i}]");
            ingress.push(rule(&r.from, &r.ports, &field, "from", &mut problems));
        }
        let mut egress = Vec::new();
        for (i, r) in spec.egress.iter().flatten().enumerate() {
            let field = format!("spec.egress[{i}]");
            egress.push(rule(&r.to, &r.ports, &field, "to", &mut problems));
        }
        if !problems.is_empty() {
            return Err(problems
                .into_iter()
                .map(|p| Issue::new(&object, p.field, p.message))
                .collect());
        }
        Ok(NetworkPolicy {
            namespace,
            name,
            pod_selector,
            ingress: ingress_on.then_some(ingress),
            egress: egress_on.then_some(egress),
        })
    }

    /// What stands in for a policy [`NetworkPolicy::from_wire`] refused, so that refusing
    /// never opens anything: the pods it would select (every pod of its namespace when its
    /// selector is unreadable) are isolated in its directions (both when unreadable), with no
    /// allows. `None` when it has no namespace to select pods in.
    pub fn fail_closed(w: &wire::NetworkPolicy) -> Option<NetworkPolicy> {
        let namespace = w.metadata.namespace.clone().filter(|n| !n.is_empty())?;
        let empty = wire::Spec::default();
        let spec = w.spec.as_ref().unwrap_or(&empty);
        let pod_selector = Selector::from_wire(
            spec.pod_selector.as_ref().unwrap_or(&Default::default()),
            "spec.podSelector",
        )
        .unwrap_or_default();
        let (ingress_on, egress_on) = policy_types(spec).unwrap_or((true, true));
        Some(NetworkPolicy {
            namespace,
            name: w
                .metadata
                .name
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "<unnamed>".into()),
            pod_selector,
            ingress: ingress_on.then(Vec::new),
            egress: egress_on.then(Vec::new),
        })
    }
}

fn object_name(w: &wire::NetworkPolicy) -> String {
    let ns = w.metadata.namespace.as_deref().unwrap_or("");
    let name = w.metadata.name.as_deref().unwrap_or("<unnamed>");
    if ns.is_empty() {
        format!("NetworkPolicy/{name}")
    } else {
        format!("NetworkPolicy/{ns}/{name}")
    }
}

/// Which directions the policy isolates: its `policyTypes`, or the API server's default.
fn policy_types(spec: &wire::Spec) -> Result<(bool, bool), Vec<Problem>> {
    let types = spec.policy_types.as_deref().unwrap_or(&[]);
    if types.is_empty() {
        let has_egress = spec.egress.as_ref().is_some_and(|e| !e.is_empty());
        return Ok((true, has_egress));
    }
    let mut problems = Vec::new();
    if types.len() > 2 {
        problems.push(Problem::new(
            "spec.policyTypes",
            "may not specify more than two policyTypes",
        ));
    }
    let (mut ingress, mut egress) = (false, false);
    for (i, t) in types.iter().enumerate() {
        match t.as_str() {
            "Ingress" => ingress = true,
            "Egress" => egress = true,
            other => problems.push(Problem::new(
                format!("spec.policyTypes[{i}]"),
                format!("{other:?} is not Ingress or Egress"),
            )),
        }
    }
    if problems.is_empty() {
        Ok((ingress, egress))
    } else {
        Err(problems)
    }
}

fn rule(
    peers: &Option<Vec<wire::Peer>>,
    ports: &Option<Vec<wire::Port>>,
    field: &str,
    peers_name: &str,
    problems: &mut Vec<Problem>,
) -> Rule {
    let peers = match peers.as_deref() {
        None | Some([]) => None,
        Some(list) => Some(
            list.iter()
                .enumerate()
                .filter_map(|(i, p)| peer(p, &format!("{field}.{peers_name}[{i}]"), problems))
                .collect(),
        ),
    };
    let ports = match ports.as_deref() {
        None | Some([]) => None,
        Some(list) => Some(
            list.iter()
                .enumerate()
                .filter_map(|(i, p)| port(p, &format!("{field}.ports[{i}]"), problems))
                .collect(),
        ),
    };
    Rule { peers, ports }
}

fn peer(p: &wire::Peer, field: &str, problems: &mut Vec<Problem>) -> Option<Peer> {
    let count = [
        p.pod_selector.is_some(),
        p.namespace_selector.is_some(),
        p.ip_block.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if count == 0 {
        problems.push(Problem::new(
            field,
            "must specify a peer (podSelector, namespaceSelector or ipBlock)",
        ));
        return None;
    }
    if let Some(block) = &p.ip_block {
        if count > 1 {
            problems.push(Problem::new(
                field,
                "may not specify both ipBlock and another peer",
            ));
            return None;
        }
        return ip_block(block, &format!("{field}.ipBlock"), problems).map(Peer::IpBlock);
    }
    let pods = match &p.pod_selector {
        None => Some(Selector::everything()),
        Some(s) => collect(
            Selector::from_wire(s, &format!("{field}.podSelector")),
            problems,
        ),
    };
    let namespaces = match &p.namespace_selector {
        None => Some(NamespaceScope::Own),
        Some(s) => collect(
            Selector::from_wire(s, &format!("{field}.namespaceSelector")),
            problems,
        )
        .map(NamespaceScope::Selected),
    };
    Some(Peer::Pods {
        namespaces: namespaces?,
        pods: pods?,
    })
}

fn collect<T>(r: Result<T, Vec<Problem>>, problems: &mut Vec<Problem>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(mut p) => {
            problems.append(&mut p);
            None
        }
    }
}

fn ip_block(b: &wire::IpBlock, field: &str, problems: &mut Vec<Problem>) -> Option<IpBlock> {
    let Some(text) = b.cidr.as_deref().filter(|t| !t.is_empty()) else {
        problems.push(Problem::new(format!("{field}.cidr"), "missing"));
        return None;
    };
    // The API server accepts host bits here ("10.0.0.1/24") and means the network.
    let cidr = match text.parse::<IpNet>() {
        Ok(net) => net.trunc(),
        Err(_) => {
            problems.push(Problem::new(
                format!("{field}.cidr"),
                format!("{text:?} is not a CIDR"),
            ));
            return None;
        }
    };
    let mut except = Vec::new();
    let mut ok = true;
    for (i, text) in b.except.iter().flatten().enumerate() {
        let f = format!("{field}.except[{i}]");
        match text.parse::<IpNet>() {
            Ok(net) => {
                let net = net.trunc();
                if !cidr.contains(&net) || net.prefix_len() <= cidr.prefix_len() {
                    problems.push(Problem::new(
                        f,
                        format!("{text} must be a strict subset of cidr {cidr}"),
                    ));
                    ok = false;
                } else {
                    except.push(net);
                }
            }
            Err(_) => {
                problems.push(Problem::new(f, format!("{text:?} is not a CIDR")));
                ok = false;
            }
        }
    }
    ok.then_some(IpBlock { cidr, except })
}

fn port(p: &wire::Port, field: &str, problems: &mut Vec<Problem>) -> Option<PortRule> {
    let protocol = match p.protocol.as_deref() {
        None => Protocol::Tcp,
        Some(text) => match Protocol::parse(text) {
            Some(proto) => proto,
            None => {
                problems.push(Problem::new(
                    format!("{field}.protocol"),
                    format!("{text:?} is not one of TCP, UDP, SCTP"),
                ));
                return None;
            }
        },
    };
    let valid_number = |n: i64, f: &str, problems: &mut Vec<Problem>| -> Option<u16> {
        match u16::try_from(n) {
            Ok(v) if v >= 1 => Some(v),
            _ => {
                problems.push(Problem::new(
                    f,
                    format!("{n} is not a port number (1 to 65535)"),
                ));
                None
            }
        }
    };
    let port_field = format!("{field}.port");
    let end_field = format!("{field}.endPort");
    let port = match (&p.port, p.end_port) {
        (None, None) => PortMatch::Any,
        (None, Some(_)) => {
            problems.push(Problem::new(end_field, "may not be specified without port"));
            return None;
        }
        (Some(wire::IntOrString::String(name)), end) => {
            if let Some(problem) = port_name_problem(name) {
                problems.push(Problem::new(
                    &port_field,
                    format!("not a valid port name: {problem}"),
                ));
                return None;
            }
            if end.is_some() {
                problems.push(Problem::new(
                    end_field,
                    "may not be specified when port is a name",
                ));
                return None;
            }
            PortMatch::Named(name.clone())
        }
        (Some(wire::IntOrString::Int(n)), end) => {
            let lo = valid_number(*n, &port_field, problems)?;
            let hi = match end {
                None => lo,
                Some(e) => {
                    let hi = valid_number(e, &end_field, problems)?;
                    if hi < lo {
                        problems.push(Problem::new(
                            end_field,
                            format!("{hi} must be greater than or equal to port {lo}"),
                        ));
                        return None;
                    }
                    hi
                }
            };
            PortMatch::Range(lo, hi)
        }
    };
    Some(PortRule { protocol, port })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<NetworkPolicy, Vec<Issue>> {
        let w: wire::NetworkPolicy = serde_yaml::from_str(yaml).unwrap();
        NetworkPolicy::from_wire(&w)
    }

    fn refused(yaml: &str) -> Vec<(String, String)> {
        parse(yaml)
            .unwrap_err()
            .into_iter()
            .map(|i| (i.field, i.message))
            .collect()
    }

    const HEAD: &str = "metadata: {name: p, namespace: x}\n";

    #[test]
    fn policy_types_default_from_the_rules() {
        let p = parse(&format!("{HEAD}spec: {{podSelector: {{}}}}")).unwrap();
        assert_eq!(p.ingress, Some(vec![]));
        assert_eq!(p.egress, None);
        // An empty egress list does not make an egress policy; one rule does.
        let p = parse(&format!("{HEAD}spec: {{podSelector: {{}}, egress: []}}")).unwrap();
        assert_eq!(p.egress, None);
        let p = parse(&format!(
            "{HEAD}spec: {{podSelector: {{}}, egress: [{{}}]}}"
        ))
        .unwrap();
        assert!(p.egress.is_some() && p.ingress.is_some());
        // Explicit types win, and rules of a direction not listed are ignored.
        let p = parse(&format!(
            "{HEAD}spec: {{podSelector: {{}}, policyTypes: [Egress], ingress: [{{}}]}}"
        ))
        .unwrap();
        assert_eq!(p.ingress, None);
        assert_eq!(p.egress, Some(vec![]));
        // A missing spec is the API's zero value: every pod, default-deny ingress.
        let p = parse(HEAD).unwrap();
        assert!(p.pod_selector.is_everything());
        assert_eq!(p.ingress, Some(vec![]));
    }

    #[test]
    fn empty_lists_mean_everything_and_the_empty_peer_is_refused() {
        let p = parse(&format!(
            "{HEAD}spec: {{podSelector: {{}}, ingress: [{{from: [], ports: []}}]}}"
        ))
        .unwrap();
        assert_eq!(
            p.ingress.unwrap()[0],
            Rule {
                peers: None,
                ports: None
            }
        );
        let r = refused(&format!(
            "{HEAD}spec: {{podSelector: {{}}, ingress: [{{from: [{{}}]}}]}}"
        ));
        assert_eq!(r[0].0, "spec.ingress[0].from[0]");
        assert!(r[0].1.contains("must specify a peer"));
    }

    #[test]
    fn peers_and_blocks() {
        let p = parse(&format!(
            "{HEAD}spec:\n  podSelector: {{}}\n  egress:\n  - to:\n    - podSelector: {{matchLabels: {{pod: a}}}}\n      namespaceSelector: {{}}\n    - podSelector: {{}}\n    - ipBlock: {{cidr: 10.0.0.7/8, except: [10.1.0.0/16]}}\n"
        ))
        .unwrap();
        let peers = p.egress.unwrap()[0].peers.clone().unwrap();
        assert!(matches!(
            &peers[0],
            Peer::Pods { namespaces: NamespaceScope::Selected(s), pods } if s.is_everything() && !pods.is_everything()
        ));
        assert!(matches!(
            &peers[1],
            Peer::Pods { namespaces: NamespaceScope::Own, pods } if pods.is_everything()
        ));
        // Host bits are accepted and mean the network, as the API server does.
        assert_eq!(
            peers[2],
            Peer::IpBlock(IpBlock {
                cidr: "10.0.0.0/8".parse().unwrap(),
                except: vec!["10.1.0.0/16".parse().unwrap()]
            })
        );
    }

    #[test]
    fn refusals_name_every_bad_field() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/8}, podSelector: {}}]}]",
                "spec.ingress[0].from[0]",
                "both ipBlock",
            ),
            (
                "ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/33}}]}]",
                "spec.ingress[0].from[0].ipBlock.cidr",
                "not a CIDR",
            ),
            (
                "ingress: [{from: [{ipBlock: {}}]}]",
                "spec.ingress[0].from[0].ipBlock.cidr",
                "missing",
            ),
            (
                "egress: [{to: [{ipBlock: {cidr: 10.0.0.0/8, except: [11.0.0.0/16]}}]}]",
                "spec.egress[0].to[0].ipBlock.except[0]",
                "strict subset",
            ),
            (
                "egress: [{to: [{ipBlock: {cidr: 10.0.0.0/8, except: [10.0.0.0/8]}}]}]",
                "spec.egress[0].to[0].ipBlock.except[0]",
                "strict subset",
            ),
            (
                "egress: [{to: [{ipBlock: {cidr: 10.0.0.0/8, except: ['fd00::/64']}}]}]",
                "spec.egress[0].to[0].ipBlock.except[0]",
                "strict subset",
            ),
            (
                "ingress: [{ports: [{endPort: 90}]}]",
                "spec.ingress[0].ports[0].endPort",
                "without port",
            ),
            (
                "ingress: [{ports: [{port: 90, endPort: 80}]}]",
                "spec.ingress[0].ports[0].endPort",
                "greater than or equal",
            ),
            (
                "ingress: [{ports: [{port: http, endPort: 80}]}]",
                "spec.ingress[0].ports[0].endPort",
                "is a name",
            ),
            (
                "ingress: [{ports: [{port: 0}]}]",
                "spec.ingress[0].ports[0].port",
                "not a port number",
            ),
            (
                "ingress: [{ports: [{port: 65536}]}]",
                "spec.ingress[0].ports[0].port",
                "not a port number",
            ),
            (
                "ingress: [{ports: [{port: 80, endPort: 70000}]}]",
                "spec.ingress[0].ports[0].endPort",
                "not a port number",
            ),
            (
                "ingress: [{ports: [{port: '80'}]}]",
                "spec.ingress[0].ports[0].port",
                "at least one letter",
            ),
            (
                "ingress: [{ports: [{protocol: tcp, port: 80}]}]",
                "spec.ingress[0].ports[0].protocol",
                "not one of",
            ),
            (
                "ingress: [{ports: [{protocol: ICMP}]}]",
                "spec.ingress[0].ports[0].protocol",
                "not one of",
            ),
            (
                "policyTypes: [Ingress, Sideways]",
                "spec.policyTypes[1]",
                "not Ingress or Egress",
            ),
            (
                "ingress: [{from: [{namespaceSelector: {matchExpressions: [{key: a, operator: In}]}}]}]",
                "spec.ingress[0].from[0].namespaceSelector.matchExpressions[0].values",
                "non-empty",
            ),
        ];
        for (spec, field, message) in cases {
            let r = refused(&format!("{HEAD}spec:\n  podSelector: {{}}\n  {spec}\n"));
            assert!(
                r.iter().any(|(f, m)| f == field && m.contains(message)),
                "{spec}: expected {field} / {message}, got {r:?}"
            );
        }
        let r = refused("spec: {}\n");
        assert!(r.iter().any(|(f, _)| f == "metadata.name"));
        assert!(r.iter().any(|(f, _)| f == "metadata.namespace"));
        let issue = parse(&format!("{HEAD}spec: {{policyTypes: [x]}}")).unwrap_err();
        assert_eq!(issue[0].object, "NetworkPolicy/x/p");
    }

    #[test]
    fn ports_parse_with_their_defaults() {
        let p = parse(&format!(
            "{HEAD}spec:\n  podSelector: {{}}\n  ingress: [{{ports: [{{port: 80}}, {{protocol: UDP}}, {{port: serve-81-tcp}}, {{protocol: SCTP, port: 1000, endPort: 2000}}]}}]\n"
        ))
        .unwrap();
        let ports = p.ingress.unwrap()[0].ports.clone().unwrap();
        assert_eq!(
            ports,
            vec![
                PortRule {
                    protocol: Protocol::Tcp,
                    port: PortMatch::Range(80, 80)
                },
                PortRule {
                    protocol: Protocol::Udp,
                    port: PortMatch::Any
                },
                PortRule {
                    protocol: Protocol::Tcp,
                    port: PortMatch::Named("serve-81-tcp".into())
                },
                PortRule {
                    protocol: Protocol::Sctp,
                    port: PortMatch::Range(1000, 2000)
                },
            ]
        );
    }

    #[test]
    fn a_refused_policy_still_isolates() {
        let w: wire::NetworkPolicy = serde_yaml::from_str(
            "metadata: {name: p, namespace: x}\nspec: {podSelector: {matchLabels: {pod: a}}, ingress: [{ports: [{port: 0}]}]}",
        )
        .unwrap();
        assert!(NetworkPolicy::from_wire(&w).is_err());
        let stand_in = NetworkPolicy::fail_closed(&w).unwrap();
        assert_eq!(stand_in.ingress, Some(vec![]));
        assert_eq!(stand_in.egress, None);
        assert!(!stand_in.pod_selector.is_everything());
        // An unreadable selector isolates the whole namespace, both ways when the types are
        // unreadable too.
        let w: wire::NetworkPolicy = serde_yaml::from_str(
            "metadata: {name: p, namespace: x}\nspec: {podSelector: {matchExpressions: [{key: a, operator: Is}]}, policyTypes: [Both]}",
        )
        .unwrap();
        let stand_in = NetworkPolicy::fail_closed(&w).unwrap();
        assert!(stand_in.pod_selector.is_everything());
        assert_eq!(
            (stand_in.ingress, stand_in.egress),
            (Some(vec![]), Some(vec![]))
        );
        let w: wire::NetworkPolicy = serde_yaml::from_str("metadata: {name: p}").unwrap();
        assert_eq!(NetworkPolicy::fail_closed(&w), None);
    }
}
