/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/* Reading the addresses out of a frame: the only packet parsing the datapath does. */
#ifndef WEFT_PARSE_H
#define WEFT_PARSE_H

#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>

#include "weft_maps.h"

/* Source and destination as route keys: their `ip` member doubles as endpoint key. */
struct weft_flow {
	struct weft_route_key src;
	struct weft_route_key dst;
};

enum weft_parse_result {
	WEFT_PARSE_IP, /* flow filled in */
	WEFT_PARSE_PASS, /* not ours to steer: ARP, ND/MLD (link-local or unspecified source) */
	WEFT_PARSE_MALFORMED,
};

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

/* `f` must be zeroed by the caller: the padding and unused address words are key bytes. */
static __always_inline enum weft_parse_result weft_parse(struct __sk_buff *skb, struct weft_flow *f)
{
	void *data, *data_end;
	struct ethhdr *eth;

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip4;

		if (weft_linear(skb, sizeof(*eth) + sizeof(*ip4)))
			return WEFT_PARSE_MALFORMED;
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
		eth = data;
		ip4 = (void *)(eth + 1);
		if ((void *)(ip4 + 1) > data_end)
			return WEFT_PARSE_MALFORMED;
		if (ip4->version != 4 || ip4->ihl < 5)
			return WEFT_PARSE_MALFORMED;
		weft_key_ip4(&f->src, ip4->saddr);
		weft_key_ip4(&f->dst, ip4->daddr);
		return WEFT_PARSE_IP;
	}

	if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6;

		if (weft_linear(skb, sizeof(*eth) + sizeof(*ip6)))
			return WEFT_PARSE_MALFORMED;
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
		eth = data;
		ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			return WEFT_PARSE_MALFORMED;
		if (ip6->version != 6)
			return WEFT_PARSE_MALFORMED;
		if (weft_ip6_is_link_scoped(&ip6->saddr))
			return WEFT_PARSE_PASS;
		weft_key_ip6(&f->src, &ip6->saddr);
		weft_key_ip6(&f->dst, &ip6->daddr);
		return WEFT_PARSE_IP;
	}

	return WEFT_PARSE_PASS;
}

#endif /* WEFT_PARSE_H */
