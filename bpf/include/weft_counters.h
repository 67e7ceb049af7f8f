/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/* Per-CPU outcome counters: one increment per packet, no atomics. */
#ifndef WEFT_COUNTERS_H
#define WEFT_COUNTERS_H

#include <linux/pkt_cls.h>

#include "maps/counters.h"
#include "maps/events.h"

static __always_inline void weft_count(enum weft_counter what)
{
	__u32 key = what;
	__u64 *value = bpf_map_lookup_elem(&weft_counters, &key);

	if (value)
		*value += 1;
}

static __always_inline void weft_event(enum weft_event what)
{
	__u32 key = what;
	__u64 *value = bpf_map_lookup_elem(&weft_events, &key);

	if (value)
		*value += 1;
}

/* Every drop goes through here, so no drop is ever without a reason. */
static __always_inline int weft_drop(enum weft_counter reason)
{
	weft_count(reason);
	return TC_ACT_SHOT;
}

static __always_inline int weft_to_kernel(enum weft_counter why)
{
	weft_count(why);
	return TC_ACT_OK;
}

#endif /* WEFT_COUNTERS_H */
