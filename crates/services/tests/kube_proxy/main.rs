//! kube-proxy's behaviour, transcribed as our own table-driven tests from the rules its
//! tests pin (see docs/services.md for the rule-to-test map). Each module is named after
//! the kube-proxy test it follows; `differences` holds the cases where weft deliberately
//! differs, each saying how and why.

mod fixture;

mod bad_ips;
mod categorize;
mod cluster_ip;
mod differences;
mod endpoints_map;
mod health_check;
mod load_balancer;
mod masquerade;
mod no_endpoints;
mod node_ports;
mod plan_diff;
mod service_map;
mod terminating;
mod traffic_policy;
mod validation;
mod wire_json;
