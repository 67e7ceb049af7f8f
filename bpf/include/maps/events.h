/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * weft_events: things the programs did besides a packet's outcome (weft_counters), one
 * per-CPU counter each: connection-table inserts, failures and pressure, new
 * load-balanced flows, translations. A packet may count several, or none.
 *
 * Like the counters, the map has room (WEFT_EVENT_SLOTS), and events are append-only.
 */
#ifndef WEFT_MAPS_EVENTS_H
#define WEFT_MAPS_EVENTS_H

#include "weft_types.h"

enum weft_events_layout {
	WEFT_EVENTS_LAYOUT = 1,
	WEFT_EVENT_SLOTS = 64,
};

enum weft_event {
	WEFT_EV_CT_CREATED = 0, /* a connection (both entries) entered the table */
	WEFT_EV_CT_INSERT_FAILED = 1, /* an entry could not be inserted (the flow was dropped) */
	WEFT_EV_CT_PAIR_MISSING = 2, /* an entry's partner was gone: evicted under pressure */
	WEFT_EV_CT_REOPENED = 3, /* a new SYN reused a closed connection's tuple */
	WEFT_EV_LB_NEW_FLOW = 4, /* a backend was chosen for a new flow */
	WEFT_EV_LB_AFFINITY_HIT = 5, /* ... by session affinity */
	WEFT_EV_LB_HAIRPIN = 6, /* ... and it was the client itself (source rewritten too) */
	WEFT_EV_LB_SLOT_RETRY = 7, /* a slot vanished under a backend-set switch: re-read */
	WEFT_EV_NAT_FORWARD = 8, /* a packet rewritten on its way to a backend */
	WEFT_EV_NAT_REVERSE = 9, /* a reply rewritten back to the service address */
	WEFT_EV_ICMP_ERROR_TRANSLATED = 10, /* an ICMP error about a translated flow rewritten */
	WEFT_EV_MAX = 11,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, WEFT_EVENT_SLOTS);
} weft_events SEC(".maps");

struct weft_btf_events {
	enum weft_events_layout layout;
	enum weft_event event;
};
WEFT_BTF_ANCHOR(weft_btf_events);

#endif /* WEFT_MAPS_EVENTS_H */
