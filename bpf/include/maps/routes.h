/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/* weft_routes: what each prefix is to this node, written by the agent. */
#ifndef WEFT_MAPS_ROUTES_H
#define WEFT_MAPS_ROUTES_H

#include "weft_types.h"

enum weft_routes_layout {
	WEFT_ROUTES_LAYOUT = 1,
	WEFT_MAX_ROUTES = 65536,
};

enum weft_route_kind {
	/* A pod CIDR of this node: a destination in it without an endpoint is dropped. */
	WEFT_ROUTE_LOCAL_CIDR = 1,
	/* A pod CIDR of another node: steer into the overlay towards vtep_mac. */
	WEFT_ROUTE_REMOTE_CIDR = 2,
	/* A VTEP address of this node: traffic to it belongs to the node's kernel stack. */
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

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct weft_route_key);
	__type(value, struct weft_route);
	__uint(max_entries, WEFT_MAX_ROUTES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} weft_routes SEC(".maps");

struct weft_btf_routes {
	enum weft_routes_layout layout;
	enum weft_route_kind kind;
};
WEFT_BTF_ANCHOR(weft_btf_routes);

#endif /* WEFT_MAPS_ROUTES_H */
