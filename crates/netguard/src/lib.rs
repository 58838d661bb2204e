//! sandgate's network rules: which destinations an agent may reach.
//!
//! The threat model: an agent asks for a destination, and everything
//! between the name it gives and the socket that connects is adversarial.
//! Names can be spelled to alias addresses (`0x7f.1`, `2130706433`), DNS can
//! answer with a private or loopback address for a public-looking name
//! (rebinding), and a permitted server can redirect to the cloud metadata
//! service. So:
//!
//! - allow-list entries and request hosts must be a strict DNS name or an
//!   IP literal that `std::net` parses; anything else is refused, never
//!   guessed at ([`NetEntry`], [`Host`]);
//! - names match exactly (case-insensitively), literals match by address,
//!   and a name never matches a literal or the other way round;
//! - a destination is judged twice: by scheme, host and port before its
//!   name is resolved ([`Rules::admit`]), then with each address it
//!   resolved to ([`Admitted::check`]); in restricted mode private,
//!   link-local (metadata), unspecified, reserved and multicast addresses
//!   are refused whatever name led there ([`classify`]);
//! - loopback is reached only through an entry that grants it explicitly,
//!   and never through a redirect.
//!
//! The crate is pure: it resolves nothing and opens nothing. A client (the
//! confined fetch) or a proxy resolves names itself, checks every address,
//! and connects only to the addresses that passed.
//!
//! ```
//! use sandgate_netguard::{Hop, Mode, NetEntry, Rules};
//!
//! let allow = vec![NetEntry::parse("api.example.com").unwrap()];
//! let rules = Rules::new(Mode::Restricted, allow, false);
//!
//! // Before resolution: scheme, host and port.
//! let admitted = rules.admit(Hop::First, Some("https"), "api.example.com", None);
//! let admitted = admitted.unwrap();
//! // After: every address the name resolved to.
//! assert!(admitted.check("93.184.216.34".parse().unwrap()).allowed);
//! assert!(!admitted.check("169.254.169.254".parse().unwrap()).allowed);
//! // Alternate spellings of addresses are refused outright.
//! assert!(rules.admit(Hop::First, Some("https"), "0x7f.1", None).is_err());
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod class;
mod entry;
mod host;
mod rules;
mod url;

pub use class::{classify, AddrClass};
pub use entry::{MalformedEntry, NetEntry, NetHost, RefusedEntry};
pub use host::{is_dns_name, is_loopback_name, url_literal, Host};
pub use rules::{Admitted, Hop, Mode, NetDecision, Rules};
pub use url::{Target, UrlError, MAX_URL_BYTES};
