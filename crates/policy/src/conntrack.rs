//! Policy with connection tracking, as the datapath will do it, on the model: each node
//! keeps its own connection table; a packet of a tracked connection (either direction)
//! passes without policy lookups; any other packet is a new connection in its own
//! direction, whatever its TCP flags, and is checked; an admitted connection is tracked.
//! Every entry records the policy epoch it was admitted under: after the agent changes the
//! tables it bumps the epoch, and an entry's next packet re-checks the connection's
//! original direction against the new tables, dropping it (and the entry) when no longer
//! allowed. So replies of allowed connections pass both ways, nothing else does, and a
//! revoked connection stops at its next packet.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::policy::Direction;
use crate::simulate::{Decision, DropEvent, DropReason, Simulator};
use crate::table::NodeTables;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Packet {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    pub sport: u16,
    pub dport: u16,
}

impl Packet {
    pub fn reply(&self) -> Packet {
        Packet {
            src: self.dst,
            dst: self.src,
            protocol: self.protocol,
            sport: self.dport,
            dport: self.sport,
        }
    }
}

#[derive(Debug, Clone)]
struct Node {
    sim: Simulator,
    epoch: u64,
    /// Original direction of each tracked connection → the epoch it was last checked in.
    connections: HashMap<Packet, u64>,
}

impl Node {
    fn holds(&self, ip: IpAddr) -> bool {
        self.sim.is_local(ip)
    }

    /// Policy for a connection's original direction on this node.
    fn admit(&self, flow: &Packet) -> Result<(), DropEvent> {
        let checks = [
            self.sim.check(
                Direction::Egress,
                flow.src,
                flow.dst,
                flow.protocol,
                flow.dport,
            ),
            self.sim.check(
                Direction::Ingress,
                flow.dst,
                flow.src,
                flow.protocol,
                flow.dport,
            ),
        ];
        for d in checks.into_iter().flatten() {
            if let Decision::Drop(e) = d {
                return Err(e);
            }
        }
        Ok(())
    }

    fn process(&mut self, p: &Packet) -> Result<(), DropEvent> {
        let tracked = if self.connections.contains_key(p) {
            Some(*p)
        } else if self.connections.contains_key(&p.reply()) {
            Some(p.reply())
        } else {
            None
        };
        match tracked {
            Some(flow) => {
                if self.connections[&flow] == self.epoch {
                    return Ok(());
                }
                match self.admit(&flow) {
                    Ok(()) => {
                        self.connections.insert(flow, self.epoch);
                        Ok(())
                    }
                    Err(e) => {
                        self.connections.remove(&flow);
                        Err(DropEvent {
                            reason: DropReason::Revoked,
                            ..e
                        })
                    }
                }
            }
            None => {
                self.admit(p)?;
                self.connections.insert(*p, self.epoch);
                Ok(())
            }
        }
    }
}

/// A cluster of nodes, each with its tables and connection table.
#[derive(Debug, Clone, Default)]
pub struct Datapath {
    nodes: Vec<Node>,
}

impl Datapath {
    pub fn new(tables: Vec<NodeTables>) -> Datapath {
        Datapath {
            nodes: tables
                .into_iter()
                .map(|t| Node {
                    sim: Simulator::new(t),
                    epoch: 0,
                    connections: HashMap::new(),
                })
                .collect(),
        }
    }

    /// The agent programmed new tables on their node: the epoch moves on.
    pub fn update(&mut self, tables: NodeTables) {
        match self
            .nodes
            .iter_mut()
            .find(|n| n.sim.tables().node == tables.node)
        {
            Some(n) => {
                n.sim = Simulator::new(tables);
                n.epoch += 1;
            }
            None => self.nodes.push(Node {
                sim: Simulator::new(tables),
                epoch: 0,
                connections: HashMap::new(),
            }),
        }
    }

    /// Sends one packet: through the source's node, then the destination's.
    pub fn send(&mut self, p: Packet) -> Result<(), DropEvent> {
        let src = self.nodes.iter().position(|n| n.holds(p.src));
        let dst = self.nodes.iter().position(|n| n.holds(p.dst));
        if let Some(i) = src {
            self.nodes[i].process(&p)?;
        }
        if let Some(i) = dst.filter(|d| Some(*d) != src) {
            self.nodes[i].process(&p)?;
        }
        Ok(())
    }

    pub fn tracked(&self) -> usize {
        self.nodes.iter().map(|n| n.connections.len()).sum()
    }
}
