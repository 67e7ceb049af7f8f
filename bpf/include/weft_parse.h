/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * Reading a frame's 5-tuple: addresses, protocol and ports (or the ICMP echo id), the
 * one parse every program starts with, for routing, the connection table, services and
 * policy.
 *
 *   IPv4: options skipped (flagged). IPv6: hop-by-hop, routing, destination options,
 *   fragment and AH headers skipped, up to WEFT_MAX_EXT_HEADERS of them (flagged).
 *   TCP, UDP, UDP-Lite, SCTP: ports. TCP: its flags too.
 *   ICMP/ICMPv6: type and code; echo request/reply: the id in both ports; errors:
 *     flagged, with the offset of the embedded header (read by weft_icmp.h).
 *   Fragments: flagged. A first fragment has its ports; a later one has no transport
 *     header, so no ports (WEFT_PKT_L4 is not set). weft does not reassemble or track
 *     fragments: the address-only paths (pod to pod, to the kernel) carry later
 *     fragments as any packet, and anything that needs ports (services; policy) must
 *     refuse a packet without WEFT_PKT_L4.
 *
 * A header that is cut short, or contradicts itself, makes the frame malformed: the
 * programs drop it. Non-IP frames and IPv6 from link-local or unspecified sources
 * (neighbour discovery, MLD) are not ours to steer: they go to the kernel.
 */
#ifndef WEFT_PARSE_H
#define WEFT_PARSE_H

#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>

#include "maps/routes.h"

#ifndef IPPROTO_ICMPV6
#define IPPROTO_ICMPV6 58
#endif
#define WEFT_IPPROTO_HOPOPTS 0
#define WEFT_IPPROTO_ROUTING 43
#define WEFT_IPPROTO_FRAGMENT 44
#define WEFT_IPPROTO_AH 51
#define WEFT_IPPROTO_NONE 59
#define WEFT_IPPROTO_DSTOPTS 60
#define WEFT_IPPROTO_MH 135

#define WEFT_IP_MF 0x2000
#define WEFT_IP_OFFSET 0x1fff

/* IPv6 extension headers walked before giving up on finding the transport header. */
#define WEFT_MAX_EXT_HEADERS 6

enum weft_pkt_flag {
	WEFT_PKT_L4 = 1 << 0, /* sport/dport are known (ports, or the echo id) */
	WEFT_PKT_FRAG = 1 << 1, /* a fragment, first or later */
	WEFT_PKT_FRAG_LATER = 1 << 2, /* not the first fragment: no transport header */
	WEFT_PKT_IP_OPTIONS = 1 << 3, /* IPv4 options or IPv6 extension headers */
	WEFT_PKT_ICMP_ERROR = 1 << 4, /* ICMP(v6) error; embedded header at l4_off + 8 */
	WEFT_PKT_ICMP_ECHO = 1 << 5, /* ICMP(v6) echo request or reply */
	WEFT_PKT_EXT_UNPARSED = 1 << 6, /* IPv6: more extension headers than walked */
};

/*
 * A parsed frame. Source and destination are route keys (their `ip` doubles as an
 * endpoint key); `src.ip.family` is the family. Offsets count from the start of the
 * frame (the Ethernet header).
 */
struct weft_pkt {
	struct weft_route_key src;
	struct weft_route_key dst;
	__be16 sport; /* TCP/UDP/SCTP source port; ICMP echo: the id */
	__be16 dport; /* destination port; ICMP echo: the id again */
	__u8 proto; /* IPPROTO_*, after any extension headers */
	__u8 tcp_flags; /* TCP: the flags byte (FIN 0x01, SYN 0x02, RST 0x04, ACK 0x10) */
	__u8 icmp_type;
	__u8 icmp_code;
	__u16 flags; /* enum weft_pkt_flag */
	__u16 l4_off; /* where the transport header starts (valid with a known proto) */
};

enum weft_parse_result {
	WEFT_PARSE_IP, /* pkt filled in */
	WEFT_PARSE_PASS, /* not ours to steer: ARP, ND/MLD (link-local or unspecified source) */
	WEFT_PARSE_MALFORMED,
};

#define WEFT_TCP_FIN 0x01
#define WEFT_TCP_SYN 0x02
#define WEFT_TCP_RST 0x04
#define WEFT_TCP_PSH 0x08
#define WEFT_TCP_ACK 0x10

/*
 * Makes the first `len` bytes directly readable. Headers are normally in the linear
 * area already; pulling is the rare path (e.g. some decapsulated or GRO'd skbs), and
 * only a frame that is really shorter than its headers counts as malformed.
 */
static __always_inline int weft_linear(struct __sk_buff *skb, __u32 len)
{
	if ((void *)(long)skb->data + len <= (void *)(long)skb->data_end)
		return 0;
	if (skb->len < len)
		return -1;
	return bpf_skb_pull_data(skb, len) == 0 ? 0 : -1;
}

static __always_inline void weft_key_ip4(struct weft_route_key *k, __be32 addr)
{
	k->prefixlen = WEFT_LPM_FAMILY_BITS + 32;
	k->ip.family = WEFT_FAMILY_IPV4;
	k->ip.addr[0] = addr;
}

static __always_inline void weft_key_ip6(struct weft_route_key *k, const struct in6_addr *addr)
{
	k->prefixlen = WEFT_LPM_FAMILY_BITS + 128;
	k->ip.family = WEFT_FAMILY_IPV6;
	k->ip.addr[0] = addr->in6_u.u6_addr32[0];
	k->ip.addr[1] = addr->in6_u.u6_addr32[1];
	k->ip.addr[2] = addr->in6_u.u6_addr32[2];
	k->ip.addr[3] = addr->in6_u.u6_addr32[3];
}

/* fe80::/10 (link-local) or :: (unspecified): neighbour discovery and MLD. */
static __always_inline int weft_ip6_is_link_scoped(const struct in6_addr *a)
{
	__u32 w0 = a->in6_u.u6_addr32[0];

	if ((w0 & bpf_htonl(0xffc00000)) == bpf_htonl(0xfe800000))
		return 1;
	return (w0 | a->in6_u.u6_addr32[1] | a->in6_u.u6_addr32[2] | a->in6_u.u6_addr32[3]) == 0;
}

static __always_inline int weft_is_icmp_error(__u8 proto, __u8 type)
{
	if (proto == IPPROTO_ICMP)
		return type == 3 || type == 11 || type == 12; /* unreachable, time exceeded, parameter */
	return type >= 1 && type <= 4; /* unreachable, too big, time exceeded, parameter */
}

static __always_inline int weft_is_icmp_echo(__u8 proto, __u8 type)
{
	if (proto == IPPROTO_ICMP)
		return type == 8 || type == 0;
	return type == 128 || type == 129;
}

/*
 * The transport header of `p` at p->l4_off: ports, TCP flags, ICMP type. Fails (the
 * frame is malformed) when the header is cut short.
 */
static __always_inline int weft_parse_l4(struct __sk_buff *skb, struct weft_pkt *p)
{
	__u8 hdr[14];

	switch (p->proto) {
	case IPPROTO_TCP:
		if (bpf_skb_load_bytes(skb, p->l4_off, hdr, 14) < 0)
			return -1;
		if ((hdr[12] >> 4) < 5) /* data offset below the minimum header */
			return -1;
		p->tcp_flags = hdr[13];
		break;
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE:
		if (bpf_skb_load_bytes(skb, p->l4_off, hdr, 8) < 0)
			return -1;
		break;
	case IPPROTO_SCTP:
		if (bpf_skb_load_bytes(skb, p->l4_off, hdr, 12) < 0)
			return -1;
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if (bpf_skb_load_bytes(skb, p->l4_off, hdr, 8) < 0)
			return -1;
		p->icmp_type = hdr[0];
		p->icmp_code = hdr[1];
		if (weft_is_icmp_echo(p->proto, hdr[0])) {
			__builtin_memcpy(&p->sport, &hdr[4], 2);
			p->dport = p->sport;
			p->flags |= WEFT_PKT_ICMP_ECHO | WEFT_PKT_L4;
		} else if (weft_is_icmp_error(p->proto, hdr[0])) {
			p->flags |= WEFT_PKT_ICMP_ERROR;
		}
		return 0;
	default:
		return 0; /* no ports: addresses only */
	}
	__builtin_memcpy(&p->sport, &hdr[0], 2);
	__builtin_memcpy(&p->dport, &hdr[2], 2);
	p->flags |= WEFT_PKT_L4;
	return 0;
}

static __always_inline enum weft_parse_result weft_parse_ip4(struct __sk_buff *skb,
							     struct weft_pkt *p)
{
	void *data, *data_end;
	struct iphdr *ip4;
	__u16 frag;

	if (weft_linear(skb, ETH_HLEN + sizeof(*ip4)))
		return WEFT_PARSE_MALFORMED;
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	ip4 = data + ETH_HLEN;
	if ((void *)(ip4 + 1) > data_end)
		return WEFT_PARSE_MALFORMED;
	if (ip4->version != 4 || ip4->ihl < 5 || bpf_ntohs(ip4->tot_len) < ip4->ihl * 4)
		return WEFT_PARSE_MALFORMED;
	weft_key_ip4(&p->src, ip4->saddr);
	weft_key_ip4(&p->dst, ip4->daddr);
	p->proto = ip4->protocol;
	p->l4_off = ETH_HLEN + ip4->ihl * 4;
	if (ip4->ihl > 5)
		p->flags |= WEFT_PKT_IP_OPTIONS;
	frag = bpf_ntohs(ip4->frag_off);
	if (frag & (WEFT_IP_MF | WEFT_IP_OFFSET))
		p->flags |= WEFT_PKT_FRAG;
	if (frag & WEFT_IP_OFFSET) {
		p->flags |= WEFT_PKT_FRAG_LATER;
		return WEFT_PARSE_IP;
	}
	return weft_parse_l4(skb, p) ? WEFT_PARSE_MALFORMED : WEFT_PARSE_IP;
}

static __always_inline enum weft_parse_result weft_parse_ip6(struct __sk_buff *skb,
							     struct weft_pkt *p)
{
	void *data, *data_end;
	struct ipv6hdr *ip6;
	__u8 next, ext[2];
	__u16 off;
	int i;

	if (weft_linear(skb, ETH_HLEN + sizeof(*ip6)))
		return WEFT_PARSE_MALFORMED;
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	ip6 = data + ETH_HLEN;
	if ((void *)(ip6 + 1) > data_end)
		return WEFT_PARSE_MALFORMED;
	if (ip6->version != 6)
		return WEFT_PARSE_MALFORMED;
	if (weft_ip6_is_link_scoped(&ip6->saddr))
		return WEFT_PARSE_PASS;
	weft_key_ip6(&p->src, &ip6->saddr);
	weft_key_ip6(&p->dst, &ip6->daddr);
	next = ip6->nexthdr;
	off = ETH_HLEN + sizeof(*ip6);

#pragma unroll
	for (i = 0; i < WEFT_MAX_EXT_HEADERS; i++) {
		switch (next) {
		case WEFT_IPPROTO_HOPOPTS:
		case WEFT_IPPROTO_ROUTING:
		case WEFT_IPPROTO_DSTOPTS:
		case WEFT_IPPROTO_MH:
			if (bpf_skb_load_bytes(skb, off, ext, 2) < 0)
				return WEFT_PARSE_MALFORMED;
			p->flags |= WEFT_PKT_IP_OPTIONS;
			next = ext[0];
			off += (ext[1] + 1) * 8;
			continue;
		case WEFT_IPPROTO_AH:
			if (bpf_skb_load_bytes(skb, off, ext, 2) < 0)
				return WEFT_PARSE_MALFORMED;
			p->flags |= WEFT_PKT_IP_OPTIONS;
			next = ext[0];
			off += (ext[1] + 2) * 4;
			continue;
		case WEFT_IPPROTO_FRAGMENT: {
			__u8 frag[4];
			__u16 frag_off;

			if (bpf_skb_load_bytes(skb, off, frag, 4) < 0)
				return WEFT_PARSE_MALFORMED;
			p->flags |= WEFT_PKT_IP_OPTIONS | WEFT_PKT_FRAG;
			next = frag[0];
			off += 8;
			frag_off = ((__u16)frag[2] << 8 | frag[3]) & 0xfff8;
			if (frag_off) {
				p->proto = next;
				p->l4_off = off;
				p->flags |= WEFT_PKT_FRAG_LATER;
				return WEFT_PARSE_IP;
			}
			continue;
		}
		default:
			goto upper;
		}
	}
	/* Still on an extension header: no transport header found. */
	p->proto = next;
	p->l4_off = off;
	p->flags |= WEFT_PKT_EXT_UNPARSED;
	return WEFT_PARSE_IP;

upper:
	p->proto = next;
	p->l4_off = off;
	if (next == WEFT_IPPROTO_NONE)
		return WEFT_PARSE_IP;
	return weft_parse_l4(skb, p) ? WEFT_PARSE_MALFORMED : WEFT_PARSE_IP;
}

/* `p` must be zeroed by the caller: the padding and unused address words are key bytes. */
static __always_inline enum weft_parse_result weft_parse(struct __sk_buff *skb, struct weft_pkt *p)
{
	if (skb->protocol == bpf_htons(ETH_P_IP))
		return weft_parse_ip4(skb, p);
	if (skb->protocol == bpf_htons(ETH_P_IPV6))
		return weft_parse_ip6(skb, p);
	return WEFT_PARSE_PASS;
}

#endif /* WEFT_PARSE_H */
