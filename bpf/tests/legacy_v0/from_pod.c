/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * from_pod: tc ingress (TCX) of every host-side pod veth, i.e. everything a pod sends.
 *
 *   not IP, or IPv6 ND/MLD                    -> kernel
 *   source not this veth's own pod address    -> drop (spoofed source)
 *   destination is a pod on this node         -> straight into that pod
 *   destination in another node's pod CIDR    -> overlay (or kernel if too big)
 *   destination in this node's CIDR, no pod   -> drop (unknown destination)
 *   anything else (node addresses, world)     -> kernel (routing, masquerade)
 */
#include "weft_counters.h"
#include "weft_deliver.h"
#include "weft_maps.h"
#include "weft_parse.h"

SEC("classifier")
int from_pod(struct __sk_buff *skb)
{
	struct weft_flow flow = {};
	struct weft_endpoint *ep;
	struct weft_route *route;

	switch (weft_parse(skb, &flow)) {
	case WEFT_PARSE_IP:
		break;
	case WEFT_PARSE_PASS:
		return weft_to_kernel(WEFT_CTR_TO_KERNEL);
	default:
		return weft_drop(WEFT_CTR_DROP_MALFORMED);
	}

	ep = bpf_map_lookup_elem(&weft_endpoints, &flow.src.ip);
	if (!ep || ep->ifindex != skb->ifindex)
		return weft_drop(WEFT_CTR_DROP_SPOOFED_SOURCE);

	ep = bpf_map_lookup_elem(&weft_endpoints, &flow.dst.ip);
	if (ep)
		return weft_deliver_local(skb, ep, WEFT_CTR_LOCAL_DELIVERY);

	route = bpf_map_lookup_elem(&weft_routes, &flow.dst);
	if (route) {
		if (route->kind == WEFT_ROUTE_REMOTE_CIDR)
			return weft_encap(skb, route);
		if (route->kind == WEFT_ROUTE_LOCAL_CIDR)
			return weft_drop(WEFT_CTR_DROP_UNKNOWN_LOCAL_DEST);
	}
	return weft_to_kernel(WEFT_CTR_TO_KERNEL);
}

/* The kernel lets only GPL-compatible programs call bpf_check_mtu (and the conntrack
 * kfuncs), so the datapath is dual-licensed and declares its GPL side here. */
char LICENSE[] SEC("license") = "GPL";
