/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * The datapath's shared state: every map key, value and constant, declared once.
 *
 * This header is the single source of truth for the layout. The Rust crate
 * `weft-datapath` mirrors these types in `src/layout.rs`, and its layout test reads
 * the BTF of the compiled objects and fails when a size, a field offset or an enum
 * value disagrees. Change a type here, then make the test pass.
 *
 * All addresses are stored in network byte order. IPv4 addresses use the first
 * word of `addr` and leave the other three zero, so one key type serves both
 * families and a single lookup covers dual-stack pods.
 */
#ifndef WEFT_MAPS_H
#define WEFT_MAPS_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

enum weft_family {
	WEFT_FAMILY_IPV4 = 4,
	WEFT_FAMILY_IPV6 = 6,
};

/* Bits of family + padding that precede the address in an LPM key: route prefix
 * lengths are counted from the start of struct weft_ip, so they include these. */
enum weft_lpm {
	WEFT_LPM_FAMILY_BITS = 32,
};

enum weft_limits {
	WEFT_MAX_ENDPOINTS = 16384,
	WEFT_MAX_ROUTES = 65536,
};

/* A pod or node address, key of weft_endpoints and the data part of route keys. */
struct weft_ip {
	__u8 family; /* enum weft_family */
	__u8 pad[3]; /* always zero: it is part of the hashed key */
	__be32 addr[4];
};

/* weft_endpoints value: a pod on this node. */
struct weft_endpoint {
	__u32 ifindex; /* host-side veth, in the node's network namespace */
	__u8 mac[6]; /* the pod's eth0 MAC */
	__u16 flags; /* reserved, zero */
};

enum weft_route_kind {
	/* A pod CIDR of this node: a destination in it without an endpoint is dropped. */
	WEFT_ROUTE_LOCAL_CIDR = 1,
	/* A pod CIDR of another node: steer into the overlay towards vtep_mac. */
	WEFT_ROUTE_REMOTE_CIDR = 2,
	/* A VTEP address: traffic to it belongs to the node's kernel stack. */
	WEFT_ROUTE_HOST = 3,
};

/* weft_routes key: prefixlen counts WEFT_LPM_FAMILY_BITS plus the address bits. */
struct weft_route_key {
	__u32 prefixlen;
	struct weft_ip ip;
};

struct weft_route {
	__u32 kind; /* enum weft_route_kind */
	__u8 vtep_mac[6]; /* WEFT_ROUTE_REMOTE_CIDR: the remote node's VTEP MAC */
	__u16 flags; /* reserved, zero */
};

/* weft_config[0]: node-wide settings written by the agent. */
struct weft_config {
	__u32 vxlan_ifindex; /* weft.vxlan in the node namespace; 0 = overlay not set up */
	__u8 vtep_mac[6]; /* this node's VTEP MAC (weft.vxlan's address) */
	__u16 flags; /* reserved, zero */
};

/*
 * weft_counters index: what happened to each packet. Every drop has its own
 * reason so that a drop can always be explained.
 */
enum weft_counter {
	WEFT_CTR_LOCAL_DELIVERY = 0, /* pod -> pod on this node */
	WEFT_CTR_ENCAP = 1, /* pod -> remote pod, steered into the overlay */
	WEFT_CTR_DECAP_DELIVERY = 2, /* overlay -> pod on this node */
	WEFT_CTR_TO_KERNEL = 3, /* handed to the kernel unchanged (ARP, ND, node, world) */
	WEFT_CTR_MTU_FALLBACK = 4, /* too big for the overlay: the kernel route sends ICMP */
	WEFT_CTR_OVERLAY_FALLBACK = 5, /* overlay not configured/usable: kernel route instead */
	WEFT_CTR_DROP_SPOOFED_SOURCE = 6, /* pod sent from an address that is not its own */
	WEFT_CTR_DROP_UNKNOWN_LOCAL_DEST = 7, /* in this node's pod CIDR, but no such pod */
	WEFT_CTR_DROP_UNKNOWN_OVERLAY_SOURCE = 8, /* overlay packet from outside every remote CIDR */
	WEFT_CTR_DROP_MALFORMED = 9, /* truncated or inconsistent IP header */
	WEFT_CTR_MAX = 10,
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct weft_ip);
	__type(value, struct weft_endpoint);
	__uint(max_entries, WEFT_MAX_ENDPOINTS);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} weft_endpoints SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct weft_route_key);
	__type(value, struct weft_route);
	__uint(max_entries, WEFT_MAX_ROUTES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} weft_routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct weft_config);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} weft_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, WEFT_CTR_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} weft_counters SEC(".maps");

/*
 * clang only emits BTF for types something references, and the constants above are
 * only ever used as numbers. This never-loaded variable references every constant
 * enum so the layout test can read their values from BTF. Loaders skip the section.
 */
struct weft_btf_anchor {
	enum weft_family family;
	enum weft_lpm lpm;
	enum weft_limits limits;
	enum weft_route_kind route_kind;
	enum weft_counter counter;
};
static struct weft_btf_anchor weft_btf_anchor __attribute__((section(".weft.btf"), used));

#endif /* WEFT_MAPS_H */
