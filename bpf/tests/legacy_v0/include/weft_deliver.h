/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/* Where a packet goes once the program knows: a local pod, or the overlay. */
#ifndef WEFT_DELIVER_H
#define WEFT_DELIVER_H

#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/pkt_cls.h>

#include "weft_counters.h"
#include "weft_maps.h"

/*
 * Hands the frame straight to the pod's eth0, skipping the node's stack and the
 * veth transmit path. Kernels before 6.15 do not reset pkt_type in redirect_peer,
 * so a frame classified as OTHERHOST on the way in would be dropped inside the pod;
 * forcing PACKET_HOST first makes the result independent of the kernel version.
 */
static __always_inline int weft_deliver_local(struct __sk_buff *skb, const struct weft_endpoint *ep,
					      enum weft_counter outcome)
{
	bpf_skb_change_type(skb, PACKET_HOST);
	weft_count(outcome);
	return bpf_redirect_peer(ep->ifindex, 0);
}

/*
 * Steers a frame into the node's fixed-VNI VXLAN device. The device's forwarding
 * database maps the inner destination MAC (the remote VTEP MAC) to the remote
 * node's underlay address, so rewriting the inner MACs is all the encapsulation
 * this program does; the receiver then sees a frame addressed to itself.
 *
 * The VXLAN device's MTU is not enforced on bpf_redirect: an oversize frame would
 * be silently fragmented outside. Oversize frames (or GSO segments) are therefore
 * handed to the kernel, whose route via the same device answers with ICMP
 * fragmentation-needed / packet-too-big.
 */
static __always_inline int weft_encap(struct __sk_buff *skb, const struct weft_route *route)
{
	__u32 zero = 0, mtu_len = 0;
	struct weft_config *cfg;
	__u8 macs[2 * ETH_ALEN];
	long rc;

	cfg = bpf_map_lookup_elem(&weft_config, &zero);
	if (!cfg || cfg->vxlan_ifindex == 0)
		return weft_to_kernel(WEFT_CTR_OVERLAY_FALLBACK);

	rc = bpf_check_mtu(skb, cfg->vxlan_ifindex, &mtu_len, 0, BPF_MTU_CHK_SEGS);
	if (rc < 0) /* the configured device is gone */
		return weft_to_kernel(WEFT_CTR_OVERLAY_FALLBACK);
	if (rc > 0)
		return weft_to_kernel(WEFT_CTR_MTU_FALLBACK);

	__builtin_memcpy(macs, route->vtep_mac, ETH_ALEN);
	__builtin_memcpy(macs + ETH_ALEN, cfg->vtep_mac, ETH_ALEN);
	/* Fails only when unsharing a cloned skb runs out of memory. */
	if (bpf_skb_store_bytes(skb, 0, macs, sizeof(macs), 0) < 0)
		return weft_to_kernel(WEFT_CTR_OVERLAY_FALLBACK);

	weft_count(WEFT_CTR_ENCAP);
	return bpf_redirect(cfg->vxlan_ifindex, 0);
}

#endif /* WEFT_DELIVER_H */
