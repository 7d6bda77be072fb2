//! Loopback addresses handed out as a cluster hands out Service ClusterIPs and pod IPs: from a
//! `/24` the caller chooses (`"127.0.100."`: .1, .2, ...), each once while it is in use, the
//! never-used ones first, so a test's pods and Services never share an address with another
//! test's (give each test its own pool) and a pod gone is not mistaken for its successor.

use std::collections::{BTreeSet, VecDeque};
use std::net::Ipv4Addr;

/// A `/24` of loopback addresses.
pub struct Pool {
    prefix: [u8; 3],
    next: u16,
    released: VecDeque<Ipv4Addr>,
    used: BTreeSet<Ipv4Addr>,
}

impl Pool {
    /// The pool of `prefix`, three octets and a dot of 127.0.0.0/8 (`"127.0.120."`).
    pub fn new(prefix: &str) -> Pool {
        let octets: Vec<u8> = prefix
            .strip_suffix('.')
            .unwrap_or(prefix)
            .split('.')
            .map(|o| {
                o.parse()
                    .unwrap_or_else(|_| panic!("pool {prefix:?}: not an octet"))
            })
            .collect();
        assert!(
            octets.len() == 3 && octets[0] == 127,
            "pool {prefix:?}: give three octets of 127.0.0.0/8, such as \"127.0.120.\""
        );
        Pool {
            prefix: [octets[0], octets[1], octets[2]],
            next: 1,
            released: VecDeque::new(),
            used: BTreeSet::new(),
        }
    }

    /// Whether `ip` is one of the pool's.
    pub fn holds(&self, ip: Ipv4Addr) -> bool {
        ip.octets()[..3] == self.prefix && (1..=254).contains(&ip.octets()[3])
    }

    /// An address not in use: the next never used, else the one released longest ago.
    pub fn take(&mut self) -> Option<Ipv4Addr> {
        while self.next <= 254 {
            let [a, b, c] = self.prefix;
            let ip = Ipv4Addr::new(a, b, c, self.next as u8);
            self.next += 1;
            if self.used.insert(ip) {
                return Some(ip);
            }
        }
        while let Some(ip) = self.released.pop_front() {
            if self.used.insert(ip) {
                return Some(ip);
            }
        }
        None
    }

    /// Marks `ip` in use (one the caller was given elsewhere); false when it already was.
    pub fn claim(&mut self, ip: Ipv4Addr) -> bool {
        self.released.retain(|r| *r != ip);
        self.used.insert(ip)
    }

    /// Gives `ip` back.
    pub fn release(&mut self, ip: Ipv4Addr) {
        if self.used.remove(&ip) && self.holds(ip) {
            self.released.push_back(ip);
        }
    }
}
