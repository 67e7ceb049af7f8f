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
	WEFT_CTR_DROP_MALFORMED = 9, /* truncated or inconsistent IP or transport header */
	/* Services (per-packet translation in from_pod, replies in both programs). A
	 * translated packet's outcome is where it went (local_delivery, encap, ...). */
	WEFT_CTR_REJECT_NO_ENDPOINTS = 10, /* frontend without endpoints: TCP RST / ICMP sent back */
	WEFT_CTR_REJECT_UNKNOWN_PORT = 11, /* ClusterIP, port or protocol it does not serve: same */
	WEFT_CTR_RESET_BACKEND_GONE = 12, /* the connection's backend was removed: RST to the client */
	WEFT_CTR_DROP_NO_LOCAL_BACKEND = 13, /* endpoints exist, none usable from this node */
	WEFT_CTR_DROP_SERVICE_UNALLOCATED = 14, /* in a service CIDR, but no frontend has it */
	WEFT_CTR_DROP_SERVICE_PROTO = 15, /* to a service address without ports: ping, ICMP error
						 * of no translated flow, unparsed headers */
	WEFT_CTR_DROP_FRAGMENT = 16, /* a fragment to a service address or of a translated flow */
	WEFT_CTR_DROP_CT_INSERT = 17, /* the connection table refused a new translated flow (full,
				       * or its reply tuple is another connection's) */
	WEFT_CTR_DROP_LB_INCONSISTENT = 18, /* a frontend's slot or backend record is missing */
	WEFT_CTR_DROP_BACKEND_GONE = 19, /* a reply from a backend that was removed */
	WEFT_CTR_DROP_REWRITE_FAILED = 20, /* rewriting or building a packet failed (memory) */
	WEFT_CTR_MAX = 21,
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
