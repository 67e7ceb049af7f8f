//! Service defaulting and allocation, following kube-apiserver's Service REST logic: IP
//! families from `ipFamilies`/`ipFamilyPolicy`/`clusterIPs` and the configured service
//! CIDRs, one cluster IP per family (`None` is headless), node ports for NodePort and
//! LoadBalancer Services, a health-check node port for `externalTrafficPolicy: Local`
//! LoadBalancers. On update, allocated values the client left out are kept (so `kubectl
//! apply` of a manifest without them works) and cluster IPs cannot change.

use ipnet::IpNet;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Mutex;

use super::{Admission, AdmitCtx};
use crate::allocators::{IpAllocator, PortAllocator};
use crate::error::{cause, ApiError, Cause};

pub struct ServiceAllocation {
    inner: Mutex<Allocators>,
}

struct Allocators {
    /// Primary family first.
    ips: Vec<IpAllocator>,
    ports: PortAllocator,
}

impl ServiceAllocation {
    pub fn new(cidrs: &[IpNet], node_ports: (u16, u16)) -> Self {
        ServiceAllocation {
            inner: Mutex::new(Allocators {
                ips: cidrs.iter().map(|c| IpAllocator::new(*c)).collect(),
                ports: PortAllocator::new(node_ports.0, node_ports.1),
            }),
        }
    }
}

fn family_of(ip: &IpAddr) -> &'static str {
    if ip.is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    }
}

fn invalid(obj: &Value, causes: Vec<Cause>) -> ApiError {
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    ApiError::invalid("", "Service", name, causes)
}

fn field_invalid(field: &str, value: impl std::fmt::Display, why: impl std::fmt::Display) -> Cause {
    cause(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {value}: {why}"),
    )
}

fn ty(obj: &Value) -> &str {
    obj["spec"]["type"].as_str().unwrap_or("ClusterIP")
}

/// The strings of a JSON list (anything else: none).
fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn needs_cluster_ip(obj: &Value) -> bool {
    ty(obj) != "ExternalName"
}

fn needs_node_ports(obj: &Value) -> bool {
    match ty(obj) {
        "NodePort" => true,
        "LoadBalancer" => obj["spec"]["allocateLoadBalancerNodePorts"] != json!(false),
        _ => false,
    }
}

fn needs_health_check(obj: &Value) -> bool {
    ty(obj) == "LoadBalancer" && obj["spec"]["externalTrafficPolicy"] == json!("Local")
}

/// The IPs and ports an object holds.
fn held(obj: Option<&Value>) -> (BTreeSet<IpAddr>, BTreeSet<u16>) {
    let mut ips = BTreeSet::new();
    let mut ports = BTreeSet::new();
    let Some(obj) = obj else {
        return (ips, ports);
    };
    if let Some(list) = obj["spec"]["clusterIPs"].as_array() {
        ips.extend(
            list.iter()
                .filter_map(|v| v.as_str()?.parse::<IpAddr>().ok()),
        );
    }
    if let Some(list) = obj["spec"]["ports"].as_array() {
        ports.extend(
            list.iter()
                .filter_map(|p| p["nodePort"].as_u64())
                .map(|p| p as u16),
        );
    }
    if let Some(p) = obj["spec"]["healthCheckNodePort"].as_u64() {
        ports.insert(p as u16);
    }
    (ips, ports)
}

fn spec_mut(obj: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !obj["spec"].is_object() {
        obj["spec"] = json!({});
    }
    obj["spec"]
        .as_object_mut()
        .expect("spec was just made an object")
}

fn defaults(obj: &mut Value) {
    let spec = spec_mut(obj);
    spec.entry("type").or_insert(json!("ClusterIP"));
    spec.entry("sessionAffinity").or_insert(json!("None"));
    let ty = spec["type"].as_str().unwrap_or("").to_string();
    if ty != "ExternalName" {
        spec.entry("internalTrafficPolicy")
            .or_insert(json!("Cluster"));
    }
    if ty == "NodePort" || ty == "LoadBalancer" {
        spec.entry("externalTrafficPolicy")
            .or_insert(json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        spec.entry("allocateLoadBalancerNodePorts")
            .or_insert(json!(true));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.entry("protocol").or_insert(json!("TCP"));
            if let Some(port) = p.get("port").cloned() {
                p.entry("targetPort").or_insert(port);
            }
        }
    }
    if !obj["status"].is_object() {
        obj["status"] = json!({"loadBalancer": {}});
    }
}

/// A created Service's status is the server's, not the client's.
fn reset_status(obj: &mut Value) {
    obj["status"] = json!({"loadBalancer": {}});
}

impl Allocators {
    fn families(&self) -> Vec<&'static str> {
        self.ips
            .iter()
            .map(|a| if a.is_v4() { "IPv4" } else { "IPv6" })
            .collect()
    }

    fn allocator(&mut self, family: &str) -> Option<&mut IpAllocator> {
        self.ips
            .iter_mut()
            .find(|a| (family == "IPv4") == a.is_v4())
    }

    /// Resolves `ipFamilyPolicy`, `ipFamilies` and `clusterIPs` (request values, not yet
    /// allocated), as `initIPFamilyFields` does.
    fn resolve_families(&self, obj: &mut Value, old: Option<&Value>) -> Result<(), Vec<Cause>> {
        let cluster = self.families();
        let spec = spec_mut(obj);
        let cluster_ip = spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut ips: Vec<String> = strings(spec.get("clusterIPs"));
        if ips.is_empty() && !cluster_ip.is_empty() {
            ips.push(cluster_ip.clone());
        }
        if !cluster_ip.is_empty() && ips.first() != Some(&cluster_ip) {
            return Err(vec![field_invalid(
                "spec.clusterIPs[0]",
                format!("{:?}", ips.first().cloned().unwrap_or_default()),
                "must be equal to clusterIP",
            )]);
        }
        let headless = ips.first().is_some_and(|i| i == "None");
        let mut families: Vec<String> = strings(spec.get("ipFamilies"));
        let mut causes = Vec::new();
        for (i, ip) in ips.iter().enumerate() {
            if ip == "None" {
                continue;
            }
            match ip.parse::<IpAddr>() {
                Ok(addr) => {
                    let fam = family_of(&addr).to_string();
                    match families.get(i) {
                        Some(f) if *f != fam => causes.push(field_invalid(
                            &format!("spec.clusterIPs[{i}]"),
                            format!("{ip:?}"),
                            format!("expected an IP of family {f}"),
                        )),
                        Some(_) => {}
                        None => families.push(fam),
                    }
                }
                Err(_) => causes.push(field_invalid(
                    &format!("spec.clusterIPs[{i}]"),
                    format!("{ip:?}"),
                    "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                )),
            }
        }
        if !causes.is_empty() {
            return Err(causes);
        }
        let selectorless = spec
            .get("selector")
            .is_none_or(|s| s.as_object().is_none_or(|m| m.is_empty()));
        let mut policy = spec
            .get("ipFamilyPolicy")
            .and_then(Value::as_str)
            .map(str::to_string);
        if policy.is_none() {
            if families.len() == 2
                || ips.len() == 2
                || (headless && selectorless && cluster.len() == 2)
            {
                policy = Some("RequireDualStack".into());
            } else if let Some(old_policy) = old.and_then(|o| o["spec"]["ipFamilyPolicy"].as_str())
            {
                policy = Some(old_policy.to_string());
            }
        }
        let policy = policy.unwrap_or_else(|| "SingleStack".into());
        if !["SingleStack", "PreferDualStack", "RequireDualStack"].contains(&policy.as_str()) {
            return Err(vec![cause(
                "FieldValueNotSupported",
                "spec.ipFamilyPolicy",
                format!("Unsupported value: {policy:?}: supported values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\""),
            )]);
        }
        if policy == "RequireDualStack" && cluster.len() < 2 {
            return Err(vec![field_invalid(
                "spec.ipFamilyPolicy",
                "\"RequireDualStack\"",
                "this cluster is not configured for dual-stack services",
            )]);
        }
        if policy == "SingleStack" && families.len() > 1 {
            return Err(vec![field_invalid(
                "spec.ipFamilyPolicy",
                "\"SingleStack\"",
                "must be RequireDualStack or PreferDualStack when multiple IP families are specified",
            )]);
        }
        if families.is_empty() {
            if let Some(old_fams) = old.and_then(|o| o["spec"]["ipFamilies"].as_array()) {
                families.extend(
                    old_fams
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .take(1),
                );
            }
        }
        if families.is_empty() {
            families.push(cluster[0].to_string());
        }
        if policy != "SingleStack" && families.len() == 1 && cluster.len() == 2 {
            let other = if families[0] == "IPv4" {
                "IPv6"
            } else {
                "IPv4"
            };
            families.push(other.to_string());
        }
        for (i, f) in families.iter().enumerate() {
            if f != "IPv4" && f != "IPv6" {
                causes.push(cause(
                    "FieldValueNotSupported",
                    &format!("spec.ipFamilies[{i}]"),
                    format!("Unsupported value: {f:?}: supported values: \"IPv4\", \"IPv6\""),
                ));
            } else if !cluster.contains(&f.as_str()) {
                causes.push(field_invalid(
                    &format!("spec.ipFamilies[{i}]"),
                    format!("{f:?}"),
                    "not configured on this cluster",
                ));
            }
        }
        if families.len() == 2 && families[0] == families[1] {
            causes.push(cause(
                "FieldValueDuplicate",
                "spec.ipFamilies[1]",
                format!("Duplicate value: {:?}", families[1]),
            ));
        }
        if families.len() > 2 {
            causes.push(cause(
                "FieldValueInvalid",
                "spec.ipFamilies",
                "may specify no more than one IP for each IP family",
            ));
        }
        if !causes.is_empty() {
            return Err(causes);
        }
        spec.insert("ipFamilyPolicy".into(), json!(policy));
        spec.insert("ipFamilies".into(), json!(families));
        if headless {
            spec.insert("clusterIP".into(), json!("None"));
            spec.insert("clusterIPs".into(), json!(["None"]));
        } else {
            ips.truncate(families.len());
            spec.insert("clusterIPs".into(), json!(ips));
        }
        Ok(())
    }

    /// Fills every missing cluster IP and node port of `obj`, reserving the requested ones
    /// that `old` did not already hold. On error, everything reserved here is released.
    fn allocate(&mut self, obj: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
        let (old_ips, old_ports) = held(old);
        let mut got_ips: Vec<IpAddr> = Vec::new();
        let mut got_ports: Vec<u16> = Vec::new();
        let result = self.allocate_inner(obj, &old_ips, &old_ports, &mut got_ips, &mut got_ports);
        if result.is_err() {
            for ip in got_ips {
                if let Some(a) = self.allocator(family_of(&ip)) {
                    a.release(ip);
                }
            }
            for p in got_ports {
                self.ports.release(p);
            }
        }
        result
    }

    fn allocate_inner(
        &mut self,
        obj: &mut Value,
        old_ips: &BTreeSet<IpAddr>,
        old_ports: &BTreeSet<u16>,
        got_ips: &mut Vec<IpAddr>,
        got_ports: &mut Vec<u16>,
    ) -> Result<(), ApiError> {
        let snapshot = obj.clone();
        if needs_cluster_ip(obj) {
            let families: Vec<String> = strings(Some(&obj["spec"]["ipFamilies"]));
            let requested: Vec<String> = strings(Some(&obj["spec"]["clusterIPs"]));
            if requested.first().map(String::as_str) != Some("None") {
                let mut ips = Vec::new();
                for (i, fam) in families.iter().enumerate() {
                    let alloc = self
                        .allocator(fam)
                        .ok_or_else(|| ApiError::internal(format!("no allocator for {fam}")))?;
                    let ip = match requested.get(i).filter(|s| !s.is_empty()) {
                        Some(s) => {
                            let ip: IpAddr = s.parse().map_err(|_| {
                                invalid(
                                    &snapshot,
                                    vec![field_invalid(
                                        "spec.clusterIPs",
                                        format!("[]string{{{s:?}}}"),
                                        "must be a valid IP",
                                    )],
                                )
                            })?;
                            if !old_ips.contains(&ip) {
                                alloc.reserve(ip).map_err(|e| {
                                    invalid(
                                        &snapshot,
                                        vec![field_invalid(
                                            "spec.clusterIPs",
                                            format!("[]string{{{s:?}}}"),
                                            format!("failed to allocate IP {ip}: {e}"),
                                        )],
                                    )
                                })?;
                                got_ips.push(ip);
                            }
                            ip
                        }
                        None => {
                            let ip = alloc.allocate().map_err(|e| {
                                ApiError::internal(format!(
                                    "Internal error occurred: failed to allocate a serviceIP: {e}"
                                ))
                            })?;
                            got_ips.push(ip);
                            ip
                        }
                    };
                    ips.push(ip.to_string());
                }
                let spec = spec_mut(obj);
                spec.insert("clusterIP".into(), json!(ips[0]));
                spec.insert("clusterIPs".into(), json!(ips));
            }
        }
        let wants_ports = needs_node_ports(obj);
        let is_lb = ty(obj) == "LoadBalancer";
        let mut causes = Vec::new();
        if let Some(ports) = obj["spec"]["ports"].as_array_mut() {
            // One node port may serve several protocols of the same Service.
            let mut mine: Vec<u16> = Vec::new();
            for (i, p) in ports.iter_mut().enumerate() {
                let requested = p["nodePort"].as_u64().filter(|n| *n != 0);
                match requested {
                    Some(n) if !wants_ports && !is_lb => {
                        causes.push(cause(
                            "FieldValueForbidden",
                            &format!("spec.ports[{i}].nodePort"),
                            format!(
                                "Forbidden: may not be used when `type` is '{}'",
                                ty(&snapshot)
                            ),
                        ));
                        let _ = n;
                    }
                    Some(n) => {
                        let n = n.min(u64::from(u16::MAX)) as u16;
                        if !old_ports.contains(&n) && !mine.contains(&n) {
                            match self.ports.reserve(n) {
                                Ok(()) => got_ports.push(n),
                                Err(e) => causes.push(field_invalid(
                                    &format!("spec.ports[{i}].nodePort"),
                                    n,
                                    e,
                                )),
                            }
                        }
                        mine.push(n);
                    }
                    None if wants_ports => {
                        let n = self.ports.allocate().map_err(|e| {
                            ApiError::internal(format!(
                                "Internal error occurred: failed to allocate a nodePort: {e}"
                            ))
                        })?;
                        got_ports.push(n);
                        mine.push(n);
                        p["nodePort"] = json!(n);
                    }
                    None => {}
                }
            }
        }
        if !causes.is_empty() {
            return Err(invalid(&snapshot, causes));
        }
        if needs_health_check(obj) {
            match obj["spec"]["healthCheckNodePort"]
                .as_u64()
                .filter(|n| *n != 0)
            {
                Some(n) => {
                    let n = n.min(u64::from(u16::MAX)) as u16;
                    if !old_ports.contains(&n) {
                        self.ports.reserve(n).map_err(|e| {
                            invalid(
                                &snapshot,
                                vec![field_invalid("spec.healthCheckNodePort", n, e)],
                            )
                        })?;
                        got_ports.push(n);
                    }
                }
                None => {
                    let n = self.ports.allocate().map_err(|e| {
                        ApiError::internal(format!(
                            "Internal error occurred: failed to allocate a nodePort: {e}"
                        ))
                    })?;
                    got_ports.push(n);
                    spec_mut(obj).insert("healthCheckNodePort".into(), json!(n));
                }
            }
        }
        Ok(())
    }

    fn release(
        &mut self,
        ips: impl IntoIterator<Item = IpAddr>,
        ports: impl IntoIterator<Item = u16>,
    ) {
        for ip in ips {
            if let Some(a) = self.allocator(family_of(&ip)) {
                a.release(ip);
            }
        }
        for p in ports {
            self.ports.release(p);
        }
    }
}

/// `patchAllocatedValues`: what an update leaves out but the Service already holds.
fn keep_allocated(old: &Value, new: &mut Value) {
    if needs_cluster_ip(old) && needs_cluster_ip(new) {
        let spec = spec_mut(new);
        let empty = |v: Option<&Value>| {
            v.is_none_or(|v| {
                v.as_str() == Some("") || v.is_null() || v.as_array().is_some_and(|a| a.is_empty())
            })
        };
        if empty(spec.get("clusterIP")) && empty(spec.get("clusterIPs")) {
            spec.insert("clusterIP".into(), old["spec"]["clusterIP"].clone());
            spec.insert("clusterIPs".into(), old["spec"]["clusterIPs"].clone());
        }
    }
    if needs_node_ports(old) && needs_node_ports(new) {
        let by_name: Vec<(String, u64)> = old["spec"]["ports"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| {
                        Some((
                            p["name"].as_str().unwrap_or("").to_string(),
                            p["nodePort"].as_u64()?,
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let used: BTreeSet<u64> = new["spec"]["ports"]
            .as_array()
            .map(|a| a.iter().filter_map(|p| p["nodePort"].as_u64()).collect())
            .unwrap_or_default();
        if let Some(ports) = new["spec"]["ports"].as_array_mut() {
            for p in ports.iter_mut().filter(|p| p.is_object()) {
                if p["nodePort"].as_u64().unwrap_or(0) == 0 {
                    let name = p["name"].as_str().unwrap_or("").to_string();
                    if let Some((_, n)) = by_name.iter().find(|(nm, _)| *nm == name) {
                        if !used.contains(n) {
                            p["nodePort"] = json!(n);
                        }
                    }
                }
            }
        }
    }
    if needs_health_check(old)
        && needs_health_check(new)
        && new["spec"]["healthCheckNodePort"].as_u64().unwrap_or(0) == 0
    {
        let hc = old["spec"]["healthCheckNodePort"].clone();
        spec_mut(new).insert("healthCheckNodePort".into(), hc);
    }
}

impl Admission for ServiceAllocation {
    fn create(&self, _ctx: &AdmitCtx, obj: &mut Value) -> Result<(), ApiError> {
        reset_status(obj);
        defaults(obj);
        let mut a = self
            .inner
            .lock()
            .map_err(|_| ApiError::internal("allocator lock poisoned"))?;
        if needs_cluster_ip(obj) {
            a.resolve_families(obj, None).map_err(|c| invalid(obj, c))?;
        }
        a.allocate(obj, None)
    }

    fn update(&self, _ctx: &AdmitCtx, old: &Value, new: &mut Value) -> Result<(), ApiError> {
        defaults(new);
        keep_allocated(old, new);
        let mut a = self
            .inner
            .lock()
            .map_err(|_| ApiError::internal("allocator lock poisoned"))?;
        if needs_cluster_ip(new) {
            a.resolve_families(new, Some(old))
                .map_err(|c| invalid(new, c))?;
            let old_ips = old["spec"]["clusterIPs"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let new_ips = new["spec"]["clusterIPs"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if needs_cluster_ip(old) {
                if let (Some(o), Some(n)) = (old_ips.first(), new_ips.first()) {
                    if o != n {
                        return Err(invalid(
                            new,
                            vec![field_invalid(
                                "spec.clusterIPs[0]",
                                n,
                                "may not change once set",
                            )],
                        ));
                    }
                }
            }
            // A dual-stack downgrade drops the secondary IP; an upgrade allocates one.
            let families = new["spec"]["ipFamilies"]
                .as_array()
                .map(Vec::len)
                .unwrap_or(1);
            if let Some(list) = new["spec"]["clusterIPs"].as_array_mut() {
                list.truncate(families);
            }
        }
        a.allocate(new, Some(old))
    }

    fn settle(&self, old: Option<&Value>, new: Option<&Value>, committed: bool) {
        let (old_ips, old_ports) = held(old);
        let (new_ips, new_ports) = held(new);
        let Ok(mut a) = self.inner.lock() else {
            return;
        };
        if committed {
            a.release(
                old_ips.difference(&new_ips).copied(),
                old_ports.difference(&new_ports).copied(),
            );
        } else {
            a.release(
                new_ips.difference(&old_ips).copied(),
                new_ports.difference(&old_ports).copied(),
            );
        }
    }
}
