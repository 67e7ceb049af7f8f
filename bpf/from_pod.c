/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * from_pod: tc ingress (TCX) of every host-side pod veth, i.e. everything a pod sends.
 *
 *   not IP, or IPv6 ND/MLD                    -> kernel
 *   malformed IP or transport header          -> drop
 *   source not this veth's own pod address    -> drop (spoofed source)
 *   a tracked connection's packet, or an ICMP error about one
 *                                             -> rewritten as its entry says (to the
 *                                                backend; replies back to the service
 *                                                address), then delivered as below;
 *                                                backend removed: RST to the client
 *   destination is a pod on this node         -> straight into that pod
 *   destination in another node's pod CIDR    -> overlay (or kernel if too big)
 *   destination in this node's CIDR, no pod   -> drop (unknown destination)
 *   destination a service frontend            -> new connection: backend chosen,
 *                                                rewritten, delivered as above; no
 *                                                endpoints: RST / port unreachable;
 *                                                none usable here: drop
 *   a ClusterIP, another port                 -> RST / port unreachable
 *   in a service CIDR, no frontend            -> drop
 *   anything else (node addresses, world)     -> kernel (routing, masquerade)
 */
#include "maps/endpoints.h"
#include "maps/routes.h"
#include "weft_counters.h"
#include "weft_deliver.h"
#include "weft_parse.h"
#include "weft_reply.h"
#include "weft_service.h"

/* Where a packet goes once its (possibly rewritten) destination is final. */
static __always_inline int weft_pod_deliver(struct __sk_buff *skb, const struct weft_pkt *pkt,
					    int translated)
{
	struct weft_endpoint *ep;
	struct weft_route *route;

	ep = bpf_map_lookup_elem(&weft_endpoints, &pkt->dst.ip);
	if (ep)
		return weft_deliver_local(skb, ep, WEFT_CTR_LOCAL_DELIVERY);

	route = bpf_map_lookup_elem(&weft_routes, &pkt->dst);
	if (route) {
		if (route->kind == WEFT_ROUTE_REMOTE_CIDR)
			return weft_encap(skb, route);
		if (route->kind == WEFT_ROUTE_LOCAL_CIDR)
			return weft_drop(WEFT_CTR_DROP_UNKNOWN_LOCAL_DEST);
	}
	if (translated)
		return weft_to_kernel(WEFT_CTR_TO_KERNEL);
	return -1;
}

SEC("classifier")
int from_pod(struct __sk_buff *skb)
{
	struct weft_pkt pkt = {};
	struct weft_endpoint *ep;
	int rc;

	switch (weft_parse(skb, &pkt)) {
	case WEFT_PARSE_IP:
		break;
	case WEFT_PARSE_PASS:
		return weft_to_kernel(WEFT_CTR_TO_KERNEL);
	default:
		return weft_drop(WEFT_CTR_DROP_MALFORMED);
	}

	ep = bpf_map_lookup_elem(&weft_endpoints, &pkt.src.ip);
	if (!ep || ep->ifindex != skb->ifindex)
		return weft_drop(WEFT_CTR_DROP_SPOOFED_SOURCE);

	rc = weft_tracked(skb, &pkt, 1);
	if (rc == WEFT_RESET_BACKEND_GONE)
		return weft_reject(skb, &pkt, WEFT_CTR_RESET_BACKEND_GONE);
	if (rc == WEFT_CONTINUE)
		return weft_pod_deliver(skb, &pkt, 1);
	if (rc >= 0)
		return rc;

	rc = weft_pod_deliver(skb, &pkt, 0);
	if (rc >= 0)
		return rc;

	rc = weft_service(skb, &pkt);
	if (rc == WEFT_CONTINUE)
		return weft_pod_deliver(skb, &pkt, 1);
	if (rc == WEFT_REJECT_NO_ENDPOINTS)
		return weft_reject(skb, &pkt, WEFT_CTR_REJECT_NO_ENDPOINTS);
	if (rc == WEFT_REJECT_UNKNOWN_PORT)
		return weft_reject(skb, &pkt, WEFT_CTR_REJECT_UNKNOWN_PORT);
	if (rc >= 0)
		return rc;
	return weft_to_kernel(WEFT_CTR_TO_KERNEL);
}

/* The kernel lets only GPL-compatible programs call bpf_check_mtu (and the conntrack
 * kfuncs), so the datapath is dual-licensed and declares its GPL side here. */
char LICENSE[] SEC("license") = "GPL";
