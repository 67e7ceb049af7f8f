/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * Types every map header shares.
 *
 * The map headers under maps/ are the single source of truth for the layout of every
 * map, one header per concern. The Rust crate `weft-datapath` mirrors them in
 * `src/layout.rs`; its layout test reads the BTF of the compiled objects and fails when
 * a struct, a field offset or size, an enum value or a map definition disagrees, or
 * when the BTF holds a struct or map the Rust side does not mirror.
 *
 * Each map header declares its map's layout version (`WEFT_<MAP>_LAYOUT`), which is
 * part of the map's pinned name (`maps/<name>_v<version>`). Changing a key or value
 * layout means bumping that version and teaching the loader to migrate the previous
 * one (`src/maps.rs`); an unchanged version keeps the pinned map across upgrades.
 *
 * All addresses are stored in network byte order. IPv4 addresses use the first word of
 * `addr` and leave the other three zero, so one key type serves both families and a
 * single lookup covers dual-stack pods.
 */
#ifndef WEFT_TYPES_H
#define WEFT_TYPES_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

enum weft_family {
	WEFT_FAMILY_IPV4 = 4,
	WEFT_FAMILY_IPV6 = 6,
};

/* Bits of family + padding that precede the address in an LPM key: route prefix
 * lengths are counted from the start of struct weft_ip, so they include these. */
enum weft_lpm {
	WEFT_LPM_FAMILY_BITS = 32,
};

/* A pod, node or service address: key of weft_endpoints and the data of route keys. */
struct weft_ip {
	__u8 family; /* enum weft_family */
	__u8 pad[3]; /* always zero: it is part of the hashed key */
	__be32 addr[4];
};

/* A BPF-to-BPF function for a rare path: verified once, keeping the callers small.
 * Not every program that includes it calls it. */
#define WEFT_SUBPROG static __attribute__((noinline, unused))

/*
 * clang only emits BTF for types something references, and constants are only ever
 * used as numbers. Each header declares one never-loaded variable in this section that
 * references its constant enums, so the layout test can read their values from BTF.
 * Loaders skip the section.
 */
#define WEFT_BTF_ANCHOR(name) static struct name name __attribute__((section(".weft.btf"), used))

struct weft_btf_types {
	enum weft_family family;
	enum weft_lpm lpm;
};
WEFT_BTF_ANCHOR(weft_btf_types);

#endif /* WEFT_TYPES_H */
