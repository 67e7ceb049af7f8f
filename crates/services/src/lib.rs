//! Kubernetes Service semantics for weft, with kube-proxy's behaviour as the specification.
//! Pure: no I/O, no BPF.
//!
//! - [`wire`]: the JSON fields weft reads from Services and EndpointSlices.
//! - [`Service`] and [`EndpointSlice`]: compact, validated forms (`from_wire`), what the
//!   agent's stores hold.
//! - [`endpoints`]: slices merged per Service port and categorised per traffic policy.
//! - [`NodePlan`]: every frontend this node serves and what a new connection to it meets;
//!   [`NodePlan::diff`] gives per-Service changes for the datapath; [`NodePlan::trace`]
//!   answers where a first packet goes (the test oracle).
//!
//! `docs/services.md` lists every rule with the kube-proxy test that pins it, and where weft
//! deliberately differs.

mod build;
mod diff;
pub mod endpoints;
mod ids;
pub mod ip;
mod meta;
mod plan;
mod service;
mod settings;
mod slice;
mod trace;
pub mod wire;

pub use build::plan_service;
pub use diff::{PlanDiff, ServiceChange, StaleFlow};
pub use ids::{Family, Protocol, ServiceName};
pub use plan::{
    Backend, Frontend, FrontendKey, HealthCheck, NodePlan, PortKey, PortPlan, Scope, ServicePlan,
    SourceClass, Target, Treatment, WhenEmpty,
};
pub use service::{
    Service, ServicePort, ServiceType, Skip, TrafficPolicy, DEFAULT_AFFINITY_TIMEOUT_SECONDS,
    MAX_AFFINITY_TIMEOUT_SECONDS, SERVICE_PROXY_NAME_LABEL,
};
pub use settings::{NodeContext, NodePortAddresses, Settings, SettingsError};
pub use slice::{Endpoint, EndpointPort, EndpointSlice, SERVICE_NAME_LABEL};
pub use trace::{Reach, Source, Verdict};
