#!/usr/bin/env bash
# `make demo`: a two-node weft cluster in namespaces on this machine, the all-pairs
# connectivity matrix over IPv4 and IPv6 (pod to pod on one node and across nodes, node to
# pod, pod to the world through masquerade), then everything removed again.
set -euo pipefail
cd "$(dirname "$0")/.."
weft=${WEFT_BIN:-./target/release/weft}
name=weftdemo

"$weft" lab down --name "$name" >/dev/null 2>&1 || true
trap '"$weft" lab down --name "$name"' EXIT

echo "== weft lab up: 2 nodes, 2 pods each =="
"$weft" lab up --name "$name" --nodes 2 --pods-per-node 2
echo
echo "== weft lab check =="
"$weft" lab check --name "$name"
echo
echo "== what node1's eBPF programs did (from its agent's /metrics) =="
"$weft" lab metrics --name "$name" --node 1 | grep '^weft_datapath_packets_total' || true
echo
echo "== weft lab down =="
