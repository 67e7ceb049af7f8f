/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * Internet checksums for the packets the programs rewrite or build (RFC 1071, and the
 * incremental update of RFC 1624). Words are taken raw from memory, as they lie in the
 * packet; the one's complement sum does not depend on byte order as long as every word
 * (the checksum field included) is read the same way.
 */
#ifndef WEFT_CSUM_H
#define WEFT_CSUM_H

#include <linux/types.h>

static __always_inline __u16 weft_csum_fold(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

/* Adds to `diff` the change of one checksummed 16-bit word from `from` to `to`. */
static __always_inline __u32 weft_csum_diff16(__u32 diff, __u16 from, __u16 to)
{
	return diff + (__u16)~from + to;
}

/* ... of a 32-bit field (two words). */
static __always_inline __u32 weft_csum_diff32(__u32 diff, __u32 from, __u32 to)
{
	diff = weft_csum_diff16(diff, from & 0xffff, to & 0xffff);
	return weft_csum_diff16(diff, from >> 16, to >> 16);
}

/* ... of an address: 4 words for IPv6, the first word only for IPv4. */
static __always_inline __u32 weft_csum_diff_addr(__u32 diff, const __be32 *from, const __be32 *to,
						 int v6)
{
	diff = weft_csum_diff32(diff, from[0], to[0]);
	if (v6) {
		diff = weft_csum_diff32(diff, from[1], to[1]);
		diff = weft_csum_diff32(diff, from[2], to[2]);
		diff = weft_csum_diff32(diff, from[3], to[3]);
	}
	return diff;
}

/* The checksum field `check` once the data it covers changed by `diff`. */
static __always_inline __u16 weft_csum_update(__u16 check, __u32 diff)
{
	return ~weft_csum_fold((__u64)(__u16)~check + diff);
}

/* Sums `len` bytes (a multiple of 2) of `buf` into `sum`. */
static __always_inline __u32 weft_csum_add(__u32 sum, const void *buf, int len)
{
	const __u16 *w = buf;
	int i;

#pragma unroll
	for (i = 0; i < len / 2; i++)
		sum += w[i];
	return sum;
}

/* The checksum of data whose words sum to `sum`. */
static __always_inline __u16 weft_csum_final(__u32 sum)
{
	return ~weft_csum_fold(sum);
}

#endif /* WEFT_CSUM_H */
