//! `enum weft_counter` (`maps/counters.h`: one outcome per packet) and `enum weft_event`
//! (`maps/events.h`: what the programs did besides), each declared once here: the Rust
//! enum, its metric names, its C names and the values the layout test compares with BTF.

/// How an outcome ended for the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutcomeKind {
    /// It went on: to a pod, the overlay or the kernel.
    Forwarded,
    /// It was answered with a refusal (TCP RST, ICMP port unreachable).
    Refused,
    /// It was dropped, for the reason the outcome names.
    Dropped,
}

macro_rules! c_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident as $c_enum:literal, count $count:ident = $c_max:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, $c_name:literal, $metric:literal $(, $kind:ident)?; )*
        }
    ) => {
        $(#[$meta])*
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant = $value, )*
        }

        /// The number of values (the C enum's last, count entry).
        pub const $count: u32 = [$($value),*].len() as u32;

        impl $name {
            pub const ALL: [$name; $count as usize] = [$($name::$variant),*];

            /// The metric-style name.
            pub const fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $metric, )*
                }
            }

            /// The C enumerator name, as it appears in BTF.
            pub const fn c_name(self) -> &'static str {
                match self {
                    $( $name::$variant => $c_name, )*
                }
            }

            /// The C enum's name and every enumerator, its count included.
            pub const C_ENUM: (&'static str, &'static [(&'static str, u64)]) = (
                $c_enum,
                &[$(($c_name, $value),)* ($c_max, [$($value),*].len() as u64)],
            );
        }

        c_enum!(@kind $name { $( $variant $(, $kind)?; )* });
    };
    (@kind $name:ident { $( $variant:ident, $kind:ident; )* }) => {
        impl $name {
            pub const fn kind(self) -> OutcomeKind {
                match self {
                    $( $name::$variant => OutcomeKind::$kind, )*
                }
            }

            /// Whether this outcome is a drop (each drop counter is one reason).
            pub const fn is_drop(self) -> bool {
                matches!(self.kind(), OutcomeKind::Dropped)
            }

            /// Whether the packet was refused with a reply (RST, port unreachable).
            pub const fn is_refusal(self) -> bool {
                matches!(self.kind(), OutcomeKind::Refused)
            }
        }
    };
    (@kind $name:ident { $( $variant:ident; )* }) => {};
}

c_enum! {
    /// `enum weft_counter`: what the programs did with a packet, exactly one per packet.
    /// Every drop has its own reason.
    pub enum Counter as "weft_counter", count COUNTER_MAX = "WEFT_CTR_MAX" {
        LocalDelivery = 0, "WEFT_CTR_LOCAL_DELIVERY", "local_delivery", Forwarded;
        Encap = 1, "WEFT_CTR_ENCAP", "encap", Forwarded;
        DecapDelivery = 2, "WEFT_CTR_DECAP_DELIVERY", "decap_delivery", Forwarded;
        ToKernel = 3, "WEFT_CTR_TO_KERNEL", "to_kernel", Forwarded;
        MtuFallback = 4, "WEFT_CTR_MTU_FALLBACK", "mtu_fallback", Forwarded;
        OverlayFallback = 5, "WEFT_CTR_OVERLAY_FALLBACK", "overlay_fallback", Forwarded;
        DropSpoofedSource = 6, "WEFT_CTR_DROP_SPOOFED_SOURCE", "drop_spoofed_source", Dropped;
        DropUnknownLocalDest = 7, "WEFT_CTR_DROP_UNKNOWN_LOCAL_DEST", "drop_unknown_local_dest", Dropped;
        DropUnknownOverlaySource = 8, "WEFT_CTR_DROP_UNKNOWN_OVERLAY_SOURCE", "drop_unknown_overlay_source", Dropped;
        DropMalformed = 9, "WEFT_CTR_DROP_MALFORMED", "drop_malformed", Dropped;
        RejectNoEndpoints = 10, "WEFT_CTR_REJECT_NO_ENDPOINTS", "reject_no_endpoints", Refused;
        RejectUnknownPort = 11, "WEFT_CTR_REJECT_UNKNOWN_PORT", "reject_unknown_port", Refused;
        ResetBackendGone = 12, "WEFT_CTR_RESET_BACKEND_GONE", "reset_backend_gone", Refused;
        DropNoLocalBackend = 13, "WEFT_CTR_DROP_NO_LOCAL_BACKEND", "drop_no_local_backend", Dropped;
        DropServiceUnallocated = 14, "WEFT_CTR_DROP_SERVICE_UNALLOCATED", "drop_service_unallocated", Dropped;
        DropServiceProto = 15, "WEFT_CTR_DROP_SERVICE_PROTO", "drop_service_proto", Dropped;
        DropFragment = 16, "WEFT_CTR_DROP_FRAGMENT", "drop_fragment", Dropped;
        DropCtInsert = 17, "WEFT_CTR_DROP_CT_INSERT", "drop_ct_insert", Dropped;
        DropLbInconsistent = 18, "WEFT_CTR_DROP_LB_INCONSISTENT", "drop_lb_inconsistent", Dropped;
        DropBackendGone = 19, "WEFT_CTR_DROP_BACKEND_GONE", "drop_backend_gone", Dropped;
        DropRewriteFailed = 20, "WEFT_CTR_DROP_REWRITE_FAILED", "drop_rewrite_failed", Dropped;
    }
}

c_enum! {
    /// `enum weft_event`: what the programs did besides a packet's outcome (a packet may
    /// count several, or none).
    pub enum Event as "weft_event", count EVENT_MAX = "WEFT_EV_MAX" {
        CtCreated = 0, "WEFT_EV_CT_CREATED", "ct_created";
        CtInsertFailed = 1, "WEFT_EV_CT_INSERT_FAILED", "ct_insert_failed";
        CtPairMissing = 2, "WEFT_EV_CT_PAIR_MISSING", "ct_pair_missing";
        CtReopened = 3, "WEFT_EV_CT_REOPENED", "ct_reopened";
        LbNewFlow = 4, "WEFT_EV_LB_NEW_FLOW", "lb_new_flow";
        LbAffinityHit = 5, "WEFT_EV_LB_AFFINITY_HIT", "lb_affinity_hit";
        LbHairpin = 6, "WEFT_EV_LB_HAIRPIN", "lb_hairpin";
        LbSlotRetry = 7, "WEFT_EV_LB_SLOT_RETRY", "lb_slot_retry";
        NatForward = 8, "WEFT_EV_NAT_FORWARD", "nat_forward";
        NatReverse = 9, "WEFT_EV_NAT_REVERSE", "nat_reverse";
        IcmpErrorTranslated = 10, "WEFT_EV_ICMP_ERROR_TRANSLATED", "icmp_error_translated";
    }
}

/// `enum weft_counters_layout`: the counters map has room beyond the counters defined,
/// so adding one does not change its layout.
pub const COUNTERS_LAYOUT: u32 = 1;
pub const COUNTER_SLOTS: u32 = 64;
/// `enum weft_events_layout`.
pub const EVENTS_LAYOUT: u32 = 1;
pub const EVENT_SLOTS: u32 = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_dense_named_once_and_fit_their_maps() {
        for (i, c) in Counter::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
        }
        for (i, e) in Event::ALL.iter().enumerate() {
            assert_eq!(*e as usize, i);
        }
        let mut names: Vec<_> = Counter::ALL.iter().map(|c| c.name()).collect();
        names.extend(Event::ALL.iter().map(|e| e.name()));
        let total = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), total);
        const { assert!(COUNTER_MAX <= COUNTER_SLOTS && EVENT_MAX <= EVENT_SLOTS) };
    }

    #[test]
    fn drops_refusals_and_forwards_are_told_apart() {
        assert!(Counter::DropMalformed.is_drop());
        assert!(!Counter::RejectNoEndpoints.is_drop());
        assert!(Counter::RejectNoEndpoints.is_refusal());
        assert_eq!(Counter::LocalDelivery.kind(), OutcomeKind::Forwarded);
        for c in Counter::ALL {
            assert_eq!(c.is_drop(), c.name().starts_with("drop_"), "{}", c.name());
        }
    }
}
