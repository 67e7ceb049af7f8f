/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * weft_counters: what happened to each packet, one per-CPU counter per outcome. Every
 * packet a program sees increments exactly one of them, and every drop has its own
 * reason so that a drop can always be explained.
 *
 * The map has WEFT_COUNTER_SLOTS entries, more than there are counters, so adding a
 * counter does not change the layout. Counters are append-only: a value keeps its
 * meaning for as long as the layout version stays.
 */
#ifndef WEFT_MAPS_COUNTERS_H
#define WEFT_MAPS_COUNTERS_H

#include "weft_types.h"

enum weft_counters_layout {
	WEFT_COUNTERS_LAYOUT = 1,
	WEFT_COUNTER_SLOTS = 64,
};

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
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, WEFT_COUNTER_SLOTS);
} weft_counters SEC(".maps");

struct weft_btf_counters {
	enum weft_counters_layout layout;
	enum weft_counter counter;
};
WEFT_BTF_ANCHOR(weft_btf_counters);

#endif /* WEFT_MAPS_COUNTERS_H */
