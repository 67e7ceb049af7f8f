//! What runs inside the test containers, and the TCP check between them: a busybox
//! `httpd` serving a known page, fetched with `wget` from another pod.

use crate::error::{unexpected, Result};
use crate::images::INDEX_HTML;
use crate::wait::{wait_for, Attempt};
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

pub const WEB_PORT: u16 = 8080;

/// How long a fetch may keep failing before the check gives up. Covers the server
/// container still starting; a broken network fails after this.
pub const FETCH_PATIENCE: Duration = Duration::from_secs(30);

/// Serves /var/www (holding [`INDEX_HTML`]) on [`WEB_PORT`], in the foreground.
pub fn web_server_command() -> Vec<String> {
    ["httpd", "-f", "-p", &WEB_PORT.to_string(), "-h", "/var/www"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Keeps a client container alive so commands can be exec'd in it.
pub const IDLE_COMMAND: &[&str] = &["sleep", "3600"];

/// `http://<ip>:8080/` (brackets for IPv6).
pub fn web_url(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => format!("http://{v4}:{WEB_PORT}/"),
        IpAddr::V6(v6) => format!("http://[{v6}]:{WEB_PORT}/"),
    }
}

/// Fetches the page from `ip`. busybox's own `wget -T` crashes (1.35 static), so
/// `timeout` bounds a fetch that hangs on a silently dropped SYN.
pub fn fetch_command(ip: IpAddr) -> Vec<String> {
    ["timeout", "5", "wget", "-q", "-O", "-", &web_url(ip)]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// One fetch attempt's outcome, from whichever runtime ran it.
#[derive(Debug, Clone)]
pub struct FetchOutcome {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `fetch` until it returns the served page, for at most [`FETCH_PATIENCE`].
/// The retries only cover the server still starting up: a network that never carries
/// the connection fails with the last error seen.
pub fn fetch_until_served(
    what: &str,
    mut fetch: impl FnMut() -> Result<FetchOutcome>,
) -> Result<String> {
    wait_for(what, FETCH_PATIENCE, || match fetch() {
        Ok(out) if out.exit_code == 0 && out.stdout == INDEX_HTML => Attempt::Ready(out.stdout),
        Ok(out) => Attempt::NotYet(format!(
            "exit {}, stdout {:?}, stderr {:?}",
            out.exit_code, out.stdout, out.stderr
        )),
        Err(e) => Attempt::NotYet(e.to_string()),
    })
}

/// Names of the veth interfaces in the network namespace at `netns`: on a simulated node,
/// the host sides of the pods' links.
pub fn veths_in(netns: &Path) -> Result<Vec<String>> {
    let out = crate::command::checked(
        weft_testkit::cmd_in(netns, "ip").args(["-o", "link", "show", "type", "veth"]),
    )?;
    out.stdout
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            // "7: vethabc@if2: <...> ..." -> "vethabc"
            line.split(": ")
                .nth(1)
                .map(|name| name.split('@').next().unwrap_or(name).to_string())
                .ok_or_else(|| unexpected("`ip -o link` line", line))
        })
        .collect()
}

/// The host-side peer of the pod's `ifname` veth: reads the peer's ifindex (`eth0@ifN`)
/// inside the pod namespace and finds interface N in the node namespace. Fails when the
/// peer is not in the node namespace (e.g. it was wrongly made in the root namespace).
pub fn host_peer_of(pod_netns: &Path, ifname: &str, node_netns: &Path) -> Result<String> {
    let pod_link = crate::command::checked(
        weft_testkit::cmd_in(pod_netns, "ip").args(["-o", "link", "show", ifname]),
    )?;
    let peer_index = pod_link
        .stdout
        .split_whitespace()
        .nth(1)
        .and_then(|name| name.split_once("@if"))
        .and_then(|(_, index)| index.trim_end_matches(':').parse::<u32>().ok())
        .ok_or_else(|| {
            unexpected(
                "pod interface",
                format!("no `@ifN` peer in {:?}", pod_link.stdout),
            )
        })?;
    let node_links = crate::command::checked(
        weft_testkit::cmd_in(node_netns, "ip").args(["-o", "link", "show"]),
    )?;
    node_links
        .stdout
        .lines()
        .find_map(|line| {
            let (index, rest) = line.split_once(": ")?;
            (index.trim().parse::<u32>().ok()? == peer_index)
                .then(|| rest.split([':', '@']).next().unwrap_or(rest).to_string())
        })
        .ok_or_else(|| {
            unexpected(
                "host side of the pod interface",
                format!(
                    "ifindex {peer_index} is not in the node namespace {}",
                    node_netns.display()
                ),
            )
        })
}

/// Whether an interface of that name exists in the namespace at `netns`.
pub fn link_exists(netns: &Path, name: &str) -> Result<bool> {
    let out = crate::command::output(
        weft_testkit::cmd_in(netns, "ip").args(["-o", "link", "show", "dev", name]),
    )?;
    Ok(out.success())
}
