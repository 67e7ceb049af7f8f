/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/* weft_config[0]: node-wide settings written by the agent. */
#ifndef WEFT_MAPS_CONFIG_H
#define WEFT_MAPS_CONFIG_H

#include "weft_types.h"

enum weft_config_layout {
	WEFT_CONFIG_LAYOUT = 1,
};

struct weft_config {
	__u32 vxlan_ifindex; /* weft.vxlan in the node namespace; 0 = overlay not set up */
	__u8 vtep_mac[6]; /* this node's VTEP MAC (weft.vxlan's address) */
	__u16 flags; /* reserved, zero */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct weft_config);
	__uint(max_entries, 1);
} weft_config SEC(".maps");

struct weft_btf_config {
	enum weft_config_layout layout;
};
WEFT_BTF_ANCHOR(weft_btf_config);

#endif /* WEFT_MAPS_CONFIG_H */
