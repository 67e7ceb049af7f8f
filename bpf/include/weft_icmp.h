/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * ICMP and ICMPv6 errors about translated connections. An error travels against the
 * packet it quotes, so the reverse of the quoted tuple is the key of the direction the
 * error itself goes; that entry says how to rewrite it:
 *
 *   the entry rewrites sources (a reply, back to the service address): the quoted
 *     packet's destination gets that address and port, and the error's own source too
 *     when the backend itself reported (it is the quoted destination): the client
 *     learns nothing of the backend;
 *   the entry rewrites destinations (towards a backend): the quoted packet's source
 *     gets the backend, and so does the error's destination when it was addressed to
 *     the service address.
 *
 * An error from a hop in between keeps its own source (path MTU discovery needs it).
 * The IPv4 header checksum of both headers, the quoted transport checksum (when it is
 * in the quote) and the ICMP checksum are updated for every change.
 */
#ifndef WEFT_ICMP_H
#define WEFT_ICMP_H

#include <linux/if_ether.h>
#include <linux/in.h>

#include "maps/ct.h"
#include "weft_counters.h"
#include "weft_csum.h"
#include "weft_nat.h"
#include "weft_parse.h"

#define WEFT_NOT_RELATED (-2)
#define WEFT_RELATED (-1)

/* Where the quoted packet's fields are. */
struct weft_quoted {
	__u32 ip; /* its IP header */
	__u32 l4; /* its transport header */
	__u32 saddr; /* its source address */
	__u32 daddr;
	__u32 csum; /* its transport checksum; 0 if not in the quote or not kept */
	__u8 pseudo; /* whether that checksum covers the addresses */
	__u8 udp; /* a UDP checksum (0 means none) */
	__u8 echo; /* an ICMP echo: one id for both ports */
};

static __always_inline int weft_rewrite_word(struct __sk_buff *skb, __u32 off, const void *to,
					     __u32 len)
{
	return bpf_skb_store_bytes(skb, off, to, len, 0);
}

static __always_inline int weft_addr_eq(const __be32 *a, const __be32 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

/* Sets the error's own source (`dst` 0) or destination: the IPv4 header checksum, or the
 * ICMPv6 checksum (its pseudo-header covers the addresses). */
static __always_inline int weft_icmp_outer_addr(struct __sk_buff *skb, struct weft_pkt *p, int dst,
						const __be32 *to)
{
	struct weft_route_key *key = dst ? &p->dst : &p->src;

	if (key->ip.family == WEFT_FAMILY_IPV4) {
		if (bpf_l3_csum_replace(skb, WEFT_IP4_CSUM_OFF, key->ip.addr[0], to[0], 4) < 0)
			return -1;
		if (bpf_skb_store_bytes(skb, dst ? WEFT_IP4_DADDR_OFF : WEFT_IP4_SADDR_OFF, to, 4, 0) < 0)
			return -1;
		key->ip.addr[0] = to[0];
		return 0;
	}
	if (bpf_l4_csum_replace(skb, p->l4_off + 2, 0,
				weft_csum_fold(weft_csum_diff_addr(0, key->ip.addr, to, 1)),
				BPF_F_PSEUDO_HDR) < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, dst ? WEFT_IP6_DADDR_OFF : WEFT_IP6_SADDR_OFF, to, 16, 0) < 0)
		return -1;
	__builtin_memcpy(key->ip.addr, to, 16);
	return 0;
}

/*
 * Translates the ICMP error `p` if it quotes a packet of a tracked connection: returns
 * WEFT_RELATED (p then describes the rewritten error, for delivery), WEFT_NOT_RELATED, or
 * a drop verdict.
 */
WEFT_SUBPROG int weft_icmp_related(struct __sk_buff *skb, struct weft_pkt *p)
{
	int v6 = p->src.ip.family == WEFT_FAMILY_IPV6;
	struct weft_quoted q = {};
	struct weft_ct_key k = {};
	struct weft_ct_entry e;
	struct weft_ct_entry *found;
	__be32 in_src[4] = {}, in_dst[4] = {};
	__be16 in_sport, in_dport, check;
	__u8 hdr[40], l4[8];
	__u32 diff = 0, l4diff = 0;
	__u8 proto;

	q.ip = p->l4_off + 8;
	if (bpf_skb_load_bytes(skb, q.ip, hdr, v6 ? 40 : 20) < 0)
		return WEFT_NOT_RELATED;
	if (v6) {
		if ((hdr[0] >> 4) != 6)
			return WEFT_NOT_RELATED;
		proto = hdr[6];
		q.l4 = q.ip + 40;
		q.saddr = q.ip + 8;
		q.daddr = q.ip + 24;
		__builtin_memcpy(in_src, &hdr[8], 16);
		__builtin_memcpy(in_dst, &hdr[24], 16);
	} else {
		if ((hdr[0] >> 4) != 4 || (hdr[0] & 0x0f) < 5)
			return WEFT_NOT_RELATED;
		proto = hdr[9];
		q.l4 = q.ip + (hdr[0] & 0x0f) * 4;
		q.saddr = q.ip + 12;
		q.daddr = q.ip + 16;
		__builtin_memcpy(in_src, &hdr[12], 4);
		__builtin_memcpy(in_dst, &hdr[16], 4);
	}
	if (bpf_skb_load_bytes(skb, q.l4, l4, 8) < 0)
		return WEFT_NOT_RELATED;
	switch (proto) {
	case IPPROTO_TCP:
		__builtin_memcpy(&in_sport, &l4[0], 2);
		__builtin_memcpy(&in_dport, &l4[2], 2);
		q.pseudo = 1;
		if (q.l4 + 18 <= skb->len)
			q.csum = q.l4 + 16;
		break;
	case IPPROTO_UDP:
		__builtin_memcpy(&in_sport, &l4[0], 2);
		__builtin_memcpy(&in_dport, &l4[2], 2);
		q.pseudo = 1;
		q.udp = 1;
		q.csum = q.l4 + 6;
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if (!weft_is_icmp_echo(proto, l4[0]))
			return WEFT_NOT_RELATED;
		__builtin_memcpy(&in_sport, &l4[4], 2);
		in_dport = in_sport;
		q.echo = 1;
		q.pseudo = proto == IPPROTO_ICMPV6;
		q.csum = q.l4 + 2;
		break;
	default:
		return WEFT_NOT_RELATED;
	}

	/* The quoted packet went the other way: its reverse is this error's direction. */
	__builtin_memcpy(k.saddr, in_dst, 16);
	__builtin_memcpy(k.daddr, in_src, 16);
	k.sport = in_dport;
	k.dport = in_sport;
	k.proto = proto;
	k.family = p->src.ip.family;
	found = bpf_map_lookup_elem(&weft_ct, &k);
	if (!found)
		return WEFT_NOT_RELATED;
	__builtin_memcpy(&e, found, sizeof(e));
	if (p->flags & WEFT_PKT_FRAG)
		return weft_drop(WEFT_CTR_DROP_FRAGMENT);

	/* The quoted packet: its destination takes the rewritten source, its source the
	 * rewritten destination. */
	if (e.flags & WEFT_CT_F_NAT_SRC) {
		diff = weft_csum_diff_addr(diff, in_dst, e.nat_saddr, v6);
		l4diff = weft_csum_diff16(l4diff, in_dport, e.nat_sport);
		if (!q.echo && weft_rewrite_word(skb, q.l4 + 2, &e.nat_sport, 2) < 0)
			return weft_drop(WEFT_CTR_DROP_REWRITE_FAILED);
		if (weft_rewrite_word(skb, q.daddr, e.nat_saddr, v6 ? 16 : 4) < 0)
			return weft_drop(WEFT_CTR_DROP_REWRITE_FAILED);
	}
	if (e.flags & WEFT_CT_F_NAT_DST) {
		diff = weft_csum_diff_addr(diff, in_src, e.nat_daddr, v6);
		l4diff = weft_csum_diff16(l4diff, in_sport, e.nat_dport);
		if (weft_rewrite_word(skb, q.echo ? q.l4 + 4 : q.l4, &e.nat_dport, 2) < 0)
			return weft_drop(WEFT_CTR_DROP_REWRITE_FAILED);
		if (weft_rewrite_word(skb, q.saddr, e.nat_daddr, v6 ? 16 : 4) < 0)
			return weft_drop(WEFT_CTR_DROP_REWRITE_FAILED);
	}
	/* What the ICMP checksum covers changed by: the addresses and the ports... */
	{
		__u32 icmp = diff;

		if (!q.echo)
			icmp += l4diff;
		else if (e.flags & WEFT_CT_F_NAT_DST)
			icmp = weft_csum_diff16(icmp, in_sport, e.nat_dport);
		/* ... the quoted IPv4 header checksum, which the address change moves... */
		if (!v6 && diff) {
			__u16 old, new;

			if (bpf_skb_load_bytes(skb, q.ip + 10, &old, 2) < 0)
				return weft_drop(WEFT_CTR_DROP_REWRITE_FAILED);
			new = weft_csum_update(old, diff);
			icmp = weft_csum_diff16(icmp, old, new);
			if (weft_rewrite_word(skb, q.ip + 10, &new, 2) < 0)
				return weft_drop(WEFT_CTR_DROP_REWRITE_FAILED);
		}
		/* ... and the quoted transport checksum, when it is there. */
		if (q.csum && bpf_skb_load_bytes(skb, q.csum, &check, 2) == 0 &&
		    !(q.udp && !v6 && check == 0)) {
			__u32 moved = q.echo ? 0 : l4diff;
			__u16 new;

			if (q.echo && (e.flags & WEFT_CT_F_NAT_DST))
				moved = weft_csum_diff16(moved, in_sport, e.nat_dport);
			if (q.pseudo)
				moved += diff;
			new = weft_csum_update(check, moved);
			if (q.udp && new == 0)
				new = 0xffff;
			icmp = weft_csum_diff16(icmp, check, new);
			if (weft_rewrite_word(skb, q.csum, &new, 2) < 0)
				return weft_drop(WEFT_CTR_DROP_REWRITE_FAILED);
		}
		if (bpf_l4_csum_replace(skb, p->l4_off + 2, 0, weft_csum_fold(icmp), 0) < 0)
			return weft_drop(WEFT_CTR_DROP_REWRITE_FAILED);
	}

	/* The error's own addresses: only where they are the connection's. */
	if ((e.flags & WEFT_CT_F_NAT_SRC) && weft_addr_eq(p->src.ip.addr, k.saddr)) {
		if (weft_icmp_outer_addr(skb, p, 0, e.nat_saddr) < 0)
			return weft_drop(WEFT_CTR_DROP_REWRITE_FAILED);
	}
	if ((e.flags & WEFT_CT_F_NAT_DST) && weft_addr_eq(p->dst.ip.addr, k.daddr)) {
		if (weft_icmp_outer_addr(skb, p, 1, e.nat_daddr) < 0)
			return weft_drop(WEFT_CTR_DROP_REWRITE_FAILED);
	}
	weft_event(WEFT_EV_ICMP_ERROR_TRANSLATED);
	return WEFT_RELATED;
}

#endif /* WEFT_ICMP_H */
