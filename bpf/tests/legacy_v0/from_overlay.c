/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * from_overlay: tc ingress (TCX) of the node's VXLAN device, i.e. frames another node
 * sent, already decapsulated (the fixed-VNI device has dropped other VNIs).
 *
 *   not IP, or IPv6 ND/MLD                       -> kernel
 *   source outside every remote CIDR/VTEP route  -> drop (unknown overlay source)
 *   destination is a pod on this node            -> straight into that pod
 *   destination in this node's CIDR, no pod      -> drop (unknown destination)
 *   anything else (our VTEP address, ...)        -> kernel
 */
#include "weft_counters.h"
#include "weft_deliver.h"
#include "weft_maps.h"
#include "weft_parse.h"

SEC("classifier")
int from_overlay(struct __sk_buff *skb)
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

	route = bpf_map_lookup_elem(&weft_routes, &flow.src);
	if (!route || (route->kind != WEFT_ROUTE_REMOTE_CIDR && route->kind != WEFT_ROUTE_HOST))
		return weft_drop(WEFT_CTR_DROP_UNKNOWN_OVERLAY_SOURCE);

	ep = bpf_map_lookup_elem(&weft_endpoints, &flow.dst.ip);
	if (ep)
		return weft_deliver_local(skb, ep, WEFT_CTR_DECAP_DELIVERY);

	route = bpf_map_lookup_elem(&weft_routes, &flow.dst);
	if (route && route->kind == WEFT_ROUTE_LOCAL_CIDR)
		return weft_drop(WEFT_CTR_DROP_UNKNOWN_LOCAL_DEST);
	return weft_to_kernel(WEFT_CTR_TO_KERNEL);
}

/* The kernel lets only GPL-compatible programs call bpf_check_mtu (and the conntrack
 * kfuncs), so the datapath is dual-licensed and declares its GPL side here. */
char LICENSE[] SEC("license") = "GPL";
