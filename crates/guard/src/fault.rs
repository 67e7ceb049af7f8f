//! Test hook: `WEFT_GUARD_FAULT=<step>` makes ADD fail at that step, so tests can prove a
//! failed ADD leaves nothing that could later read as enforced.
//!
//! It can only ever make ADD fail; it never skips a check or weakens a fence. Steps, in
//! the order ADD reaches them: `state-write`, `before-install`, `in-batch` (an invalid
//! message is added to the install batch, so the kernel refuses the whole transaction),
//! `after-install`, `verify`.

/// The environment variable tests set.
pub const ENV: &str = "WEFT_GUARD_FAULT";

/// A step ADD can be made to fail at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    StateWrite,
    BeforeInstall,
    InBatch,
    AfterInstall,
    Verify,
}

impl Step {
    pub const ALL: [Step; 5] = [
        Step::StateWrite,
        Step::BeforeInstall,
        Step::InBatch,
        Step::AfterInstall,
        Step::Verify,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Step::StateWrite => "state-write",
            Step::BeforeInstall => "before-install",
            Step::InBatch => "in-batch",
            Step::AfterInstall => "after-install",
            Step::Verify => "verify",
        }
    }
}

/// The step named by the environment, if any. An unknown name is ignored: the hook must
/// never change behaviour other than failing a known step.
pub fn from_env() -> Option<Step> {
    let wanted = std::env::var(ENV).ok()?;
    Step::ALL.into_iter().find(|s| s.name() == wanted)
}

/// Fails when `step` is the one the environment names.
pub fn check(injected: Option<Step>, step: Step) -> Result<(), crate::GuardError> {
    if injected == Some(step) {
        return Err(crate::GuardError::Fault(step.name()));
    }
    Ok(())
}
