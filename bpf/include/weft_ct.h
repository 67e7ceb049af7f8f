/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * The connection table engine over weft_ct (maps/ct.h): keys from parsed packets,
 * lookups, per-packet state (TCP flags, replies, timeouts), and creating a connection's
 * two entries.
 */
#ifndef WEFT_CT_H
#define WEFT_CT_H

#include <linux/in.h>

#include "maps/ct.h"
#include "weft_counters.h"
#include "weft_parse.h"

#define WEFT_NS_PER_SEC 1000000000ULL

/* Whether the packet has a tuple the table can track: ports (or an echo id), no fragment. */
static __always_inline int weft_ct_trackable(const struct weft_pkt *p)
{
	return (p->flags & WEFT_PKT_L4) && !(p->flags & WEFT_PKT_FRAG_LATER);
}

static __always_inline void weft_ct_key_of(struct weft_ct_key *k, const struct weft_pkt *p)
{
	__builtin_memcpy(k->saddr, p->src.ip.addr, 16);
	__builtin_memcpy(k->daddr, p->dst.ip.addr, 16);
	k->sport = p->sport;
	k->dport = p->dport;
	k->proto = p->proto;
	k->family = p->src.ip.family;
}

/* The key of the other direction: the tuple `e` rewrites packets to, reversed. */
static __always_inline void weft_ct_other_key(struct weft_ct_key *other, const struct weft_ct_key *k,
					      const struct weft_ct_entry *e)
{
	__builtin_memcpy(other->saddr, e->nat_daddr, 16);
	__builtin_memcpy(other->daddr, e->nat_saddr, 16);
	other->sport = e->nat_dport;
	other->dport = e->nat_sport;
	other->proto = k->proto;
	other->family = k->family;
	other->pad[0] = 0;
	other->pad[1] = 0;
}

static __always_inline __u8 weft_ct_state_of(__u8 proto, __u16 flags)
{
	if (proto == IPPROTO_TCP) {
		if (flags & WEFT_CT_F_RST)
			return WEFT_CT_CLOSED;
		if ((flags & WEFT_CT_F_FIN_ORIG) && (flags & WEFT_CT_F_FIN_REPLY))
			return WEFT_CT_CLOSED;
		if (flags & (WEFT_CT_F_FIN_ORIG | WEFT_CT_F_FIN_REPLY))
			return WEFT_CT_CLOSING;
	}
	return (flags & WEFT_CT_F_SEEN_REPLY) ? WEFT_CT_ESTABLISHED : WEFT_CT_OPENING;
}

static __always_inline __u64 weft_ct_timeout(__u8 proto, __u8 state)
{
	__u64 s;

	switch (proto) {
	case IPPROTO_TCP:
		switch (state) {
		case WEFT_CT_ESTABLISHED:
			s = WEFT_CT_TIMEOUT_TCP_ESTABLISHED;
			break;
		case WEFT_CT_CLOSING:
			s = WEFT_CT_TIMEOUT_TCP_CLOSING;
			break;
		case WEFT_CT_CLOSED:
			s = WEFT_CT_TIMEOUT_TCP_CLOSED;
			break;
		default:
			s = WEFT_CT_TIMEOUT_TCP_OPENING;
		}
		break;
	case IPPROTO_UDP:
		s = state == WEFT_CT_ESTABLISHED ? WEFT_CT_TIMEOUT_UDP_ESTABLISHED :
						   WEFT_CT_TIMEOUT_UDP_OPENING;
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		s = WEFT_CT_TIMEOUT_ICMP;
		break;
	default:
		s = WEFT_CT_TIMEOUT_OTHER;
	}
	return s * WEFT_NS_PER_SEC;
}

/* The connection flags after packet `p` went `reply` (or original) way. */
static __always_inline __u16 weft_ct_next_flags(__u16 shared, int reply, const struct weft_pkt *p)
{
	if (reply)
		shared |= WEFT_CT_F_SEEN_REPLY;
	if (p->proto == IPPROTO_TCP) {
		if (p->tcp_flags & WEFT_TCP_RST)
			shared |= WEFT_CT_F_RST;
		if (p->tcp_flags & WEFT_TCP_FIN)
			shared |= reply ? WEFT_CT_F_FIN_REPLY : WEFT_CT_F_FIN_ORIG;
	}
	return shared;
}

/* Whether `p` (original direction) is a new connection's SYN on a closed entry's tuple. */
static __always_inline int weft_ct_reopens(const struct weft_ct_entry *e, const struct weft_pkt *p)
{
	return p->proto == IPPROTO_TCP && !(e->flags & WEFT_CT_F_REPLY) &&
	       e->state == WEFT_CT_CLOSED &&
	       (p->tcp_flags & (WEFT_TCP_SYN | WEFT_TCP_ACK)) == WEFT_TCP_SYN;
}

/*
 * Records packet `p`, found under `k` as entry `e`: the connection's flags, state and
 * expiry, written to both entries when they change (the expiry at most once per
 * WEFT_CT_REFRESH), so the partner never expires before the entry in use.
 */
static __always_inline void weft_ct_observe(const struct weft_ct_key *k, struct weft_ct_entry *e,
					    const struct weft_pkt *p, __u64 now)
{
	__u16 shared = e->flags & WEFT_CT_F_SHARED;
	__u16 next = weft_ct_next_flags(shared, e->flags & WEFT_CT_F_REPLY, p);
	__u8 state = weft_ct_state_of(p->proto, next);
	__u64 expires = now + weft_ct_timeout(p->proto, state);
	struct weft_ct_key other = {};
	struct weft_ct_entry *partner;

	if (next == shared && state == e->state &&
	    expires < e->expires + WEFT_CT_REFRESH * WEFT_NS_PER_SEC)
		return;
	e->flags = (e->flags & ~WEFT_CT_F_SHARED) | next;
	e->state = state;
	e->expires = expires;
	weft_ct_other_key(&other, k, e);
	partner = bpf_map_lookup_elem(&weft_ct, &other);
	if (!partner) {
		weft_event(WEFT_EV_CT_PAIR_MISSING);
		return;
	}
	partner->flags = (partner->flags & ~WEFT_CT_F_SHARED) | next;
	partner->state = state;
	partner->expires = expires;
}

static __always_inline int weft_ct_key_eq(const struct weft_ct_key *a, const struct weft_ct_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3] && x[4] == y[4];
}

/*
 * Whether the entry under reply key `rkey` may be replaced by the reply entry of the
 * connection `k`: it is that connection's own leftover, or its partner is gone (evicted,
 * or removed with a backend).
 */
static __always_inline int weft_ct_reply_is_stale(const struct weft_ct_key *rkey,
						  const struct weft_ct_key *k)
{
	struct weft_ct_entry *existing = bpf_map_lookup_elem(&weft_ct, rkey);
	struct weft_ct_key other = {};

	if (!existing)
		return 1;
	weft_ct_other_key(&other, rkey, existing);
	return weft_ct_key_eq(&other, k) || bpf_map_lookup_elem(&weft_ct, &other) == NULL;
}

enum weft_ct_create_result {
	WEFT_CT_CREATED = 0,
	WEFT_CT_RACED = 1, /* another CPU made the same connection first: look it up */
	WEFT_CT_REFUSED = 2, /* the table could not take it (counted) */
};

/*
 * Enters a new connection whose first packet `p` (original direction, key `k`) is
 * rewritten as `orig` says (its nat tuple, NAT flags, frontend and backend filled in by
 * the caller). The reply entry rewrites replies back to `k` reversed. A reply tuple
 * already taken by another connection (two services sharing a backend, reached from
 * one client port) is refused like a full table: its replies could not be told apart.
 */
static __always_inline enum weft_ct_create_result
weft_ct_create(const struct weft_ct_key *k, struct weft_ct_entry *orig, const struct weft_pkt *p,
	       __u64 now)
{
	struct weft_ct_entry reply = {};
	struct weft_ct_key rkey = {};
	__u16 shared = weft_ct_next_flags(0, 0, p);
	long rc;

	orig->state = weft_ct_state_of(p->proto, shared);
	orig->expires = now + weft_ct_timeout(p->proto, orig->state);
	orig->flags = (orig->flags & (WEFT_CT_F_NAT_SRC | WEFT_CT_F_NAT_DST)) | shared;

	__builtin_memcpy(reply.nat_saddr, k->daddr, 16);
	__builtin_memcpy(reply.nat_daddr, k->saddr, 16);
	reply.nat_sport = k->dport;
	reply.nat_dport = k->sport;
	reply.frontend = orig->frontend;
	reply.backend = orig->backend;
	reply.state = orig->state;
	reply.expires = orig->expires;
	reply.flags = WEFT_CT_F_REPLY | shared;
	if (orig->flags & WEFT_CT_F_NAT_DST)
		reply.flags |= WEFT_CT_F_NAT_SRC;
	if (orig->flags & WEFT_CT_F_NAT_SRC)
		reply.flags |= WEFT_CT_F_NAT_DST;
	weft_ct_other_key(&rkey, k, orig);

	rc = bpf_map_update_elem(&weft_ct, k, orig, BPF_NOEXIST);
	if (rc == -17 /* EEXIST */)
		return WEFT_CT_RACED;
	if (rc) {
		weft_event(WEFT_EV_CT_INSERT_FAILED);
		return WEFT_CT_REFUSED;
	}
	rc = bpf_map_update_elem(&weft_ct, &rkey, &reply, BPF_NOEXIST);
	if (rc == -17 /* EEXIST */ && weft_ct_reply_is_stale(&rkey, k))
		rc = bpf_map_update_elem(&weft_ct, &rkey, &reply, BPF_ANY);
	if (rc) {
		bpf_map_delete_elem(&weft_ct, k);
		weft_event(WEFT_EV_CT_INSERT_FAILED);
		return WEFT_CT_REFUSED;
	}
	weft_event(WEFT_EV_CT_CREATED);
	return WEFT_CT_CREATED;
}

/* Removes both entries of the connection `e` found under `k`. */
static __always_inline void weft_ct_delete(const struct weft_ct_key *k, const struct weft_ct_entry *e)
{
	struct weft_ct_key other = {};

	weft_ct_other_key(&other, k, e);
	bpf_map_delete_elem(&weft_ct, &other);
	bpf_map_delete_elem(&weft_ct, k);
}

#endif /* WEFT_CT_H */
