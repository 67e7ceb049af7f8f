/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * Service load balancing: the maps the agent writes (through weft-datapath's `Services`)
 * and every program that translates a Service address reads: from_pod per packet today,
 * the cgroup socket programs and the north-south programs later.
 *
 *   weft_lb_fe     frontend (address, port, protocol, scope) -> its id, backend count,
 *                  slot generation, affinity, what to do with no backend
 *   weft_lb_slots  (frontend id, generation << 31 | index) -> backend id, index 1..count
 *                  for new flows, then count+1..count+draining for backends that keep
 *                  their connections but take no new ones; as many as a frontend needs
 *   weft_lb_be     backend id -> address, port, flags
 *   weft_lb_aff    (frontend id, client address) -> backend, last use (session affinity)
 *   weft_lb_addrs  every frontend address -> flags (a ClusterIP refuses unknown ports)
 *   weft_lb_cidrs  the node's service CIDRs (from configuration): an address in them
 *                  that no frontend has is dropped
 *
 * A frontend's backend set changes without a packet ever seeing half of it: the new set
 * is written under the other slot generation, then the frontend's value (a hash map
 * element, replaced as a whole) switches count and generation at once, then the old
 * generation's slots go. These maps do not preallocate, so a replaced or deleted element
 * is freed only after every program that could still see it has finished.
 */
#ifndef WEFT_MAPS_LB_H
#define WEFT_MAPS_LB_H

#include "maps/routes.h"
#include "weft_types.h"

enum weft_lb_layout {
	WEFT_LB_LAYOUT = 1,
	WEFT_LB_MAX_FRONTENDS = 65536,
	WEFT_LB_DEFAULT_SLOTS = 262144,
	WEFT_LB_DEFAULT_BACKENDS = 65536,
	WEFT_LB_DEFAULT_AFFINITY = 65536,
	WEFT_LB_MAX_CIDRS = 64,
	WEFT_LB_GENERATION_SHIFT = 31,
};

enum weft_lb_scope {
	WEFT_LB_SCOPE_INTERNAL = 0, /* traffic from pods and the node (ClusterIP) */
	WEFT_LB_SCOPE_EXTERNAL = 1, /* traffic from outside (NodePort, LB IPs; later) */
};

struct weft_lb_frontend_key {
	struct weft_ip ip;
	__be16 port;
	__u8 proto; /* IPPROTO_TCP or IPPROTO_UDP: the same port on each is another frontend */
	__u8 scope; /* enum weft_lb_scope */
};

enum weft_lb_frontend_flag {
	/* With count 0: the service has no endpoints at all: reject (TCP RST, ICMP unreachable). */
	WEFT_FE_NO_ENDPOINTS = 1 << 0,
	/* With count 0: it has endpoints but none usable from this node: drop. */
	WEFT_FE_NONE_USABLE = 1 << 1,
	/* New flows from a client address reuse its last backend (affinity_timeout). */
	WEFT_FE_AFFINITY = 1 << 2,
	/* A ClusterIP: its address refuses ports it does not serve. */
	WEFT_FE_CLUSTER_IP = 1 << 3,
};

struct weft_lb_frontend {
	__u32 id; /* stable while the frontend exists: connections and affinity refer to it */
	__u32 count; /* backends for new flows: slots 1..count */
	__u32 draining; /* backends keeping their connections: slots count+1..count+draining */
	__u32 affinity_timeout; /* seconds, with WEFT_FE_AFFINITY */
	__u16 flags; /* enum weft_lb_frontend_flag */
	__u8 generation; /* 0 or 1: the live slot generation */
	__u8 pad; /* always zero */
	__u32 maglev; /* reserved for a Maglev table (north-south); 0 = random choice */
	__u32 source_ranges; /* reserved for a source-range set (LB source ranges); 0 = any */
};

struct weft_lb_slot_key {
	__u32 frontend;
	__u32 slot; /* generation << WEFT_LB_GENERATION_SHIFT | index (from 1) */
};

struct weft_lb_slot {
	__u32 backend;
};

enum weft_lb_backend_flag {
	WEFT_BE_TERMINATING = 1 << 0, /* the endpoint is terminating (serving fallback) */
	WEFT_BE_LOCAL = 1 << 1, /* the endpoint is on this node */
};

struct weft_lb_backend {
	struct weft_ip ip;
	__be16 port;
	__u8 flags; /* enum weft_lb_backend_flag */
	__u8 pad; /* always zero */
};

struct weft_lb_affinity_key {
	__u32 frontend;
	struct weft_ip client;
};

struct weft_lb_affinity {
	__u64 last_used; /* bpf_ktime_get_ns() of the last new flow that used it */
	__u32 backend;
	__u32 pad; /* always zero */
};

enum weft_lb_addr_flag {
	WEFT_LB_ADDR_CLUSTER_IP = 1 << 0, /* a port or protocol it does not serve is refused */
};

struct weft_lb_addr {
	__u32 flags; /* enum weft_lb_addr_flag */
	__u32 frontends; /* how many frontends have this address */
};

struct weft_lb_cidr {
	__u32 flags; /* reserved, zero */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct weft_lb_frontend_key);
	__type(value, struct weft_lb_frontend);
	__uint(max_entries, WEFT_LB_MAX_FRONTENDS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} weft_lb_fe SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct weft_lb_slot_key);
	__type(value, struct weft_lb_slot);
	__uint(max_entries, WEFT_LB_DEFAULT_SLOTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} weft_lb_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct weft_lb_backend);
	__uint(max_entries, WEFT_LB_DEFAULT_BACKENDS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} weft_lb_be SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct weft_lb_affinity_key);
	__type(value, struct weft_lb_affinity);
	__uint(max_entries, WEFT_LB_DEFAULT_AFFINITY);
} weft_lb_aff SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct weft_ip);
	__type(value, struct weft_lb_addr);
	__uint(max_entries, WEFT_LB_MAX_FRONTENDS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} weft_lb_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct weft_route_key);
	__type(value, struct weft_lb_cidr);
	__uint(max_entries, WEFT_LB_MAX_CIDRS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} weft_lb_cidrs SEC(".maps");

struct weft_btf_lb {
	enum weft_lb_layout layout;
	enum weft_lb_scope scope;
	enum weft_lb_frontend_flag frontend_flag;
	enum weft_lb_backend_flag backend_flag;
	enum weft_lb_addr_flag addr_flag;
};
WEFT_BTF_ANCHOR(weft_btf_lb);

#endif /* WEFT_MAPS_LB_H */
