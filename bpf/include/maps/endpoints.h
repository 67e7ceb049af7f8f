/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/* weft_endpoints: the pods on this node, written by the CNI plugin (ADD/DEL). */
#ifndef WEFT_MAPS_ENDPOINTS_H
#define WEFT_MAPS_ENDPOINTS_H

#include "weft_types.h"

enum weft_endpoints_layout {
	WEFT_ENDPOINTS_LAYOUT = 1,
	WEFT_MAX_ENDPOINTS = 16384,
};

/* weft_endpoints value: a pod on this node, keyed by each of its addresses. */
struct weft_endpoint {
	__u32 ifindex; /* host-side veth, in the node's network namespace */
	__u8 mac[6]; /* the pod's eth0 MAC */
	__u16 flags; /* reserved, zero */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct weft_ip);
	__type(value, struct weft_endpoint);
	__uint(max_entries, WEFT_MAX_ENDPOINTS);
} weft_endpoints SEC(".maps");

struct weft_btf_endpoints {
	enum weft_endpoints_layout layout;
};
WEFT_BTF_ANCHOR(weft_btf_endpoints);

#endif /* WEFT_MAPS_ENDPOINTS_H */
