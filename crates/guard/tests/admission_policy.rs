//! deploy/guard's ValidatingAdmissionPolicy, evaluated: its CEL expressions run (with the
//! `cel-interpreter` crate, plus the Kubernetes string extension `upperAscii`) against real
//! Pod JSON the way the API server runs them (match conditions, then variables in order,
//! then every validation), and for every pod the policy and the plugin's own rules
//! (`weft_guard::pod_security`) must agree on whether it may be fenced.

use std::collections::HashMap;
use std::sync::Arc;

use cel_interpreter::extractors::This;
use cel_interpreter::{Context, Program, Value as Cel};
use serde::Deserialize;
use serde_json::{json, Value};
use weft_guard::pod_security::PodSecurity;

const POLICY: &str = include_str!("../../../deploy/guard/pod-security-policy.yaml");
const PROXY: u32 = 1337;

fn documents() -> Vec<Value> {
    serde_yaml::Deserializer::from_str(POLICY)
        .map(|doc| {
            let yaml = serde_yaml::Value::deserialize(doc).expect("YAML document");
            serde_json::to_value(yaml).expect("JSON-shaped YAML")
        })
        .collect()
}

/// JSON as the API server hands it to CEL: integers are `int`, objects are maps.
fn cel(value: &Value) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(cel).collect())),
        Value::Object(map) => {
            let map: HashMap<String, Cel> = map.iter().map(|(k, v)| (k.clone(), cel(v))).collect();
            Cel::from(map)
        }
    }
}

fn upper_ascii(This(this): This<Arc<String>>) -> String {
    this.to_ascii_uppercase()
}

struct Policy {
    conditions: Vec<String>,
    variables: Vec<(String, String)>,
    validations: Vec<(String, String)>,
}

impl Policy {
    fn load() -> Policy {
        let docs = documents();
        let spec = &docs[0]["spec"];
        let texts = |list: &Value, key: &str| -> Vec<String> {
            list.as_array()
                .expect("a list")
                .iter()
                .map(|item| item[key].as_str().expect(key).to_string())
                .collect()
        };
        Policy {
            conditions: texts(&spec["matchConditions"], "expression"),
            variables: texts(&spec["variables"], "name")
                .into_iter()
                .zip(texts(&spec["variables"], "expression"))
                .collect(),
            validations: texts(&spec["validations"], "expression")
                .into_iter()
                .zip(texts(&spec["validations"], "message"))
                .collect(),
        }
    }

    fn run(expression: &str, context: &Context) -> Result<Cel, String> {
        let program = Program::compile(expression).map_err(|e| format!("{expression}: {e}"))?;
        program
            .execute(context)
            .map_err(|e| format!("{expression}: {e}"))
    }

    /// `None` when the policy does not apply (match conditions), else the messages of the
    /// failed validations. An expression that errors counts as a rejection
    /// (failurePolicy: Fail).
    fn evaluate(&self, pod: &Value) -> Option<Vec<String>> {
        let mut context = Context::default();
        context.add_function("upperAscii", upper_ascii);
        context.add_variable_from_value("object", cel(pod));
        for condition in &self.conditions {
            match Self::run(condition, &context) {
                Ok(Cel::Bool(true)) => {}
                Ok(Cel::Bool(false)) => return None,
                other => panic!("match condition {condition}: {other:?}"),
            }
        }
        let mut variables: HashMap<String, Cel> = HashMap::new();
        for (name, expression) in &self.variables {
            context.add_variable_from_value("variables", Cel::from(variables.clone()));
            match Self::run(expression, &context) {
                Ok(value) => {
                    variables.insert(name.clone(), value);
                }
                Err(e) => return Some(vec![format!("variable {name}: {e}")]),
            }
        }
        context.add_variable_from_value("variables", Cel::from(variables));
        let failed = self
            .validations
            .iter()
            .filter_map(
                |(expression, message)| match Self::run(expression, &context) {
                    Ok(Cel::Bool(true)) => None,
                    Ok(Cel::Bool(false)) => Some(message.clone()),
                    other => Some(format!("{expression} gave {other:?}")),
                },
            )
            .collect();
        Some(failed)
    }
}

fn annotations() -> Value {
    json!({"guard.weft.dev/enabled": "true", "guard.weft.dev/proxy-uid": PROXY.to_string(),
           "guard.weft.dev/contract-version": "1"})
}

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "agent", "namespace": "sandboxes", "annotations": annotations()},
           "spec": spec})
}

/// A sandbox the guard fences: an agent as UID 1000 and its proxy, both hardened.
fn hardened() -> Value {
    json!({
        "securityContext": {"runAsUser": 1000, "runAsNonRoot": true},
        "containers": [
            {"name": "agent", "image": "agent:1",
             "securityContext": {"allowPrivilegeEscalation": false,
                                 "capabilities": {"drop": ["ALL"]}}},
            {"name": "proxy", "image": "proxy:1",
             "securityContext": {"runAsUser": PROXY, "capabilities": {"drop": ["NET_RAW"]}}}
        ]
    })
}

/// Sets the member at `pointer`; a final `-` appends to the list (as in JSON Patch).
fn set(mut spec: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
    let parent = spec.pointer_mut(parent).expect("parent");
    match (key, parent.as_array_mut()) {
        ("-", Some(list)) => list.push(value),
        _ => parent[key] = value,
    }
    spec
}

/// Every way around the fence the issue names, and the pods that are fine.
fn cases() -> Vec<(&'static str, Value, bool)> {
    let agent = "/containers/0/securityContext";
    vec![
        ("hardened", hardened(), true),
        (
            "adds NET_RAW",
            set(
                hardened(),
                &format!("{agent}/capabilities"),
                json!({"add": ["NET_RAW"], "drop": ["ALL"]}),
            ),
            false,
        ),
        (
            "adds net_admin (lower case)",
            set(
                hardened(),
                &format!("{agent}/capabilities"),
                json!({"add": ["net_admin"], "drop": ["ALL"]}),
            ),
            false,
        ),
        (
            "keeps NET_RAW",
            set(
                hardened(),
                &format!("{agent}/capabilities"),
                json!({"drop": ["CHOWN"]}),
            ),
            false,
        ),
        (
            "drops CAP_NET_RAW (which containerd does not drop)",
            set(
                hardened(),
                &format!("{agent}/capabilities"),
                json!({"drop": ["CAP_NET_RAW"]}),
            ),
            false,
        ),
        (
            "proxy keeps NET_RAW",
            set(
                hardened(),
                "/containers/1/securityContext/capabilities",
                json!({}),
            ),
            false,
        ),
        (
            "privileged",
            set(hardened(), &format!("{agent}/privileged"), json!(true)),
            false,
        ),
        (
            "host network",
            set(hardened(), "/hostNetwork", json!(true)),
            false,
        ),
        (
            "agent as root",
            set(hardened(), &format!("{agent}/runAsUser"), json!(0)),
            false,
        ),
        (
            "pod as root",
            set(hardened(), "/securityContext/runAsUser", json!(0)),
            false,
        ),
        (
            "no runAsUser anywhere",
            set(
                hardened(),
                "/securityContext",
                json!({"runAsNonRoot": true}),
            ),
            false,
        ),
        (
            "may escalate",
            set(
                hardened(),
                &format!("{agent}/allowPrivilegeEscalation"),
                json!(true),
            ),
            false,
        ),
        (
            "escalation unset",
            set(
                hardened(),
                agent,
                json!({"capabilities": {"drop": ["ALL"]}}),
            ),
            false,
        ),
        (
            "adds SETUID",
            set(
                hardened(),
                &format!("{agent}/capabilities"),
                json!({"add": ["SETUID"], "drop": ["NET_RAW"]}),
            ),
            false,
        ),
        (
            "an init container that keeps NET_RAW",
            set(
                hardened(),
                "/initContainers",
                json!([{"name": "init", "securityContext":
                    {"allowPrivilegeEscalation": false}}]),
            ),
            false,
        ),
        (
            "a hardened ephemeral container",
            set(
                hardened(),
                "/ephemeralContainers",
                json!([{"name": "debug", "securityContext": {"allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}}}]),
            ),
            true,
        ),
        (
            "a second container running as the proxy",
            set(
                hardened(),
                "/containers/-",
                json!({"name": "sidecar", "securityContext": {"runAsUser": PROXY,
                    "capabilities": {"drop": ["ALL"]}}}),
            ),
            true,
        ),
    ]
}

#[test]
fn the_policy_and_the_plugin_agree() {
    let policy = Policy::load();
    for (name, spec, accepted) in cases() {
        let pod = pod(spec);
        let failed = policy
            .evaluate(&pod)
            .expect("the policy applies to opted-in pods");
        assert_eq!(
            failed.is_empty(),
            accepted,
            "{name}: policy says {failed:#?}"
        );
        let plugin = PodSecurity::from_pod(&pod)
            .expect("readable spec")
            .violations(PROXY);
        assert_eq!(
            plugin.is_empty(),
            accepted,
            "{name}: plugin says {plugin:#?}"
        );
    }
}

#[test]
fn pods_that_do_not_opt_in_are_not_matched() {
    let policy = Policy::load();
    let mut leaky = pod(set(hardened(), "/hostNetwork", json!(true)));
    leaky["metadata"]["annotations"] = json!({"guard.weft.dev/enabled": "false"});
    assert_eq!(policy.evaluate(&leaky), None);
    leaky["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("annotations");
    assert_eq!(policy.evaluate(&leaky), None);
    // An opted-in pod whose proxy UID is not a number is rejected, not skipped.
    let mut bad = pod(hardened());
    bad["metadata"]["annotations"]["guard.weft.dev/proxy-uid"] = json!("root");
    let failed = policy.evaluate(&bad).expect("applies");
    assert!(
        failed.iter().any(|m| m.contains("proxy-uid must be a UID")),
        "{failed:#?}"
    );
}

#[test]
fn the_binding_enforces_the_policy_everywhere() {
    let docs = documents();
    assert_eq!(docs.len(), 2);
    let (policy, binding) = (&docs[0], &docs[1]);
    for doc in &docs {
        assert_eq!(doc["apiVersion"], "admissionregistration.k8s.io/v1");
    }
    assert_eq!(policy["kind"], "ValidatingAdmissionPolicy");
    assert_eq!(policy["spec"]["failurePolicy"], "Fail");
    let resources = &policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"];
    assert_eq!(resources, &json!(["pods", "pods/ephemeralcontainers"]));
    assert_eq!(binding["kind"], "ValidatingAdmissionPolicyBinding");
    assert_eq!(binding["spec"]["policyName"], policy["metadata"]["name"]);
    assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
    assert!(
        binding["spec"].get("matchResources").is_none(),
        "the binding covers every namespace; the policy's match condition picks the pods"
    );
}

/// The manifests are valid Kubernetes objects, unknown fields included (`--strict`), for the
/// Kubernetes version the project targets (k8s-openapi's `v1_33`). `make deps` installs
/// PyPI's kubernetes-validate into `target/k8s-venv`.
#[test]
fn the_manifests_validate_strictly() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tool = root.join("target/k8s-venv/bin/kubernetes-validate");
    assert!(
        tool.is_file(),
        "{} is missing: run `make deps` (it installs kubernetes-validate==1.37.0 into target/k8s-venv)",
        tool.display()
    );
    let manifest = root.join("deploy/guard/pod-security-policy.yaml");
    let out = std::process::Command::new(&tool)
        .args(["--strict", "-k", "1.33.0"])
        .arg(&manifest)
        .output()
        .expect("run kubernetes-validate");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert_eq!(text.matches("passed for resource").count(), 2, "{text}");
}
