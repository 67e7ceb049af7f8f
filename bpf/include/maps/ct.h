/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * weft_ct: the connection table, one for IPv4 and IPv6, shared by services (and later
 * masquerade and policy). An LRU hash, sized by the agent, holding two entries per
 * connection: one under the tuple of the original direction (client to server, as the
 * client sent it) and one under the tuple of replies (as the server sends them), so
 * both directions find it with one lookup.
 *
 * Each entry records the tuple its direction's packets are rewritten to (the whole
 * tuple, changed or not). Reversing that tuple gives the other entry's key, so either
 * entry leads to its partner without storing it.
 *
 * Timeouts (seconds; bpf_ktime_get_ns() is CLOCK_MONOTONIC, the clock the agent's
 * garbage collection reads):
 *   TCP opening (no reply yet)      60     a SYN answered late still finds its entry; an
 *                                          unanswered one goes well before the LRU needs it
 *   TCP established              21600     6 h: longer than the default 2 h keepalive, so
 *                                          an idle connection that keeps alive survives
 *   TCP closing (one FIN)          120     room for a half-closed stream to drain
 *   TCP closed (FINs both ways, RST) 10    late retransmits and the last ACK still match
 *   UDP unreplied / replied      30 / 120  the kernel conntrack's udp and udp_stream
 *                                          values, the behaviour kube-proxy users know
 *   ICMP echo                       30     the kernel's icmp timeout
 *   other protocols                 60
 * An entry's expiry is written at most once a second per direction (and for both
 * entries at once), so established flows do not write the map on every packet.
 */
#ifndef WEFT_MAPS_CT_H
#define WEFT_MAPS_CT_H

#include "weft_types.h"

enum weft_ct_layout {
	WEFT_CT_LAYOUT = 1,
	WEFT_CT_DEFAULT_ENTRIES = 131072,
};

enum weft_ct_timeout {
	WEFT_CT_TIMEOUT_TCP_OPENING = 60,
	WEFT_CT_TIMEOUT_TCP_ESTABLISHED = 21600,
	WEFT_CT_TIMEOUT_TCP_CLOSING = 120,
	WEFT_CT_TIMEOUT_TCP_CLOSED = 10,
	WEFT_CT_TIMEOUT_UDP_OPENING = 30,
	WEFT_CT_TIMEOUT_UDP_ESTABLISHED = 120,
	WEFT_CT_TIMEOUT_ICMP = 30,
	WEFT_CT_TIMEOUT_OTHER = 60,
	WEFT_CT_REFRESH = 1, /* seconds between expiry writes */
};

/* A connection's direction-specific tuple, as the packet carries it. */
struct weft_ct_key {
	__be32 saddr[4];
	__be32 daddr[4];
	__be16 sport; /* ICMP echo: the id, in both ports */
	__be16 dport;
	__u8 proto;
	__u8 family; /* enum weft_family */
	__u8 pad[2]; /* always zero */
};

enum weft_ct_flag {
	/* Of this entry only. */
	WEFT_CT_F_REPLY = 1 << 0, /* the reply direction's entry */
	WEFT_CT_F_NAT_SRC = 1 << 1, /* packets get the source nat_saddr:nat_sport */
	WEFT_CT_F_NAT_DST = 1 << 2, /* packets get the destination nat_daddr:nat_dport */
	/* Of the connection: kept equal in both entries. */
	WEFT_CT_F_SEEN_REPLY = 1 << 4, /* a packet went the reply way */
	WEFT_CT_F_FIN_ORIG = 1 << 5,
	WEFT_CT_F_FIN_REPLY = 1 << 6,
	WEFT_CT_F_RST = 1 << 7,
	WEFT_CT_F_BACKEND_GONE = 1 << 8, /* its service backend was removed */
	WEFT_CT_F_SHARED = 0xfff0,
};

enum weft_ct_state {
	WEFT_CT_OPENING = 1, /* only the original direction seen */
	WEFT_CT_ESTABLISHED = 2, /* replied */
	WEFT_CT_CLOSING = 3, /* TCP: a FIN one way */
	WEFT_CT_CLOSED = 4, /* TCP: FINs both ways, or a RST */
};

struct weft_ct_entry {
	__u64 expires; /* bpf_ktime_get_ns() after which the entry is dead */
	__be32 nat_saddr[4]; /* the tuple this direction's packets are rewritten to */
	__be32 nat_daddr[4];
	__be16 nat_sport;
	__be16 nat_dport;
	__u32 frontend; /* the service frontend that made it (0: none) */
	__u32 backend; /* the backend it chose (0: none) */
	__u32 rule; /* policy: the rule that allowed it (0: none yet) */
	__u16 flags; /* enum weft_ct_flag */
	__u8 state; /* enum weft_ct_state */
	__u8 verdict; /* policy: the verdict (0: none yet) */
	__u32 pad; /* always zero */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct weft_ct_key);
	__type(value, struct weft_ct_entry);
	__uint(max_entries, WEFT_CT_DEFAULT_ENTRIES);
} weft_ct SEC(".maps");

struct weft_btf_ct {
	enum weft_ct_layout layout;
	enum weft_ct_timeout timeout;
	enum weft_ct_flag flag;
	enum weft_ct_state state;
};
WEFT_BTF_ANCHOR(weft_btf_ct);

#endif /* WEFT_MAPS_CT_H */
