/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * Rewriting a packet's addresses and ports as a connection-table entry says, with the
 * IPv4 header checksum and the transport checksum (whose pseudo-header covers the
 * addresses) kept right. The kernel's csum helpers also handle a checksum the sender
 * left to offload (CHECKSUM_PARTIAL, the usual case for a pod's packets on a veth).
 */
#ifndef WEFT_NAT_H
#define WEFT_NAT_H

#include <linux/if_ether.h>
#include <linux/in.h>

#include "maps/ct.h"
#include "weft_parse.h"

#define WEFT_IP4_CSUM_OFF (ETH_HLEN + 10)
#define WEFT_IP4_SADDR_OFF (ETH_HLEN + 12)
#define WEFT_IP4_DADDR_OFF (ETH_HLEN + 16)
#define WEFT_IP6_SADDR_OFF (ETH_HLEN + 8)
#define WEFT_IP6_DADDR_OFF (ETH_HLEN + 24)

/* Offset of the transport checksum, 0 when the protocol has none we maintain. */
static __always_inline __u32 weft_l4_csum_off(const struct weft_pkt *p)
{
	if (!(p->flags & WEFT_PKT_L4))
		return 0;
	switch (p->proto) {
	case IPPROTO_TCP:
		return p->l4_off + 16;
	case IPPROTO_UDP:
		return p->l4_off + 6;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		return p->l4_off + 2;
	default:
		return 0;
	}
}

/* Whether the transport checksum covers the addresses (ICMPv4's does not). */
static __always_inline int weft_l4_pseudo(const struct weft_pkt *p)
{
	return p->proto != IPPROTO_ICMP;
}

static __always_inline __u64 weft_l4_csum_flags(const struct weft_pkt *p)
{
	/* A UDP/IPv4 checksum of 0 means "none" and must stay 0. */
	return p->proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
}

/* Sets the source (`dst` 0) or destination address of the packet to `to`. */
static __always_inline int weft_nat_addr(struct __sk_buff *skb, struct weft_pkt *p, int dst,
					 const __be32 *to)
{
	struct weft_route_key *key = dst ? &p->dst : &p->src;
	__u32 csum = weft_l4_csum_off(p);
	__u64 l4_flags = weft_l4_csum_flags(p) | BPF_F_PSEUDO_HDR;

	if (key->ip.family == WEFT_FAMILY_IPV4) {
		__be32 from = key->ip.addr[0];

		if (from == to[0])
			return 0;
		if (csum && weft_l4_pseudo(p) &&
		    bpf_l4_csum_replace(skb, csum, from, to[0], l4_flags | 4) < 0)
			return -1;
		if (bpf_l3_csum_replace(skb, WEFT_IP4_CSUM_OFF, from, to[0], 4) < 0)
			return -1;
		if (bpf_skb_store_bytes(skb, dst ? WEFT_IP4_DADDR_OFF : WEFT_IP4_SADDR_OFF, &to[0], 4,
					0) < 0)
			return -1;
		key->ip.addr[0] = to[0];
		return 0;
	}
	if (key->ip.addr[0] == to[0] && key->ip.addr[1] == to[1] && key->ip.addr[2] == to[2] &&
	    key->ip.addr[3] == to[3])
		return 0;
	if (csum) {
		__s64 diff = bpf_csum_diff(key->ip.addr, 16, (__be32 *)to, 16, 0);

		if (diff < 0 || bpf_l4_csum_replace(skb, csum, 0, diff, l4_flags) < 0)
			return -1;
	}
	if (bpf_skb_store_bytes(skb, dst ? WEFT_IP6_DADDR_OFF : WEFT_IP6_SADDR_OFF, to, 16, 0) < 0)
		return -1;
	__builtin_memcpy(key->ip.addr, to, 16);
	return 0;
}

/* Sets the source (`dst` 0) or destination port, or for ICMP echo the id. */
static __always_inline int weft_nat_port(struct __sk_buff *skb, struct weft_pkt *p, int dst,
					 __be16 to)
{
	__be16 from = dst ? p->dport : p->sport;
	__u32 csum = weft_l4_csum_off(p);
	__u32 off;

	if (from == to)
		return 0;
	if (!csum)
		return -1;
	if (p->flags & WEFT_PKT_ICMP_ECHO) {
		/* One id stands for both ports: rewrite it once, from the source side. */
		if (dst)
			return 0;
		off = p->l4_off + 4;
	} else {
		off = p->l4_off + (dst ? 2 : 0);
	}
	if (bpf_l4_csum_replace(skb, csum, from, to, weft_l4_csum_flags(p) | 2) < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, off, &to, 2, 0) < 0)
		return -1;
	if (p->flags & WEFT_PKT_ICMP_ECHO) {
		p->sport = to;
		p->dport = to;
	} else if (dst) {
		p->dport = to;
	} else {
		p->sport = to;
	}
	return 0;
}

/* Rewrites the packet as `e` says; `p` then describes the rewritten packet. */
static __always_inline int weft_nat_apply(struct __sk_buff *skb, struct weft_pkt *p,
					  const struct weft_ct_entry *e)
{
	if (e->flags & WEFT_CT_F_NAT_SRC) {
		if (weft_nat_addr(skb, p, 0, e->nat_saddr) || weft_nat_port(skb, p, 0, e->nat_sport))
			return -1;
	}
	if (e->flags & WEFT_CT_F_NAT_DST) {
		if (weft_nat_addr(skb, p, 1, e->nat_daddr) || weft_nat_port(skb, p, 1, e->nat_dport))
			return -1;
	}
	return 0;
}

#endif /* WEFT_NAT_H */
