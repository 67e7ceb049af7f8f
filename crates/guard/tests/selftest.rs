//! The node self-test `weft status` runs: a fence installed and read back in a throw-away
//! network namespace proves the kernel has what the guard needs.

#[test]
fn this_kernel_has_what_the_fence_needs() {
    weft_testkit::require_root();
    weft_guard::selftest::kernel_features().expect("nf_tables inet, ct, meta skuid, reject");
}
