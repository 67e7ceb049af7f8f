/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * from_overlay: tc ingress (TCX) of the node's VXLAN device, i.e. frames another node
 * sent, already decapsulated (the fixed-VNI device has dropped other VNIs).
 *
 *   not IP, or IPv6 ND/MLD                       -> kernel
 *   malformed IP or transport header             -> drop
 *   source outside every remote pod CIDR         -> drop (unknown overlay source;
 *                                                   this node's own VTEP address too)
 *   a reply of a connection a local client made to a service (or an ICMP error about
 *   one)                                         -> rewritten back to the service
 *                                                   address, then delivered as below;
 *                                                   from a removed backend: drop
 *   destination is a pod on this node            -> straight into that pod
 *   destination in this node's CIDR, no pod      -> drop (unknown destination)
 *   anything else (our VTEP address, ...)        -> kernel
 */
#include "maps/endpoints.h"
#include "maps/routes.h"
#include "weft_counters.h"
#include "weft_deliver.h"
#include "weft_parse.h"
#include "weft_service.h"

SEC("classifier")
int from_overlay(struct __sk_buff *skb)
{
	struct weft_pkt pkt = {};
	struct weft_endpoint *ep;
	struct weft_route *route;
	int rc;

	switch (weft_parse(skb, &pkt)) {
	case WEFT_PARSE_IP:
		break;
	case WEFT_PARSE_PASS:
		return weft_to_kernel(WEFT_CTR_TO_KERNEL);
	default:
		return weft_drop(WEFT_CTR_DROP_MALFORMED);
	}

	/* Only another node's pod CIDR (which holds that node's VTEP address) is a
	 * legitimate inner source. A HOST route is one of this node's own VTEP addresses:
	 * no peer sends from it, so such a packet is spoofed. */
	route = bpf_map_lookup_elem(&weft_routes, &pkt.src);
	if (!route || route->kind != WEFT_ROUTE_REMOTE_CIDR)
		return weft_drop(WEFT_CTR_DROP_UNKNOWN_OVERLAY_SOURCE);

	rc = weft_tracked(skb, &pkt, 0);
	if (rc >= 0)
		return rc;

	ep = bpf_map_lookup_elem(&weft_endpoints, &pkt.dst.ip);
	if (ep)
		return weft_deliver_local(skb, ep, WEFT_CTR_DECAP_DELIVERY);

	route = bpf_map_lookup_elem(&weft_routes, &pkt.dst);
	if (route && route->kind == WEFT_ROUTE_LOCAL_CIDR)
		return weft_drop(WEFT_CTR_DROP_UNKNOWN_LOCAL_DEST);
	return weft_to_kernel(WEFT_CTR_TO_KERNEL);
}

/* The kernel lets only GPL-compatible programs call bpf_check_mtu (and the conntrack
 * kfuncs), so the datapath is dual-licensed and declares its GPL side here. */
char LICENSE[] SEC("license") = "GPL";
