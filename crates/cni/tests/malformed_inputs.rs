//! A table of malformed inputs and the CNI error code each must get.
//!
//! Decisions recorded here:
//! - bytes that are not a JSON object are 6 (decode failure);
//! - valid JSON with a missing or wrong-typed field is 7 (invalid config), inside `prevResult`
//!   too: the config decoded fine, its content is wrong;
//! - a `cniVersion` that is not a version at all (`"abc"`) is 1, like an old one: it cannot
//!   name a version weft speaks, and libcni's reconciler answers 1 for it as well;
//! - a standalone result (a plugin's stdout) with a wrong shape is 6.

use std::collections::HashMap;

use weft_cni::{CniArgs, CniResult, Command, Env, NetConf, NetConfList};

enum Input {
    Config(Command, &'static str),
    List(&'static str),
    Result(&'static str),
    Args(&'static str),
    Env(&'static [(&'static str, &'static str)]),
    Bytes(&'static [u8]),
}

fn run(input: &Input) -> Result<(), weft_cni::CniError> {
    match input {
        Input::Config(command, text) => {
            NetConf::from_slice_for(*command, text.as_bytes()).map(drop)
        }
        Input::List(text) => NetConfList::from_slice(text.as_bytes()).map(drop),
        Input::Result(text) => CniResult::from_slice(text.as_bytes()).map(drop),
        Input::Args(text) => CniArgs::parse(text).map(drop),
        Input::Env(pairs) => {
            let map: HashMap<&str, &str> = pairs.iter().copied().collect();
            Env::from_lookup(|name| map.get(name).map(|v| (*v).to_owned())).map(drop)
        }
        Input::Bytes(bytes) => NetConf::from_slice(bytes).map(drop),
    }
}

const ADD_ENV: [(&str, &str); 4] = [
    ("CNI_COMMAND", "ADD"),
    ("CNI_CONTAINERID", "abc"),
    ("CNI_NETNS", "/run/netns/x"),
    ("CNI_IFNAME", "eth0"),
];

macro_rules! env_with {
    ($($name:literal => $value:literal),* $(,)?) => {{
        const PAIRS: &[(&str, &str)] = &[$(($name, $value)),*];
        PAIRS
    }};
}

#[test]
fn every_malformed_input_gets_its_code() {
    use Command::*;
    use Input::*;
    let table: Vec<(&str, Input, u32)> = vec![
        // --- bytes that are not a JSON object: 6
        (
            "truncated JSON",
            Config(Add, r#"{"cniVersion":"1.0.0","name":"#),
            6,
        ),
        ("empty stdin", Config(Add, ""), 6),
        (
            "array instead of object",
            Config(Add, r#"[{"cniVersion":"1.0.0"}]"#),
            6,
        ),
        ("string instead of object", Config(Add, r#""weft""#), 6),
        ("null", Config(Add, "null"), 6),
        (
            "trailing garbage",
            Config(Add, r#"{"cniVersion":"1.0.0","name":"n","type":"t"} x"#),
            6,
        ),
        (
            "invalid UTF-8",
            Bytes(b"{\"cniVersion\":\"1.0.0\",\"name\":\"\xff\"}"),
            6,
        ),
        // --- versions: 1
        (
            "cniVersion 0.3.1",
            Config(Add, r#"{"cniVersion":"0.3.1","name":"n","type":"t"}"#),
            1,
        ),
        (
            "cniVersion abc",
            Config(Add, r#"{"cniVersion":"abc","name":"n","type":"t"}"#),
            1,
        ),
        (
            "cniVersion empty",
            Config(Add, r#"{"cniVersion":"","name":"n","type":"t"}"#),
            1,
        ),
        (
            "cniVersion 2.0.0",
            Config(Add, r#"{"cniVersion":"2.0.0","name":"n","type":"t"}"#),
            1,
        ),
        (
            "cniVersions all unsupported",
            Config(
                Add,
                r#"{"cniVersion":"0.3.1","cniVersions":["0.2.0","9.9.9"],"name":"n","type":"t"}"#,
            ),
            1,
        ),
        (
            "CHECK at 0.3.1",
            Config(Check, r#"{"cniVersion":"0.3.1","name":"n","type":"t"}"#),
            1,
        ),
        (
            "STATUS at 1.0.0",
            Config(Status, r#"{"cniVersion":"1.0.0","name":"n","type":"t"}"#),
            1,
        ),
        (
            "GC at 0.4.0",
            Config(Gc, r#"{"cniVersion":"0.4.0","name":"n","type":"t"}"#),
            1,
        ),
        (
            "prevResult cniVersion 0.2.0",
            Config(
                Del,
                r#"{"cniVersion":"1.0.0","name":"n","type":"t","prevResult":{"cniVersion":"0.2.0"}}"#,
            ),
            1,
        ),
        // --- missing or wrong-typed fields: 7
        (
            "missing cniVersion",
            Config(Add, r#"{"name":"n","type":"t"}"#),
            7,
        ),
        (
            "cniVersion is a number",
            Config(Add, r#"{"cniVersion":100,"name":"n","type":"t"}"#),
            7,
        ),
        (
            "missing name",
            Config(Add, r#"{"cniVersion":"1.0.0","type":"t"}"#),
            7,
        ),
        (
            "name not a string",
            Config(Add, r#"{"cniVersion":"1.0.0","name":["n"],"type":"t"}"#),
            7,
        ),
        (
            "name with a slash",
            Config(Add, r#"{"cniVersion":"1.0.0","name":"a/b","type":"t"}"#),
            7,
        ),
        (
            "missing type",
            Config(Del, r#"{"cniVersion":"1.0.0","name":"n"}"#),
            7,
        ),
        (
            "type is a path",
            Config(
                Add,
                r#"{"cniVersion":"1.0.0","name":"n","type":"../bin/sh"}"#,
            ),
            7,
        ),
        (
            "cniVersions not a list",
            Config(
                Add,
                r#"{"cniVersion":"1.0.0","cniVersions":"1.1.0","name":"n","type":"t"}"#,
            ),
            7,
        ),
        (
            "prevResult is an array",
            Config(
                Del,
                r#"{"cniVersion":"1.0.0","name":"n","type":"t","prevResult":[]}"#,
            ),
            7,
        ),
        (
            "prevResult bad address",
            Config(
                Check,
                r#"{"cniVersion":"1.0.0","name":"n","type":"t","prevResult":{"ips":[{"address":"10.0.0.1"}]}}"#,
            ),
            7,
        ),
        (
            "prevResult 0.4.0 ip version lies",
            Config(
                Check,
                r#"{"cniVersion":"0.4.0","name":"n","type":"t","prevResult":{"ips":[{"version":"6","address":"10.0.0.1/24"}]}}"#,
            ),
            7,
        ),
        (
            "runtimeConfig port out of range",
            Config(
                Add,
                r#"{"cniVersion":"1.0.0","name":"n","type":"t","runtimeConfig":{"portMappings":[{"HostPort":70000,"ContainerPort":80,"Protocol":"tcp"}]}}"#,
            ),
            7,
        ),
        (
            "runtimeConfig not an object",
            Config(
                Add,
                r#"{"cniVersion":"1.0.0","name":"n","type":"t","runtimeConfig":"x"}"#,
            ),
            7,
        ),
        (
            "capability not a bool",
            Config(
                Add,
                r#"{"cniVersion":"1.0.0","name":"n","type":"t","capabilities":{"mac":1}}"#,
            ),
            7,
        ),
        (
            "valid-attachments entry wrong",
            Config(
                Gc,
                r#"{"cniVersion":"1.1.0","name":"n","type":"t","cni.dev/valid-attachments":[{"containerID":1,"ifname":"eth0"}]}"#,
            ),
            7,
        ),
        (
            "ipam not an object",
            Config(
                Add,
                r#"{"cniVersion":"1.0.0","name":"n","type":"t","ipam":"host-local"}"#,
            ),
            7,
        ),
        (
            "disableGC not a bool",
            Config(
                Add,
                r#"{"cniVersion":"1.0.0","name":"n","type":"t","disableGC":"yes"}"#,
            ),
            7,
        ),
        // --- conflists
        ("conflist truncated", List(r#"{"cniVersion":"1.0.0","#), 6),
        (
            "conflist without plugins",
            List(r#"{"cniVersion":"1.0.0","name":"n"}"#),
            7,
        ),
        (
            "conflist plugin without type",
            List(r#"{"cniVersion":"1.0.0","name":"n","plugins":[{"x":1}]}"#),
            7,
        ),
        (
            "conflist 0.3.1",
            List(r#"{"cniVersion":"0.3.1","name":"n","plugins":[{"type":"t"}]}"#),
            1,
        ),
        // --- standalone results
        (
            "result truncated",
            Result(r#"{"cniVersion":"1.0.0","ips":[{"address":"#),
            6,
        ),
        ("result without cniVersion", Result(r#"{"ips":[]}"#), 6),
        (
            "result with bad route",
            Result(r#"{"cniVersion":"1.1.0","routes":[{"gw":"10.0.0.1"}]}"#),
            6,
        ),
        ("result 0.3.1", Result(r#"{"cniVersion":"0.3.1"}"#), 1),
        // --- CNI_ARGS: 4
        ("CNI_ARGS without =", Args("K8S_POD_NAME"), 4),
        ("CNI_ARGS empty key", Args("=value"), 4),
        ("CNI_ARGS bad IgnoreUnknown", Args("IgnoreUnknown=maybe"), 4),
        ("CNI_ARGS bad IP", Args("IgnoreUnknown=1;IP=10.0.0.256"), 4),
        ("CNI_ARGS bad MAC", Args("MAC=02:11:22:33:44"), 4),
        // --- environment: 4
        ("no CNI_COMMAND", Env(env_with!()), 4),
        (
            "unknown CNI_COMMAND",
            Env(env_with!("CNI_COMMAND" => "REMOVE")),
            4,
        ),
        (
            "lower-case command",
            Env(env_with!("CNI_COMMAND" => "add")),
            4,
        ),
        (
            "ADD without netns",
            Env(
                env_with!("CNI_COMMAND" => "ADD", "CNI_CONTAINERID" => "c", "CNI_IFNAME" => "eth0"),
            ),
            4,
        ),
        (
            "CHECK with empty netns",
            Env(
                env_with!("CNI_COMMAND" => "CHECK", "CNI_CONTAINERID" => "c", "CNI_NETNS" => "", "CNI_IFNAME" => "eth0"),
            ),
            4,
        ),
        (
            "DEL without ifname",
            Env(env_with!("CNI_COMMAND" => "DEL", "CNI_CONTAINERID" => "c")),
            4,
        ),
        (
            "ifname with colon",
            Env(
                env_with!("CNI_COMMAND" => "ADD", "CNI_CONTAINERID" => "c", "CNI_NETNS" => "/x", "CNI_IFNAME" => "eth0:1"),
            ),
            4,
        ),
        (
            "ifname 16 bytes",
            Env(
                env_with!("CNI_COMMAND" => "ADD", "CNI_CONTAINERID" => "c", "CNI_NETNS" => "/x", "CNI_IFNAME" => "abcdefghijklmnop"),
            ),
            4,
        ),
        (
            "ifname dot-dot",
            Env(env_with!("CNI_COMMAND" => "DEL", "CNI_CONTAINERID" => "c", "CNI_IFNAME" => "..")),
            4,
        ),
        (
            "container ID starts with dash",
            Env(
                env_with!("CNI_COMMAND" => "ADD", "CNI_CONTAINERID" => "-c", "CNI_NETNS" => "/x", "CNI_IFNAME" => "eth0"),
            ),
            4,
        ),
        (
            "bad CNI_ARGS in env",
            Env(
                env_with!("CNI_COMMAND" => "ADD", "CNI_CONTAINERID" => "c", "CNI_NETNS" => "/x", "CNI_IFNAME" => "eth0", "CNI_ARGS" => "A=1;B"),
            ),
            4,
        ),
    ];
    assert!(table.len() >= 20);
    let mut failures = Vec::new();
    for (what, input, code) in &table {
        match run(input) {
            Ok(()) => failures.push(format!("{what}: accepted, expected code {code}")),
            Err(error) if error.code != *code => failures.push(format!(
                "{what}: got code {} ({}), expected {code}",
                error.code, error.msg
            )),
            Err(error) => {
                // Every error must be printable as the spec's error object.
                let printed: serde_json::Value =
                    serde_json::from_str(&error.to_json("1.1.0")).expect("error JSON parses");
                assert_eq!(printed["code"], *code);
                assert!(!error.msg.is_empty());
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_valid_baselines_of_the_table_pass() {
    // Guards the table: each row above differs from one of these accepted inputs by one thing.
    let env: HashMap<&str, &str> = ADD_ENV.iter().copied().collect();
    assert!(Env::from_lookup(|n| env.get(n).map(|v| (*v).to_owned())).is_ok());
    for (command, text) in [
        (
            Command::Add,
            r#"{"cniVersion":"1.0.0","name":"n","type":"t"}"#,
        ),
        (
            Command::Check,
            r#"{"cniVersion":"0.4.0","name":"n","type":"t"}"#,
        ),
        (
            Command::Status,
            r#"{"cniVersion":"1.1.0","name":"n","type":"t"}"#,
        ),
        (
            Command::Gc,
            r#"{"cniVersion":"1.1.0","name":"n","type":"t","cni.dev/valid-attachments":[]}"#,
        ),
        (
            Command::Del,
            r#"{"cniVersion":"1.0.0","name":"n","type":"t","prevResult":{}}"#,
        ),
    ] {
        assert!(
            NetConf::from_slice_for(command, text.as_bytes()).is_ok(),
            "{text}"
        );
    }
    assert!(NetConfList::from_slice(
        br#"{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"t"}]}"#
    )
    .is_ok());
    assert!(CniArgs::parse("IgnoreUnknown=1;K8S_POD_NAME=a;").is_ok());
}
