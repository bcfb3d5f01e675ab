//! Which destinations Redial may call. Redial sends requests to addresses users give it, so by
//! default it refuses loopback, private, link-local, shared, multicast and other non-public
//! addresses. The check is on the resolved address, not the name: a public name that resolves to
//! 127.0.0.1 is refused, and the connection goes to exactly the addresses that were checked.

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Whether an address is on the public internet.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            is_public_v6(v6)
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_unspecified()
        || ip.is_documentation()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // shared address space (carrier-grade NAT)
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link-local
        || (first == 0x2001 && ip.segments()[1] == 0x0db8) // documentation
        || (first == 0x64 && ip.segments()[1] == 0xff9b)) // NAT64 may reach private v4
}

/// Why a name could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("DNS: name {0} does not exist")]
    NotFound(String),
    #[error("DNS: temporary failure resolving {0}: {1}")]
    Temporary(String, String),
    #[error("destination {0} resolves only to non-public addresses ({1}); allow private networks to call it")]
    Refused(String, String),
}

/// A resolver that drops the addresses the network policy refuses.
#[derive(Clone, Copy, Debug)]
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let looked_up = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map(|addrs| addrs.collect::<Vec<SocketAddr>>());
            let found = match looked_up {
                Ok(addrs) => addrs,
                Err(e) => {
                    let msg = e.to_string();
                    let err = if is_nxdomain(&msg) {
                        ResolveError::NotFound(host)
                    } else {
                        ResolveError::Temporary(host, msg)
                    };
                    return Err(Box::new(err) as Box<dyn std::error::Error + Send + Sync>);
                }
            };
            if found.is_empty() {
                return Err(Box::new(ResolveError::NotFound(host)) as _);
            }
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| allow_private || is_public(a.ip()))
                .collect();
            if allowed.is_empty() {
                let list = found
                    .iter()
                    .map(|a| a.ip().to_string())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(Box::new(ResolveError::Refused(host, list)) as _);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// getaddrinfo's "no such name" answers (EAI_NONAME, EAI_NODATA), as the C library words them.
fn is_nxdomain(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("name or service not known")
        || m.contains("no address associated")
        || m.contains("nodename nor servname")
        || m.contains("not known")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_and_not() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "93.184.216.34",
        ] {
            assert!(is_public(ip.parse().expect("ip")), "{ip}");
        }
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "ff02::1",
        ] {
            assert!(!is_public(ip.parse().expect("ip")), "{ip}");
        }
    }
}
