//! The datapath of weft's first release (layout v0), installed the way that release did
//! it: its own objects (`bpf/tests/legacy_v0/`, compiled by build.rs for tests only),
//! loaded by aya with `LIBBPF_PIN_BY_NAME` maps under `maps/` (no version in the names),
//! programs pinned under `progs/`, pinned TCX ingress links under `links/pods/` and
//! `links/overlay/`, and the maps filled as that release's agent and plugin filled them.
//! Nothing here goes through today's `weft-datapath` code paths.

use super::cluster::ClusterNode;
use super::in_netns;
use aya::maps::lpm_trie::Key;
use aya::maps::{Array, HashMap, LpmTrie, Map, MapData};
use aya::programs::links::FdLink;
use aya::programs::tc::{TcAttachOptions, TcAttachType};
use aya::programs::{LinkOrder, SchedClassifier};
use aya::EbpfLoader;
use std::net::IpAddr;
use std::path::Path;
use weft_datapath::layout::{ConfigValue, EndpointValue, IpKey, RouteValue};
use weft_datapath::RouteKind;

#[repr(C, align(8))]
pub struct Aligned<B: ?Sized> {
    bytes: B,
}

static FROM_POD: &Aligned<[u8]> = &Aligned {
    bytes: *include_bytes!(concat!(env!("OUT_DIR"), "/tests/legacy_v0/from_pod.bpf.o")),
};
static FROM_OVERLAY: &Aligned<[u8]> = &Aligned {
    bytes: *include_bytes!(concat!(
        env!("OUT_DIR"),
        "/tests/legacy_v0/from_overlay.bpf.o"
    )),
};

/// The legacy objects, by program name.
pub const OBJECTS: [(&str, &Aligned<[u8]>); 2] =
    [("from_pod", FROM_POD), ("from_overlay", FROM_OVERLAY)];

pub fn object(name: &str) -> &'static [u8] {
    let (_, obj) = OBJECTS
        .iter()
        .find(|(n, _)| *n == name)
        .expect("a legacy program");
    &obj.bytes
}

/// The pin names layout v0 used for its maps.
pub const MAP_PINS: [&str; 4] = [
    "weft_endpoints",
    "weft_routes",
    "weft_config",
    "weft_counters",
];

pub fn ip_key(ip: IpAddr) -> IpKey {
    let mut key = IpKey::default();
    match ip {
        IpAddr::V4(v4) => {
            key.family = 4;
            key.addr[..4].copy_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            key.family = 6;
            key.addr = v6.octets();
        }
    }
    key
}

fn route_value(kind: RouteKind) -> RouteValue {
    let (kind, vtep_mac) = match kind {
        RouteKind::LocalCidr => (1, [0; 6]),
        RouteKind::RemoteCidr { vtep_mac } => (2, vtep_mac),
        RouteKind::Host => (3, [0; 6]),
        #[allow(unreachable_patterns)]
        _ => panic!("layout v0 had no route kind {kind:?}"),
    };
    RouteValue {
        kind,
        vtep_mac,
        flags: 0,
    }
}

fn open(path: &Path) -> Map {
    let data = MapData::from_pin(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Map::from_map_data(data).expect("map")
}

/// Installs layout v0 on `node` (whose peer is `peer`) and fills it: endpoints of every
/// pod, routes, config, the overlay link and one link per pod.
pub fn install(node: &ClusterNode, peer: &ClusterNode) {
    let root = node.root.path().to_path_buf();
    let routes = node.routes(peer);
    let endpoints = node.endpoints();
    let vxlan = node.vxlan.clone();
    let vtep_mac = node.vtep_mac();
    let hosts: Vec<String> = node.pods.iter().map(|p| p.host_veth.clone()).collect();
    in_netns(node.ns.path(), move || {
        let maps = root.join("maps");
        for dir in ["maps", "progs", "links/pods", "links/overlay"] {
            std::fs::create_dir_all(root.join(dir)).expect("pin dirs");
        }
        let mut loaded = Vec::new();
        for (name, _) in OBJECTS {
            let mut ebpf = EbpfLoader::new()
                .default_map_pin_directory(&maps)
                .load(object(name))
                .expect("load legacy object");
            let prog: &mut SchedClassifier = ebpf
                .program_mut(name)
                .expect("legacy program")
                .try_into()
                .expect("classifier");
            prog.load().expect("verify legacy program");
            prog.pin(root.join("progs").join(name))
                .expect("pin program");
            loaded.push(ebpf);
        }
        let mut endpoint_map: HashMap<_, IpKey, EndpointValue> =
            HashMap::try_from(open(&maps.join("weft_endpoints"))).expect("endpoints");
        for (addr, info) in endpoints {
            let value = EndpointValue {
                ifindex: info.ifindex,
                mac: info.mac,
                flags: 0,
            };
            endpoint_map
                .insert(ip_key(addr), value, 0)
                .expect("endpoint");
        }
        let mut route_map: LpmTrie<_, IpKey, RouteValue> =
            LpmTrie::try_from(open(&maps.join("weft_routes"))).expect("routes");
        for (net, kind) in routes {
            let key = Key::new(32 + u32::from(net.prefix_len()), ip_key(net.network()));
            route_map.insert(&key, route_value(kind), 0).expect("route");
        }
        let mut config: Array<_, ConfigValue> =
            Array::try_from(open(&maps.join("weft_config"))).expect("config");
        let config_value = ConfigValue {
            vxlan_ifindex: super::ifindex(&vxlan),
            vtep_mac,
            flags: 0,
        };
        config.set(0, config_value, 0).expect("config");

        let attach = |ebpf: &mut aya::Ebpf, name: &str, dev: &str, pin: &Path| {
            let prog: &mut SchedClassifier = ebpf
                .program_mut(name)
                .expect("program")
                .try_into()
                .expect("classifier");
            let id = prog
                .attach_with_options(
                    dev,
                    TcAttachType::Ingress,
                    TcAttachOptions::TcxOrder(LinkOrder::default()),
                )
                .expect("TCX attach");
            let link = FdLink::try_from(prog.take_link(id).expect("link")).expect("fd link");
            link.pin(pin).expect("pin link");
        };
        let (pod_obj, overlay_obj) = loaded.split_at_mut(1);
        attach(
            &mut overlay_obj[0],
            "from_overlay",
            &vxlan,
            &root.join("links/overlay").join(&vxlan),
        );
        for host in hosts {
            attach(
                &mut pod_obj[0],
                "from_pod",
                &host,
                &root.join("links/pods").join(&host),
            );
        }
    });
}
