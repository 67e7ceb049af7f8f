//! The compiler: the cluster's policies, pods and namespaces to one node's tables.
//!
//! Identities: one per distinct (namespace, labels) of a live pod; every address of the
//! cluster maps to one (or to world, host or remote-node). Policy sets: endpoints of this
//! node selected by the same policies in a direction (and, for ingress, resolving those
//! policies' named ports to the same numbers) share one set id; each set owns allow entries
//! keyed by (set, peer, protocol, port) and CIDR entries keyed by (set, address) that map
//! an address to a class, a peer id standing for "what these address ranges are allowed".
//!
//! The compiler keeps its ids between runs, so a change moves only the entries it touches.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;

use ipnet::IpNet;
use weft_model::Issue;

use crate::cluster::Cluster;
use crate::ids::Allocator;
use crate::policy::{Direction, NamespaceScope, NetworkPolicy, Peer, PortMatch};
use crate::ports::{resolve, PortSel};
use crate::table::*;
use crate::view::{ContainerPort, Labels, NamespaceLabels, PodView, Protocol, SortedLabels};

/// What identifies a pod to policy. The named container ports are part of it so that an
/// egress rule's named port resolves per identity; pods of one template share them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct IdentityKey {
    namespace: String,
    labels: SortedLabels,
    ports: Vec<ContainerPort>,
}

/// Named ports of a set's policies resolved against its endpoints' container ports.
type NamedPorts = Vec<(String, Protocol, Vec<u16>)>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SetKey {
    direction: Direction,
    /// `namespace/name` of the selecting policies, sorted (names, not ids, so that a set's
    /// id can be recovered from the datapath after a restart).
    policies: Vec<String>,
    named: NamedPorts,
}

type ClassKey = Vec<(PortSel, Verdict)>;

/// The compiler of one node. Keep it for the life of the agent: its ids are stable.
#[derive(Debug, Clone)]
pub struct Compiler {
    identities: Allocator<IdentityKey>,
    sets: Allocator<SetKey>,
    classes: Allocator<ClassKey>,
    policies: Allocator<String>,
}

impl Default for Compiler {
    fn default() -> Self {
        Compiler::new()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    pub tables: NodeTables,
    /// Problems found in the cluster (an address held twice): reported, and failed closed.
    pub issues: Vec<Issue>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Pod(usize),
    Node(bool),
    Conflict,
}

/// Indexes over the cluster, built once per compilation.
struct Context<'c, 'a> {
    cluster: &'c Cluster<'a>,
    namespaces: HashMap<&'a str, &'a dyn Labels>,
    owners: HashMap<IpAddr, Owner>,
    /// Per pod: its identity key when it is live.
    keys: Vec<Option<IdentityKey>>,
    /// Per local endpoint (pod index): selecting policies per direction.
    local: Vec<(usize, [Vec<usize>; 2])>,
}

impl<'c, 'a> Context<'c, 'a> {
    fn new(cluster: &'c Cluster<'a>, node: &'c str) -> Context<'c, 'a> {
        let namespaces = cluster
            .namespaces
            .iter()
            .map(|n| (n.name, n.labels))
            .collect();
        let mut owners: HashMap<IpAddr, Owner> = HashMap::new();
        let mut claim = |addr: IpAddr, owner: Owner| {
            owners
                .entry(addr)
                .and_modify(|o| {
                    if *o != owner {
                        *o = Owner::Conflict
                    }
                })
                .or_insert(owner);
        };
        for n in &cluster.nodes {
            for a in n.addresses {
                claim(*a, Owner::Node(n.name == node));
            }
        }
        let mut keys = Vec::with_capacity(cluster.pods.len());
        for (i, p) in cluster.pods.iter().enumerate() {
            if !p.is_live() {
                keys.push(None);
                continue;
            }
            for a in p.ips {
                claim(*a, Owner::Pod(i));
            }
            let mut ports = p.ports.to_vec();
            ports.sort();
            ports.dedup();
            keys.push(Some(IdentityKey {
                namespace: p.namespace.to_string(),
                labels: SortedLabels::from_labels(p.labels),
                ports,
            }));
        }
        let mut by_namespace: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, p) in cluster.policies.iter().enumerate() {
            by_namespace
                .entry(p.namespace.as_str())
                .or_default()
                .push(i);
        }
        let mut local = Vec::new();
        for (i, p) in cluster.pods.iter().enumerate() {
            if !p.is_live() || p.node != node {
                continue;
            }
            let mut selecting: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
            for &pi in by_namespace.get(p.namespace).into_iter().flatten() {
                let policy = cluster.policies[pi];
                if !policy.pod_selector.matches(p.labels) {
                    continue;
                }
                if policy.ingress.is_some() {
                    selecting[0].push(pi);
                }
                if policy.egress.is_some() {
                    selecting[1].push(pi);
                }
            }
            local.push((i, selecting));
        }
        Context {
            cluster,
            namespaces,
            owners,
            keys,
            local,
        }
    }

    fn pod(&self, i: usize) -> &'c PodView<'a> {
        &self.cluster.pods[i]
    }

    /// The pod's addresses that identify it (held by nobody else).
    fn owned_ips(&self, i: usize) -> impl Iterator<Item = IpAddr> + '_ {
        self.pod(i)
            .ips
            .iter()
            .copied()
            .filter(move |a| self.owners.get(a) == Some(&Owner::Pod(i)))
    }

    fn set_key(&self, pod: usize, direction: Direction, policies: &[usize]) -> SetKey {
        let mut names: Vec<String> = policies
            .iter()
            .map(|&pi| self.cluster.policies[pi].key())
            .collect();
        names.sort();
        names.dedup();
        let mut named: NamedPorts = Vec::new();
        if direction == Direction::Ingress {
            let mut wanted: BTreeSet<(String, Protocol)> = BTreeSet::new();
            for &pi in policies {
                for rule in self.cluster.policies[pi].ingress.iter().flatten() {
                    for pr in rule.ports.iter().flatten() {
                        if let PortMatch::Named(n) = &pr.port {
                            wanted.insert((n.clone(), pr.protocol));
                        }
                    }
                }
            }
            for (name, protocol) in wanted {
                let ports = resolve_named(self.pod(pod).ports, &name, protocol);
                named.push((name, protocol, ports));
            }
        }
        SetKey {
            direction,
            policies: names,
            named,
        }
    }
}

/// The numbers a named port stands for on a pod: container ports with that name and
/// protocol (one, in a valid pod).
fn resolve_named(ports: &[ContainerPort], name: &str, protocol: Protocol) -> Vec<u16> {
    let mut ports: Vec<u16> = ports
        .iter()
        .filter(|cp| cp.name == name && cp.protocol == protocol)
        .map(|cp| cp.port)
        .collect();
    ports.sort();
    ports.dedup();
    ports
}

/// An `ipBlock` (or "every address") and what it allows.
struct Block {
    net: IpNet,
    except: Vec<IpNet>,
    sels: Vec<(PortSel, Verdict)>,
}

/// Everything one set allows, before it becomes entries.
#[derive(Default)]
struct SetRules {
    by_identity: BTreeMap<u32, Vec<(PortSel, Verdict)>>,
    blocks: Vec<Block>,
    /// Egress to a named port of an ipBlock: per destination pod address, resolved on
    /// that pod.
    by_address: Vec<(IpAddr, PortSel, Verdict)>,
}

impl Compiler {
    pub fn new() -> Compiler {
        Compiler {
            identities: Allocator::new(IDENTITY_FIRST_POD, CLASS_BIT - 1),
            sets: Allocator::new(1, u32::MAX),
            classes: Allocator::new(1, CLASS_BIT - 1),
            policies: Allocator::new(1, u32::MAX),
        }
    }

    /// After a restart: takes over the identity and set ids the datapath already holds (read
    /// back from its maps) for the pods and endpoints that still have the same keys, so the
    /// first compilation rewrites nothing that did not change.
    pub fn adopt(
        &mut self,
        cluster: &Cluster,
        node: &str,
        identities: &BTreeMap<IpKey, u32>,
        endpoints: &BTreeMap<IpKey, EndpointPolicy>,
    ) {
        let ctx = Context::new(cluster, node);
        for (i, key) in ctx.keys.iter().enumerate() {
            let Some(key) = key else { continue };
            for ip in ctx.owned_ips(i) {
                if let Some(id) = identities.get(&IpKey::from(ip)) {
                    if self.identities.adopt(key, *id) {
                        break;
                    }
                }
            }
        }
        for (pod, selecting) in &ctx.local {
            for (d, direction) in Direction::BOTH.into_iter().enumerate() {
                if selecting[d].is_empty() {
                    continue;
                }
                let key = ctx.set_key(*pod, direction, &selecting[d]);
                for ip in ctx.owned_ips(*pod) {
                    if let Some(ep) = endpoints.get(&IpKey::from(ip)) {
                        if ep.set(direction) != SET_NONE && self.sets.adopt(&key, ep.set(direction))
                        {
                            break;
                        }
                    }
                }
            }
        }
    }

    /// Compiles the tables of `node`.
    pub fn compile(&mut self, cluster: &Cluster, node: &str) -> Compiled {
        let ctx = Context::new(cluster, node);
        let mut issues = Vec::new();
        let mut t = NodeTables {
            node: node.to_string(),
            ..NodeTables::default()
        };

        let mut policy_ids = Vec::with_capacity(cluster.policies.len());
        for p in &cluster.policies {
            let key = p.key();
            let id = self.policies.id(&key).unwrap_or(u32::MAX);
            t.meta.policies.insert(id, key);
            policy_ids.push(id);
        }

        // Identities, and the address table.
        let mut pod_identity: Vec<Option<u32>> = vec![None; cluster.pods.len()];
        let mut identity_pods: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        let mut identity_keys: BTreeMap<u32, &IdentityKey> = BTreeMap::new();
        for (i, key) in ctx.keys.iter().enumerate() {
            let Some(key) = key else { continue };
            let pod = ctx.pod(i);
            // Pods without addresses matter only here, where the CNI ADD will need them.
            if pod.ips.is_empty() && pod.node != node {
                continue;
            }
            let Some(id) = self.identities.id(key) else {
                issues.push(Issue::new(
                    format!("Pod/{}", pod.key()),
                    "metadata.labels",
                    "no identity left to allocate; the pod matches no policy peer",
                ));
                continue;
            };
            pod_identity[i] = Some(id);
            identity_pods.entry(id).or_default().push(i);
            identity_keys.insert(id, key);
        }
        for (id, key) in &identity_keys {
            t.meta.identities.insert(
                *id,
                IdentityInfo {
                    namespace: key.namespace.clone(),
                    labels: key.labels.clone(),
                },
            );
        }
        let mut conflicts: BTreeSet<IpAddr> = BTreeSet::new();
        for (addr, owner) in &ctx.owners {
            let id = match owner {
                Owner::Pod(i) => match pod_identity[*i] {
                    Some(id) => id,
                    None => continue,
                },
                Owner::Node(true) => IDENTITY_HOST,
                Owner::Node(false) => IDENTITY_REMOTE_NODE,
                Owner::Conflict => {
                    conflicts.insert(*addr);
                    continue;
                }
            };
            t.identities.insert(IpKey::from(*addr), id);
        }
        for addr in &conflicts {
            issues.push(Issue::new(
                format!("address {addr}"),
                "status.podIPs",
                "held by more than one pod or node: it identifies nobody (world), and a local pod holding it is denied everything but its node",
            ));
        }

        // Local endpoints and their sets.
        let mut set_rules_needed: BTreeMap<u32, (SetKey, Vec<usize>)> = BTreeMap::new();
        for (pod, selecting) in &ctx.local {
            let p = ctx.pod(*pod);
            let mut value = EndpointPolicy {
                identity: pod_identity[*pod].unwrap_or(IDENTITY_WORLD),
                ..EndpointPolicy::default()
            };
            for (d, direction) in Direction::BOTH.into_iter().enumerate() {
                if selecting[d].is_empty() {
                    continue;
                }
                let key = ctx.set_key(*pod, direction, &selecting[d]);
                let Some(id) = self.sets.id(&key) else {
                    value.flags |= ENDPOINT_PENDING;
                    continue;
                };
                match direction {
                    Direction::Ingress => value.ingress_set = id,
                    Direction::Egress => value.egress_set = id,
                }
                set_rules_needed
                    .entry(id)
                    .or_insert_with(|| (key, selecting[d].clone()));
            }
            if pod_identity[*pod].is_none() {
                value.flags |= ENDPOINT_PENDING;
            }
            t.prepared.insert(p.key(), value);
            for ip in p.ips {
                let k = IpKey::from(*ip);
                if conflicts.contains(ip) {
                    t.endpoints.insert(k, EndpointPolicy::pending());
                } else {
                    t.endpoints.insert(k, value);
                }
                t.meta.endpoints.insert(k, p.key());
            }
        }

        let mut matched: HashMap<(usize, usize, usize, usize), Vec<u32>> = HashMap::new();
        for (set, (key, policies)) in &set_rules_needed {
            let mut ordered: Vec<usize> = policies.clone();
            ordered.sort_by_key(|&pi| policy_ids[pi]);
            let mut rules = SetRules::default();
            for pi in ordered {
                self.gather(
                    &ctx,
                    key,
                    pi,
                    policy_ids[pi],
                    &identity_keys,
                    &identity_pods,
                    &mut matched,
                    &mut rules,
                );
            }
            self.emit(*set, &rules, &mut t);
            t.meta.sets.insert(
                *set,
                SetInfo {
                    direction: key.direction,
                    policies: {
                        let mut ids: Vec<u32> = policies.iter().map(|&pi| policy_ids[pi]).collect();
                        ids.sort();
                        ids.dedup();
                        ids
                    },
                    named_ports: key.named.clone(),
                },
            );
        }

        self.identities.release_unused();
        self.sets.release_unused();
        self.classes.release_unused();
        self.policies.release_unused();
        Compiled { tables: t, issues }
    }

    /// Collects what one policy's rules in the set's direction allow.
    #[allow(clippy::too_many_arguments)]
    fn gather(
        &self,
        ctx: &Context,
        set: &SetKey,
        pi: usize,
        policy_id: u32,
        identity_keys: &BTreeMap<u32, &IdentityKey>,
        identity_pods: &BTreeMap<u32, Vec<usize>>,
        matched: &mut HashMap<(usize, usize, usize, usize), Vec<u32>>,
        out: &mut SetRules,
    ) {
        let policy = ctx.cluster.policies[pi];
        let direction = set.direction;
        let d = direction as usize;
        for (ri, rule) in policy.rules(direction).unwrap_or(&[]).iter().enumerate() {
            let verdict = Verdict::allow(policy_id, direction, ri);
            let mut sels: Vec<(PortSel, Verdict)> = Vec::new();
            let mut named_egress: Vec<(&str, Protocol)> = Vec::new();
            match &rule.ports {
                None => sels.push((PortSel::AnyProtocol, verdict)),
                Some(ports) => {
                    for pr in ports {
                        let p = pr.protocol.number();
                        match &pr.port {
                            PortMatch::Any => sels.push((PortSel::AnyPort(p), verdict)),
                            PortMatch::Range(lo, hi) => {
                                sels.push((PortSel::Range(p, *lo, *hi), verdict))
                            }
                            PortMatch::Named(name) => match direction {
                                Direction::Ingress => {
                                    let numbers = set
                                        .named
                                        .iter()
                                        .find(|(n, proto, _)| n == name && *proto == pr.protocol)
                                        .map(|(_, _, ports)| ports.as_slice())
                                        .unwrap_or(&[]);
                                    for port in numbers {
                                        sels.push((PortSel::Range(p, *port, *port), verdict));
                                    }
                                }
                                Direction::Egress => named_egress.push((name, pr.protocol)),
                            },
                        }
                    }
                }
            }
            // Egress to a named port: the destination's own number, per identity (the
            // ports are part of it), or per address for an ipBlock.
            let named_on = |id: u32, out: &mut SetRules| {
                let Some(key) = identity_keys.get(&id) else {
                    return;
                };
                for (name, protocol) in &named_egress {
                    for port in resolve_named(&key.ports, name, *protocol) {
                        out.by_identity
                            .entry(id)
                            .or_default()
                            .push((PortSel::Range(protocol.number(), port, port), verdict));
                    }
                }
            };
            match &rule.peers {
                None => {
                    for net in ["0.0.0.0/0", "::/0"] {
                        out.blocks.push(Block {
                            net: net.parse().expect("a literal CIDR"),
                            except: Vec::new(),
                            sels: sels.clone(),
                        });
                    }
                    if !named_egress.is_empty() {
                        for id in identity_keys.keys() {
                            named_on(*id, out);
                        }
                    }
                }
                Some(peers) => {
                    for (peer_index, peer) in peers.iter().enumerate() {
                        match peer {
                            Peer::Pods { namespaces, pods } => {
                                let ids = matched
                                    .entry((pi, d, ri, peer_index))
                                    .or_insert_with(|| {
                                        identity_keys
                                            .iter()
                                            .filter(|(_, key)| {
                                                peer_selects(ctx, policy, namespaces, pods, key)
                                            })
                                            .map(|(id, _)| *id)
                                            .collect()
                                    })
                                    .clone();
                                for id in ids {
                                    if !sels.is_empty() {
                                        out.by_identity.entry(id).or_default().extend(&sels);
                                    }
                                    named_on(id, out);
                                }
                            }
                            Peer::IpBlock(block) => {
                                out.blocks.push(Block {
                                    net: block.cidr,
                                    except: block.except.clone(),
                                    sels: sels.clone(),
                                });
                                if named_egress.is_empty() {
                                    continue;
                                }
                                for pods in identity_pods.values() {
                                    for &pod in pods {
                                        for (name, protocol) in &named_egress {
                                            let numbers =
                                                resolve_named(ctx.pod(pod).ports, name, *protocol);
                                            for ip in
                                                ctx.owned_ips(pod).filter(|ip| block.contains(*ip))
                                            {
                                                for port in &numbers {
                                                    out.by_address.push((
                                                        ip,
                                                        PortSel::Range(
                                                            protocol.number(),
                                                            *port,
                                                            *port,
                                                        ),
                                                        verdict,
                                                    ));
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Turns one set's rules into allow and CIDR entries.
    fn emit(&mut self, set: u32, rules: &SetRules, t: &mut NodeTables) {
        for (peer, sels) in &rules.by_identity {
            insert_port_entries(t, set, *peer, sels);
        }
        // Partition the address space: every prefix mentioned, each carrying everything
        // that applies to the addresses it is the longest match for.
        let mut prefixes: BTreeSet<IpNet> = BTreeSet::new();
        for b in &rules.blocks {
            prefixes.insert(b.net);
            prefixes.extend(b.except.iter().copied());
        }
        let mut by_host: HashMap<IpNet, Vec<(PortSel, Verdict)>> = HashMap::new();
        for (ip, sel, v) in &rules.by_address {
            by_host
                .entry(IpNet::from(*ip))
                .or_default()
                .push((*sel, *v));
            prefixes.insert(IpNet::from(*ip));
        }
        if prefixes.is_empty() {
            return;
        }
        let lengths: BTreeSet<(bool, u8)> = prefixes
            .iter()
            .map(|p| (matches!(p, IpNet::V4(_)), p.prefix_len()))
            .collect();
        let mut classes: HashMap<IpNet, ClassKey> = HashMap::new();
        for p in &prefixes {
            let mut content: ClassKey = Vec::new();
            for b in &rules.blocks {
                if b.net.contains(p) && !b.except.iter().any(|e| e.contains(p)) {
                    content.extend(&b.sels);
                }
            }
            if let Some(host) = by_host.get(p) {
                content.extend(host);
            }
            content.sort();
            content.dedup();
            classes.insert(*p, content);
        }
        let parent_of = |p: &IpNet| -> Option<IpNet> {
            let v4 = matches!(p, IpNet::V4(_));
            lengths
                .iter()
                .rev()
                .filter(|(f, len)| *f == v4 && *len < p.prefix_len())
                .find_map(|(_, len)| {
                    let candidate = IpNet::new(p.network(), *len).ok()?.trunc();
                    prefixes.contains(&candidate).then_some(candidate)
                })
        };
        let mut emitted: HashSet<u32> = HashSet::new();
        for p in &prefixes {
            let content = &classes[p];
            let redundant = match parent_of(p) {
                Some(parent) => classes[&parent] == *content,
                None => content.is_empty(),
            };
            if redundant {
                continue;
            }
            let class = if content.is_empty() {
                CLASS_NONE
            } else {
                match self.classes.id(content) {
                    Some(id) => id | CLASS_BIT,
                    // Out of class ids: leave the range without allows (fail closed).
                    None => CLASS_NONE,
                }
            };
            t.cidrs.insert(
                CidrKey {
                    prefixlen: CIDR_PREFIX_BASE + u32::from(p.prefix_len()),
                    set,
                    ip: IpKey::from(p.network()),
                },
                class,
            );
            if class != CLASS_NONE && emitted.insert(class) {
                insert_port_entries(t, set, class, content);
            }
        }
    }
}

fn insert_port_entries(t: &mut NodeTables, set: u32, peer: u32, sels: &[(PortSel, Verdict)]) {
    for (block, verdict) in resolve(sels) {
        t.allow.insert(
            AllowKey {
                prefixlen: block.prefixlen(),
                set,
                peer,
                protocol: block.protocol.unwrap_or(0),
                port: block.port,
            },
            verdict,
        );
    }
}

fn peer_selects(
    ctx: &Context,
    policy: &NetworkPolicy,
    namespaces: &NamespaceScope,
    pods: &crate::selector::Selector,
    key: &IdentityKey,
) -> bool {
    let namespace_ok = match namespaces {
        NamespaceScope::Own => key.namespace == policy.namespace,
        NamespaceScope::Selected(sel) => sel.matches(&NamespaceLabels {
            name: &key.namespace,
            labels: ctx.namespaces.get(key.namespace.as_str()).copied(),
        }),
    };
    namespace_ok && pods.matches(&key.labels)
}
