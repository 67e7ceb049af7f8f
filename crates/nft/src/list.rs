//! Reading tables, chains and rules back from the kernel, decoded into the model.

use crate::decode;
use crate::error::Error;
use crate::model::{ChainEntry, Family, Rule, Table};
use crate::socket::NftSocket;
use crate::wire::attr::{self, attrs, DecodeError};
use crate::wire::consts::*;

fn malformed(what: &str) -> impl Fn(DecodeError) -> Error + '_ {
    move |e| Error::Malformed {
        what: what.to_string(),
        reason: e.0,
    }
}

fn family_filter(family: Option<Family>) -> u8 {
    family.map_or(0, Family::nfproto) // NFPROTO_UNSPEC: every family
}

impl NftSocket {
    /// Every table in the namespace, of every family.
    pub fn list_tables(&self) -> Result<Vec<Table>, Error> {
        let what = "list tables";
        self.dump(what, NFT_MSG_GETTABLE, NFT_MSG_NEWTABLE, 0, |_| {})?
            .iter()
            .map(|(family, data)| decode::table(*family, data).map_err(malformed(what)))
            .collect()
    }

    /// Every chain (base and regular) in the namespace, or in one family, each with
    /// its table and, for base chains, hook, priority, type, policy and devices.
    pub fn list_chains(&self, family: Option<Family>) -> Result<Vec<ChainEntry>, Error> {
        let what = match family {
            Some(f) => format!("list chains {f}"),
            None => "list chains".to_string(),
        };
        self.dump(
            &what,
            NFT_MSG_GETCHAIN,
            NFT_MSG_NEWCHAIN,
            family_filter(family),
            |_| {},
        )?
        .iter()
        .map(|(family, data)| decode::chain(*family, data).map_err(malformed(&what)))
        .collect()
    }

    /// The rules of one chain, in evaluation order, with their handles and counter
    /// values as the kernel holds them (see [`Rule::normalized`] to compare).
    pub fn list_rules(&self, family: Family, table: &str, chain: &str) -> Result<Vec<Rule>, Error> {
        let what = format!("list rules {family} {table} {chain}");
        Ok(self
            .table_rules(&what, family, table, Some(chain))?
            .into_iter()
            .map(|(_, rule)| rule)
            .collect())
    }

    /// The rules of a table (or one chain of it) as (chain, rule), in order.
    pub(crate) fn table_rules(
        &self,
        what: &str,
        family: Family,
        table: &str,
        chain: Option<&str>,
    ) -> Result<Vec<(String, Rule)>, Error> {
        let items = self.dump(
            what,
            NFT_MSG_GETRULE,
            NFT_MSG_NEWRULE,
            family.nfproto(),
            |w| {
                w.string(NFTA_RULE_TABLE, table);
                if let Some(chain) = chain {
                    w.string(NFTA_RULE_CHAIN, chain);
                }
            },
        );
        let items = match items {
            // The kernel refuses a filtered dump of a table or chain that is not there;
            // for a listing that is simply "no rules".
            Err(Error::Kernel { errno, .. }) if errno == libc::ENOENT => Vec::new(),
            other => other?,
        };
        let mut rules = Vec::with_capacity(items.len());
        for (_, data) in items {
            let (rule_table, rule_chain, rule) = decode::rule(&data).map_err(malformed(what))?;
            // Filters are applied by the kernel; this guards against a kernel that
            // ignores them rather than mixing other tables' rules in.
            if rule_table == table && chain.is_none_or(|c| c == rule_chain) {
                rules.push((rule_chain, rule));
            }
        }
        Ok(rules)
    }

    /// The ruleset generation: it changes with every committed transaction, so equal
    /// values before and after a set of reads mean they saw one consistent state.
    pub fn generation(&self) -> Result<u32, Error> {
        let what = "read ruleset generation";
        let data = self.query(what, NFT_MSG_GETGEN, NFT_MSG_NEWGEN)?;
        for a in attrs(&data) {
            let (ty, payload) = a.map_err(malformed(what))?;
            if ty == NFTA_GEN_ID {
                return attr::be32(payload).map_err(malformed(what));
            }
        }
        Err(Error::Malformed {
            what: what.to_string(),
            reason: "no generation id".into(),
        })
    }
}
