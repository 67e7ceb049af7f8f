//! Where the egress guard is chained on this node, the node is ready only while the kernel
//! passes the guard's self-test (a fence installed and read back in a scratch namespace).

use weft_model::KindId;

use super::Changes;
use crate::agent::node::NodeEnv;
use crate::agent::reconcile::{Input, Reconciler};

pub struct GuardSelfTest;

impl Reconciler<NodeEnv> for GuardSelfTest {
    fn name(&self) -> &'static str {
        "guard-selftest"
    }

    /// Nothing from the stores: it runs at start, on every resync and on retry.
    fn reads(&self) -> Vec<KindId> {
        Vec::new()
    }

    fn reconcile(&mut self, _: &mut NodeEnv, _: &Input<'_>) -> anyhow::Result<Changes> {
        weft_guard::selftest::kernel_features()
            .map_err(|e| anyhow::anyhow!("the egress guard's kernel self-test failed: {e}"))?;
        Ok(Changes::default())
    }
}
