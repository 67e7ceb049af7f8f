/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * Refusing a packet the way a host with no listener would: the packet a pod sent is
 * turned, in place, into a TCP RST (for TCP) or an ICMP / ICMPv6 port unreachable (for
 * UDP) from the address it was sent to, and sent back out of the interface it came in
 * on, into the pod. The client's connect() or its next send then fails at once with
 * ECONNREFUSED, as with kube-proxy's reject.
 *
 * The reply gets fresh IP and transport headers (no IPv4 options or IPv6 extension
 * headers); an ICMP error quotes the invoking packet's IP header and 8 bytes after it,
 * which is what the client needs to find its socket. Checksums are computed whole. The
 * skb keeps its offload state: a pod's packet arrives CHECKSUM_PARTIAL, which the pod's
 * stack takes as verified when the reply comes back over the veth.
 */
#ifndef WEFT_REPLY_H
#define WEFT_REPLY_H

#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>

#include "weft_counters.h"
#include "weft_csum.h"
#include "weft_parse.h"

struct weft_tcp_min {
	__be16 source;
	__be16 dest;
	__be32 seq;
	__be32 ack_seq;
	__u8 doff; /* data offset in the high nibble */
	__u8 flags;
	__be16 window;
	__u16 check;
	__be16 urg_ptr;
};

#define WEFT_IP4_DF 0x4000
#define WEFT_REPLY_TTL 64
#define WEFT_QUOTE_MAX 68 /* an IPv4 header with the most options, and 8 bytes */

/* The words of the IPv4 or IPv6 pseudo-header of `len` bytes of `proto` from src to dst. */
static __always_inline __u32 weft_pseudo_sum(const __be32 *src, const __be32 *dst, int v6,
					     __u8 proto, __u16 len)
{
	__u32 sum;

	if (v6)
		sum = weft_csum_add(weft_csum_add(0, src, 16), dst, 16);
	else
		sum = weft_csum_add(weft_csum_add(0, src, 4), dst, 4);
	return sum + bpf_htons(proto) + bpf_htons(len);
}

/* Writes the Ethernet header of the reply: the addresses of the packet, swapped. */
static __always_inline int weft_reply_eth(struct __sk_buff *skb)
{
	__u8 macs[2 * ETH_ALEN], swapped[2 * ETH_ALEN];

	if (bpf_skb_load_bytes(skb, 0, macs, sizeof(macs)) < 0)
		return -1;
	__builtin_memcpy(swapped, macs + ETH_ALEN, ETH_ALEN);
	__builtin_memcpy(swapped + ETH_ALEN, macs, ETH_ALEN);
	return bpf_skb_store_bytes(skb, 0, swapped, sizeof(swapped), 0);
}

static __always_inline void weft_reply_ip4(struct iphdr *ip, const struct weft_pkt *p, __u8 proto,
					   __u16 payload)
{
	ip->version = 4;
	ip->ihl = 5;
	ip->tot_len = bpf_htons(sizeof(*ip) + payload);
	ip->frag_off = bpf_htons(WEFT_IP4_DF);
	ip->ttl = WEFT_REPLY_TTL;
	ip->protocol = proto;
	ip->saddr = p->dst.ip.addr[0];
	ip->daddr = p->src.ip.addr[0];
	ip->check = weft_csum_final(weft_csum_add(0, ip, sizeof(*ip)));
}

static __always_inline void weft_reply_ip6(struct ipv6hdr *ip, const struct weft_pkt *p, __u8 proto,
					   __u16 payload)
{
	ip->version = 6;
	ip->payload_len = bpf_htons(payload);
	ip->nexthdr = proto;
	ip->hop_limit = WEFT_REPLY_TTL;
	__builtin_memcpy(&ip->saddr, p->dst.ip.addr, 16);
	__builtin_memcpy(&ip->daddr, p->src.ip.addr, 16);
}

/* The length of the IP packet of `p` (from its header). */
static __always_inline int weft_ip_len(struct __sk_buff *skb, int v6)
{
	__be16 len;

	if (bpf_skb_load_bytes(skb, ETH_HLEN + (v6 ? 4 : 2), &len, 2) < 0)
		return -1;
	return bpf_ntohs(len) + (v6 ? sizeof(struct ipv6hdr) : 0);
}

/* Turns TCP packet `p` into the RST a closed port answers it with (RFC 9293 3.10.7.1). */
static __always_inline int weft_reply_rst(struct __sk_buff *skb, const struct weft_pkt *p)
{
	int v6 = p->src.ip.family == WEFT_FAMILY_IPV6;
	struct weft_tcp_min in, rst = {};
	union {
		struct iphdr ip4;
		struct ipv6hdr ip6;
	} hdr = {};
	__u32 iph = v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr);
	__u32 sum, seg;
	int ip_len;

	if (bpf_skb_load_bytes(skb, p->l4_off, &in, sizeof(in)) < 0)
		return -1;
	ip_len = weft_ip_len(skb, v6);
	if (ip_len < 0)
		return -1;
	seg = ip_len - (p->l4_off - ETH_HLEN) - (in.doff >> 4) * 4;
	if (in.flags & WEFT_TCP_SYN)
		seg += 1;
	if (in.flags & WEFT_TCP_FIN)
		seg += 1;

	rst.source = in.dest;
	rst.dest = in.source;
	rst.doff = 5 << 4;
	if (in.flags & WEFT_TCP_ACK) {
		rst.seq = in.ack_seq;
		rst.flags = WEFT_TCP_RST;
	} else {
		rst.ack_seq = bpf_htonl(bpf_ntohl(in.seq) + seg);
		rst.flags = WEFT_TCP_RST | WEFT_TCP_ACK;
	}
	sum = weft_pseudo_sum(p->dst.ip.addr, p->src.ip.addr, v6, IPPROTO_TCP, sizeof(rst));
	rst.check = weft_csum_final(weft_csum_add(sum, &rst, sizeof(rst)));

	if (v6)
		weft_reply_ip6(&hdr.ip6, p, IPPROTO_TCP, sizeof(rst));
	else
		weft_reply_ip4(&hdr.ip4, p, IPPROTO_TCP, sizeof(rst));
	if (bpf_skb_change_tail(skb, ETH_HLEN + iph + sizeof(rst), 0) < 0)
		return -1;
	if (weft_reply_eth(skb) < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, ETH_HLEN, &hdr, iph, 0) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, ETH_HLEN + iph, &rst, sizeof(rst), 0);
}

/* Turns packet `p` into an ICMP (v4: type 3 code 3) or ICMPv6 (type 1 code 4) port
 * unreachable quoting it. */
static __always_inline int weft_reply_unreachable(struct __sk_buff *skb, const struct weft_pkt *p)
{
	int v6 = p->src.ip.family == WEFT_FAMILY_IPV6;
	__u8 quote[WEFT_QUOTE_MAX] = {};
	struct {
		__u8 type;
		__u8 code;
		__u16 check;
		__u32 unused;
	} icmp = {};
	union {
		struct iphdr ip4;
		struct ipv6hdr ip6;
	} ip = {};
	__u32 iph = v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr);
	__u32 qlen, sum = 0, i;

	/* IPv4: the header (options included) and 8 bytes; IPv6: the header and 8 bytes. */
	qlen = v6 ? sizeof(struct ipv6hdr) + 8 : (__u32)(p->l4_off - ETH_HLEN) + 8;
	if (qlen < 28 || qlen > WEFT_QUOTE_MAX)
		return -1;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, quote, qlen) < 0)
		return -1;

	icmp.type = v6 ? 1 : 3;
	icmp.code = v6 ? 4 : 3;
	if (v6)
		sum = weft_pseudo_sum(p->dst.ip.addr, p->src.ip.addr, 1, IPPROTO_ICMPV6,
				      sizeof(icmp) + qlen);
	sum = weft_csum_add(sum, &icmp, sizeof(icmp));
#pragma unroll
	for (i = 0; i < WEFT_QUOTE_MAX / 2; i++)
		if (i < qlen / 2)
			sum += ((__u16 *)quote)[i];
	icmp.check = weft_csum_final(sum);

	if (v6)
		weft_reply_ip6(&ip.ip6, p, IPPROTO_ICMPV6, sizeof(icmp) + qlen);
	else
		weft_reply_ip4(&ip.ip4, p, IPPROTO_ICMP, sizeof(icmp) + qlen);
	if (bpf_skb_change_tail(skb, ETH_HLEN + iph + sizeof(icmp) + qlen, 0) < 0)
		return -1;
	if (weft_reply_eth(skb) < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, ETH_HLEN, &ip, iph, 0) < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, ETH_HLEN + iph, &icmp, sizeof(icmp), 0) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, ETH_HLEN + iph + sizeof(icmp), quote, qlen, 0);
}

/*
 * Refuses `p` (a pod's packet to a service address) with a RST or a port unreachable,
 * counted as `why`. A RST is never answered, and a protocol without a refusal (neither
 * TCP nor UDP) is only dropped.
 */
WEFT_SUBPROG int weft_reject(struct __sk_buff *skb, struct weft_pkt *p, enum weft_counter why)
{
	int rc;

	if (p->proto == IPPROTO_TCP && !(p->tcp_flags & WEFT_TCP_RST))
		rc = weft_reply_rst(skb, p);
	else if (p->proto == IPPROTO_UDP)
		rc = weft_reply_unreachable(skb, p);
	else
		return weft_drop(why);
	if (rc < 0)
		return weft_drop(WEFT_CTR_DROP_REWRITE_FAILED);
	weft_count(why);
	return bpf_redirect(skb->ifindex, 0);
}

#endif /* WEFT_REPLY_H */
