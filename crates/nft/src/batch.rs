//! Atomic batches: every message between NFNL_MSG_BATCH_BEGIN and _END is one kernel
//! transaction. Either all of it applies or none of it does.

use crate::encode;
use crate::error::{Error, Failure};
use crate::model::{Chain, Family, Rule, Table};
use crate::socket::NftSocket;
use crate::wire::attr::AttrWriter;
use crate::wire::consts::*;
use crate::wire::message::{nft_type, parse_replies, Header, ReplyBody};
use std::collections::HashMap;

/// Room reserved per message for its acknowledgement in the receive buffer (an ack's
/// socket-buffer footprint is far above its 36 bytes).
const ACK_BUDGET: usize = 2048;

/// Headroom on top of what a batch needs in the socket buffers.
const SLACK: usize = 64 * 1024;

/// A list of nf_tables changes sent as one transaction by [`Batch::send`].
#[derive(Debug, Default)]
pub struct Batch {
    messages: Vec<Pending>,
    rules_per_chain: HashMap<(Family, String, String), usize>,
}

#[derive(Debug)]
struct Pending {
    /// How errors name this message: "add rule inet weft_guard output #3".
    what: String,
    msg: u16,
    flags: u16,
    family: Family,
    /// The encoded attributes, or why they could not be encoded (reported by `send`
    /// before anything reaches the kernel).
    attrs: Result<Vec<u8>, String>,
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Creates the table, or leaves an existing one as it is (`nft add table`).
    pub fn add_table(&mut self, table: &Table) -> &mut Self {
        let what = format!("add table {} {}", table.family, table.name);
        self.push(what, NFT_MSG_NEWTABLE, NLM_F_CREATE, table.family, |w| {
            encode::table(w, table);
            Ok(())
        })
    }

    /// Deletes a table with everything in it; fails with ENOENT when it is missing.
    pub fn delete_table(&mut self, family: Family, name: &str) -> &mut Self {
        let what = format!("delete table {family} {name}");
        self.push(what, NFT_MSG_DELTABLE, 0, family, |w| {
            w.string(NFTA_TABLE_NAME, name);
            Ok(())
        })
    }

    /// Deletes a table if it exists (NFT_MSG_DESTROYTABLE, kernel 6.3 and later).
    pub fn destroy_table(&mut self, family: Family, name: &str) -> &mut Self {
        let what = format!("destroy table {family} {name}");
        self.push(what, NFT_MSG_DESTROYTABLE, 0, family, |w| {
            w.string(NFTA_TABLE_NAME, name);
            Ok(())
        })
    }

    /// Removes every rule of every chain in the table; the chains stay.
    pub fn flush_table(&mut self, family: Family, name: &str) -> &mut Self {
        let what = format!("flush table {family} {name}");
        self.push(what, NFT_MSG_DELRULE, 0, family, |w| {
            w.string(NFTA_RULE_TABLE, name);
            Ok(())
        })
    }

    /// Removes every rule of one chain.
    pub fn flush_chain(&mut self, family: Family, table: &str, chain: &str) -> &mut Self {
        let what = format!("flush chain {family} {table} {chain}");
        self.push(what, NFT_MSG_DELRULE, 0, family, |w| {
            w.string(NFTA_RULE_TABLE, table);
            w.string(NFTA_RULE_CHAIN, chain);
            Ok(())
        })
    }

    /// Creates a chain (`nft add chain`): a base chain when `chain.base` is set.
    pub fn add_chain(&mut self, family: Family, table: &str, chain: &Chain) -> &mut Self {
        let what = format!("add chain {family} {table} {}", chain.name);
        self.push(what, NFT_MSG_NEWCHAIN, NLM_F_CREATE, family, |w| {
            encode::chain(w, family, table, chain)
        })
    }

    /// Appends a rule to a chain. Errors name it by its 1-based position among the
    /// rules this batch adds to that chain.
    pub fn add_rule(&mut self, family: Family, table: &str, chain: &str, rule: &Rule) -> &mut Self {
        let count = self
            .rules_per_chain
            .entry((family, table.to_string(), chain.to_string()))
            .or_default();
        *count += 1;
        let what = format!("add rule {family} {table} {chain} #{count}");
        self.push(
            what,
            NFT_MSG_NEWRULE,
            NLM_F_CREATE | NLM_F_APPEND,
            family,
            |w| {
                encode::rule(w, table, chain, rule);
                Ok(())
            },
        )
    }

    fn push(
        &mut self,
        what: String,
        msg: u16,
        flags: u16,
        family: Family,
        fill: impl FnOnce(&mut AttrWriter<'_>) -> Result<(), String>,
    ) -> &mut Self {
        let mut buf = Vec::new();
        let mut overflowed = false;
        let filled = fill(&mut AttrWriter::new(&mut buf, &mut overflowed));
        let attrs = match (filled, overflowed) {
            (Err(reason), _) => Err(reason),
            (Ok(()), true) => Err("attribute too large for netlink".to_string()),
            (Ok(()), false) => Ok(buf),
        };
        self.messages.push(Pending {
            what,
            msg,
            flags,
            family,
            attrs,
        });
        self
    }

    /// Applies the batch as one transaction. Every message asks for an
    /// acknowledgement, so on failure each refused message is reported with its errno
    /// ([`Error::Batch`]) and the kernel has applied none of them. An [`Error::Io`]
    /// after the batch was sent (acknowledgements lost) leaves the outcome unknown:
    /// read the state back to learn it.
    pub fn send(&self, sock: &NftSocket) -> Result<(), Error> {
        if self.messages.is_empty() {
            return Ok(());
        }
        let begin_seq = sock.next_seq();
        let mut datagram = NftSocket::message(
            "batch begin",
            delimiter(NFNL_MSG_BATCH_BEGIN, begin_seq),
            |_| {},
        )?;
        let mut seqs = HashMap::with_capacity(self.messages.len());
        for (index, m) in self.messages.iter().enumerate() {
            let attrs = m.attrs.as_ref().map_err(|reason| Error::Invalid {
                what: m.what.clone(),
                reason: reason.clone(),
            })?;
            let seq = sock.next_seq();
            seqs.insert(seq, index);
            let header = Header {
                ty: nft_type(m.msg),
                flags: NLM_F_REQUEST | NLM_F_ACK | m.flags,
                seq,
                family: m.family.nfproto(),
                res_id: 0,
            };
            datagram.extend(NftSocket::message(&m.what, header, |w| w.raw(attrs))?);
        }
        let end_seq = sock.next_seq();
        datagram.extend(NftSocket::message(
            "batch end",
            delimiter(NFNL_MSG_BATCH_END, end_seq),
            |_| {},
        )?);

        sock.ensure_buffers(
            datagram.len() + SLACK,
            SLACK + self.messages.len() * ACK_BUDGET,
        )?;
        sock.send("send batch", &datagram)?;
        self.collect_acks(sock, &seqs, begin_seq, end_seq)
    }

    fn collect_acks(
        &self,
        sock: &NftSocket,
        seqs: &HashMap<u32, usize>,
        begin_seq: u32,
        end_seq: u32,
    ) -> Result<(), Error> {
        let mut errnos: Vec<Option<i32>> = vec![None; self.messages.len()];
        let mut outstanding = self.messages.len();
        let mut buf = Vec::new();
        while outstanding > 0 {
            sock.recv("read batch acknowledgements", &mut buf)?;
            let replies = parse_replies(&buf).map_err(|e| Error::Malformed {
                what: "batch acknowledgements".into(),
                reason: e.0,
            })?;
            for reply in replies {
                let ReplyBody::Ack { errno } = reply.body else {
                    continue;
                };
                if let Some(&index) = seqs.get(&reply.seq) {
                    if let Some(slot @ None) = errnos.get_mut(index) {
                        *slot = Some(errno);
                        outstanding -= 1;
                    }
                } else if (reply.seq == begin_seq || reply.seq == end_seq) && errno != 0 {
                    // Refused as a whole (no permission, bad framing): no per-message
                    // acknowledgements follow.
                    return Err(Error::Batch {
                        failures: vec![Failure {
                            what: "batch".into(),
                            errno,
                        }],
                    });
                }
            }
        }
        let failures: Vec<Failure> = self
            .messages
            .iter()
            .zip(errnos)
            .filter_map(|(m, errno)| match errno {
                Some(errno) if errno != 0 => Some(Failure {
                    what: m.what.clone(),
                    errno,
                }),
                _ => None,
            })
            .collect();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(Error::Batch { failures })
        }
    }
}

fn delimiter(ty: u16, seq: u32) -> Header {
    Header {
        ty,
        flags: NLM_F_REQUEST,
        seq,
        family: 0, // AF_UNSPEC
        res_id: NFNL_SUBSYS_NFTABLES,
    }
}
