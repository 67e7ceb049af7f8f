/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * Test-only programs that expose the datapath's building blocks to BPF_PROG_TEST_RUN
 * (build.rs compiles this for the crate's tests; the library never embeds it).
 *
 *   parse_probe: runs weft_parse() on the frame and stores what it found in
 *                weft_test_parse[0].
 *   ct_probe:    runs the connection-table engine on the frame, tracking every flow it
 *                can without rewriting anything (as policy will): returns
 *                CT_PROBE_CREATED, CT_PROBE_ORIGINAL or CT_PROBE_REPLY (the entry it
 *                found), or TC_ACT_SHOT when the frame has no trackable tuple. Its
 *                weft_ct map is the harness's own.
 */
#include <linux/pkt_cls.h>

#include "weft_ct.h"
#include "weft_parse.h"

#define CT_PROBE_CREATED 10
#define CT_PROBE_ORIGINAL 11
#define CT_PROBE_REPLY 12

/* What parse_probe saw, flat (tests/parse.rs mirrors it). */
struct weft_test_parse {
	__u32 result; /* enum weft_parse_result */
	__u32 family;
	__be32 src[4];
	__be32 dst[4];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 tcp_flags;
	__u8 icmp_type;
	__u8 icmp_code;
	__u16 flags;
	__u16 l4_off;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct weft_test_parse);
	__uint(max_entries, 1);
} weft_test_parse SEC(".maps");

SEC("classifier")
int parse_probe(struct __sk_buff *skb)
{
	struct weft_pkt pkt = {};
	struct weft_test_parse *out;
	__u32 zero = 0;

	out = bpf_map_lookup_elem(&weft_test_parse, &zero);
	if (!out)
		return TC_ACT_SHOT;
	out->result = weft_parse(skb, &pkt);
	out->family = pkt.src.ip.family;
	__builtin_memcpy(out->src, pkt.src.ip.addr, 16);
	__builtin_memcpy(out->dst, pkt.dst.ip.addr, 16);
	out->sport = pkt.sport;
	out->dport = pkt.dport;
	out->proto = pkt.proto;
	out->tcp_flags = pkt.tcp_flags;
	out->icmp_type = pkt.icmp_type;
	out->icmp_code = pkt.icmp_code;
	out->flags = pkt.flags;
	out->l4_off = pkt.l4_off;
	return TC_ACT_OK;
}

SEC("classifier")
int ct_probe(struct __sk_buff *skb)
{
	struct weft_pkt pkt = {};
	struct weft_ct_key k = {};
	struct weft_ct_entry e = {};
	struct weft_ct_entry *found;
	__u64 now = bpf_ktime_get_ns();

	if (weft_parse(skb, &pkt) != WEFT_PARSE_IP || !weft_ct_trackable(&pkt))
		return TC_ACT_SHOT;
	weft_ct_key_of(&k, &pkt);
	found = bpf_map_lookup_elem(&weft_ct, &k);
	if (found) {
		weft_ct_observe(&k, found, &pkt, now);
		return (found->flags & WEFT_CT_F_REPLY) ? CT_PROBE_REPLY : CT_PROBE_ORIGINAL;
	}
	__builtin_memcpy(e.nat_saddr, k.saddr, 16);
	__builtin_memcpy(e.nat_daddr, k.daddr, 16);
	e.nat_sport = k.sport;
	e.nat_dport = k.dport;
	if (weft_ct_create(&k, &e, &pkt, now) != WEFT_CT_CREATED)
		return TC_ACT_SHOT;
	return CT_PROBE_CREATED;
}

char LICENSE[] SEC("license") = "GPL";
