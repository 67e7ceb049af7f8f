/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * Services, per packet (decision 8: "per packet where we must"): what from_pod does with
 * a packet still addressed to a Service, and what both programs do with packets of
 * connections it translated.
 *
 * weft_tracked(): a packet of a tracked connection (or an ICMP error about one) is
 *   rewritten as its entry says: towards the backend, or, for replies, back to the
 *   service address; then delivered like any packet. A connection whose backend was
 *   removed answers the client with a RST (TCP); a reply from such a backend is dropped.
 *
 * weft_service(): a packet to a frontend starts a connection: a backend is chosen (the
 *   client's last one under session affinity, else uniformly at random among the
 *   frontend's slots), the connection is entered, the packet is rewritten. A frontend
 *   with no backend refuses (no endpoints at all: RST / port unreachable) or drops
 *   (endpoints, none usable from this node). A ClusterIP refuses the ports it does not
 *   serve; an address in the service CIDRs that no frontend has is dropped: nothing
 *   about a Service address falls through to the default route.
 *
 * Hairpin: when the chosen backend is the client itself, the source is rewritten to the
 * service address too (kube-proxy masquerades it to the node's address instead), so the
 * backend's reply leaves the pod towards the service address, comes back through
 * from_pod and is translated back; the backend sees the service address as its client.
 */
#ifndef WEFT_SERVICE_H
#define WEFT_SERVICE_H

#include <linux/in.h>
#include <linux/pkt_cls.h>

#include "maps/ct.h"
#include "maps/lb.h"
#include "weft_counters.h"
#include "weft_ct.h"
#include "weft_icmp.h"
#include "weft_nat.h"
#include "weft_parse.h"

/* Outcomes the programs act on besides a TC verdict (which is never negative). */
#define WEFT_CONTINUE (-1) /* deliver the (rewritten) packet */
#define WEFT_UNTRACKED (-2) /* not a tracked connection / not a service: the plain path */
#define WEFT_REJECT_NO_ENDPOINTS (-3)
#define WEFT_REJECT_UNKNOWN_PORT (-4)
#define WEFT_RESET_BACKEND_GONE (-5)

static __always_inline int weft_rewrite(struct __sk_buff *skb, struct weft_pkt *p,
					const struct weft_ct_entry *e)
{
	if (weft_nat_apply(skb, p, e) < 0)
		return weft_drop(WEFT_CTR_DROP_REWRITE_FAILED);
	weft_event((e->flags & WEFT_CT_F_REPLY) ? WEFT_EV_NAT_REVERSE : WEFT_EV_NAT_FORWARD);
	return WEFT_CONTINUE;
}

/*
 * A packet of a tracked connection. `from_pod` says whether the client is behind this
 * hook (only then can it be answered with a RST).
 */
WEFT_SUBPROG int weft_tracked_flow(struct __sk_buff *skb, struct weft_pkt *p, int from_pod)
{
	struct weft_ct_key k = {};
	struct weft_ct_entry copy;
	struct weft_ct_entry *e;
	__u64 now;

	if (!weft_ct_trackable(p))
		return WEFT_UNTRACKED;
	weft_ct_key_of(&k, p);
	e = bpf_map_lookup_elem(&weft_ct, &k);
	if (!e)
		return WEFT_UNTRACKED;
	now = bpf_ktime_get_ns();
	if (e->expires < now) {
		weft_ct_delete(&k, e);
		return WEFT_UNTRACKED;
	}
	if (weft_ct_reopens(e, p)) {
		weft_ct_delete(&k, e);
		weft_event(WEFT_EV_CT_REOPENED);
		return WEFT_UNTRACKED;
	}
	/* Its later fragments could not be translated: refuse the first one too. */
	if ((p->flags & WEFT_PKT_FRAG) && (e->flags & (WEFT_CT_F_NAT_SRC | WEFT_CT_F_NAT_DST)))
		return weft_drop(WEFT_CTR_DROP_FRAGMENT);
	if (e->flags & WEFT_CT_F_BACKEND_GONE) {
		if (e->flags & WEFT_CT_F_REPLY)
			return weft_drop(WEFT_CTR_DROP_BACKEND_GONE);
		if (p->proto != IPPROTO_TCP) {
			/* Datagram flows move to another backend at once. */
			weft_ct_delete(&k, e);
			return WEFT_UNTRACKED;
		}
		if (!from_pod)
			return weft_drop(WEFT_CTR_DROP_BACKEND_GONE);
		/* Answered with a RST for as long as the client keeps sending. */
		e->flags |= WEFT_CT_F_RST;
		e->state = WEFT_CT_CLOSED;
		e->expires = now + weft_ct_timeout(IPPROTO_TCP, WEFT_CT_CLOSED);
		return WEFT_RESET_BACKEND_GONE;
	}
	weft_ct_observe(&k, e, p, now);
	__builtin_memcpy(&copy, e, sizeof(copy));
	return weft_rewrite(skb, p, &copy);
}

/* A tracked connection's packet, or an ICMP error about one (each its own subprogram,
 * so their stacks are not added up). */
static __always_inline int weft_tracked(struct __sk_buff *skb, struct weft_pkt *p, int from_pod)
{
	int rc;

	if (!(p->flags & WEFT_PKT_ICMP_ERROR))
		return weft_tracked_flow(skb, p, from_pod);
	rc = weft_icmp_related(skb, p);
	if (rc == WEFT_NOT_RELATED)
		return WEFT_UNTRACKED;
	return rc == WEFT_RELATED ? WEFT_CONTINUE : rc;
}

static __always_inline int weft_same_ip(const struct weft_ip *a, const struct weft_ip *b)
{
	return a->family == b->family && a->addr[0] == b->addr[0] && a->addr[1] == b->addr[1] &&
	       a->addr[2] == b->addr[2] && a->addr[3] == b->addr[3];
}

/* The backend slot `index` of the live generation of `fe`, 0 if it is not there. */
static __always_inline __u32 weft_lb_slot(const struct weft_lb_frontend *fe, __u32 index)
{
	struct weft_lb_slot_key sk = {
		.frontend = fe->id,
		.slot = ((__u32)fe->generation << WEFT_LB_GENERATION_SHIFT) | index,
	};
	struct weft_lb_slot *slot = bpf_map_lookup_elem(&weft_lb_slots, &sk);

	return slot ? slot->backend : 0;
}

/* The client's affinity backend for `fe`, if it still has one in time; 0 otherwise. */
static __always_inline __u32 weft_lb_affinity(const struct weft_lb_frontend *fe,
					      const struct weft_pkt *p, __u64 now)
{
	struct weft_lb_affinity_key ak = { .frontend = fe->id };
	struct weft_lb_affinity *a;

	ak.client = p->src.ip;
	a = bpf_map_lookup_elem(&weft_lb_aff, &ak);
	if (!a || now - a->last_used >= (__u64)fe->affinity_timeout * WEFT_NS_PER_SEC)
		return 0;
	return a->backend;
}

static __always_inline void weft_lb_remember(const struct weft_lb_frontend *fe,
					     const struct weft_pkt *p, __u32 backend, __u64 now)
{
	struct weft_lb_affinity_key ak = { .frontend = fe->id };
	struct weft_lb_affinity a = { .last_used = now, .backend = backend };

	ak.client = p->src.ip;
	bpf_map_update_elem(&weft_lb_aff, &ak, &a, BPF_ANY);
}

/* What a packet to a service address without a frontend for its port meets. */
static __always_inline int weft_lb_no_frontend(const struct weft_pkt *p)
{
	struct weft_lb_addr *addr = bpf_map_lookup_elem(&weft_lb_addrs, &p->dst.ip);

	if (!addr) {
		if (!bpf_map_lookup_elem(&weft_lb_cidrs, &p->dst))
			return WEFT_UNTRACKED;
		if (p->flags & WEFT_PKT_FRAG)
			return weft_drop(WEFT_CTR_DROP_FRAGMENT);
		return weft_drop(WEFT_CTR_DROP_SERVICE_UNALLOCATED);
	}
	if (p->flags & WEFT_PKT_FRAG)
		return weft_drop(WEFT_CTR_DROP_FRAGMENT);
	if (!(addr->flags & WEFT_LB_ADDR_CLUSTER_IP))
		return WEFT_UNTRACKED; /* an external address: its other ports are the kernel's */
	if ((p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP) && (p->flags & WEFT_PKT_L4))
		return WEFT_REJECT_UNKNOWN_PORT;
	return weft_drop(WEFT_CTR_DROP_SERVICE_PROTO);
}

/* A pod's packet to a destination that is no pod: is it a service's? */
WEFT_SUBPROG int weft_service(struct __sk_buff *skb, struct weft_pkt *p)
{
	struct weft_lb_frontend_key fk = { .scope = WEFT_LB_SCOPE_INTERNAL };
	struct weft_ct_entry orig = {};
	struct weft_ct_key k = {};
	struct weft_lb_frontend *fe;
	struct weft_lb_backend *be;
	__u32 backend = 0;
	__u64 now;
	int rc;

	if (!(p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP) || !weft_ct_trackable(p))
		return weft_lb_no_frontend(p);
	fk.ip = p->dst.ip;
	fk.port = p->dport;
	fk.proto = p->proto;
	fe = bpf_map_lookup_elem(&weft_lb_fe, &fk);
	if (!fe)
		return weft_lb_no_frontend(p);
	if (p->flags & WEFT_PKT_FRAG)
		return weft_drop(WEFT_CTR_DROP_FRAGMENT);
	if (fe->count == 0) {
		if (fe->flags & WEFT_FE_NONE_USABLE)
			return weft_drop(WEFT_CTR_DROP_NO_LOCAL_BACKEND);
		return WEFT_REJECT_NO_ENDPOINTS;
	}

	now = bpf_ktime_get_ns();
	if (fe->flags & WEFT_FE_AFFINITY) {
		backend = weft_lb_affinity(fe, p, now);
		if (backend && bpf_map_lookup_elem(&weft_lb_be, &backend))
			weft_event(WEFT_EV_LB_AFFINITY_HIT);
		else
			backend = 0;
	}
	if (!backend) {
		__u32 pick = bpf_get_prandom_u32();

		backend = weft_lb_slot(fe, pick % fe->count + 1);
		if (!backend) {
			/* The backend set switched generation under us: the frontend's new value
			 * has a complete set. */
			weft_event(WEFT_EV_LB_SLOT_RETRY);
			fe = bpf_map_lookup_elem(&weft_lb_fe, &fk);
			if (!fe || fe->count == 0)
				return weft_drop(WEFT_CTR_DROP_LB_INCONSISTENT);
			backend = weft_lb_slot(fe, pick % fe->count + 1);
		}
	}
	be = backend ? bpf_map_lookup_elem(&weft_lb_be, &backend) : NULL;
	if (!be)
		return weft_drop(WEFT_CTR_DROP_LB_INCONSISTENT);
	if (fe->flags & WEFT_FE_AFFINITY)
		weft_lb_remember(fe, p, backend, now);

	weft_ct_key_of(&k, p);
	orig.frontend = fe->id;
	orig.backend = backend;
	orig.flags = WEFT_CT_F_NAT_DST;
	__builtin_memcpy(orig.nat_saddr, p->src.ip.addr, 16);
	orig.nat_sport = p->sport;
	__builtin_memcpy(orig.nat_daddr, be->ip.addr, 16);
	orig.nat_dport = be->port;
	if (weft_same_ip(&be->ip, &p->src.ip)) {
		__builtin_memcpy(orig.nat_saddr, p->dst.ip.addr, 16);
		orig.flags |= WEFT_CT_F_NAT_SRC;
		weft_event(WEFT_EV_LB_HAIRPIN);
	}
	rc = weft_ct_create(&k, &orig, p, now);
	if (rc == WEFT_CT_RACED) {
		struct weft_ct_entry *won = bpf_map_lookup_elem(&weft_ct, &k);

		if (!won)
			return weft_drop(WEFT_CTR_DROP_CT_INSERT);
		__builtin_memcpy(&orig, won, sizeof(orig));
	} else if (rc != WEFT_CT_CREATED) {
		return weft_drop(WEFT_CTR_DROP_CT_INSERT);
	}
	weft_event(WEFT_EV_LB_NEW_FLOW);
	return weft_rewrite(skb, p, &orig);
}

#endif /* WEFT_SERVICE_H */
