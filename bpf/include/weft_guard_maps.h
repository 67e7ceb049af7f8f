/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * The egress guard's kernel state: which network namespaces are fenced, and for
 * which proxy UID. Declared once here; `weft-guard` mirrors these types in
 * crates/guard/src/lsm/layout.rs and its layout test compares them with the BTF of
 * the compiled object.
 */
#ifndef WEFT_GUARD_MAPS_H
#define WEFT_GUARD_MAPS_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

enum weft_guard_limits {
	/* Fenced pods on one node. */
	WEFT_GUARD_MAX_FENCED = 16384,
};

/* weft_guard_fenced key: the network namespace cookie (net->net_cookie, the value
 * SO_NETNS_COOKIE reports). Cookies are never reused while the system runs, unlike
 * nsfs inode numbers, so a stale entry can never fence a later namespace. */
struct weft_guard_netns {
	__u64 cookie;
};

/* weft_guard_fenced value: what the fence of that namespace exempts. */
struct weft_guard_fence {
	__u32 proxy_uid; /* the only fsuid that is not confined (kernel uid) */
	__u32 flags; /* reserved, zero */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, WEFT_GUARD_MAX_FENCED);
	__type(key, struct weft_guard_netns);
	__type(value, struct weft_guard_fence);
} weft_guard_fenced SEC(".maps");

#endif
