//! The confined web fetch as a policy grants it: the facade's half.
//!
//! [`from_policy`] builds the [`Fetcher`] a policy grants: the policy
//! produces its network rules (`net.allow` entries, `allow_http`, security
//! mode; see [`sandgate_netguard`]) and its `[budgets] net_ops`, and the
//! fetcher takes both as plain values. Every hop, redirects included, goes
//! through those rules; names are resolved by sandgate and connections
//! pinned to the checked addresses; see [`sandgate_fetch`] for the whole
//! design.
//!
//! A proxy configured in the environment (`HTTPS_PROXY`, `HTTP_PROXY`,
//! `ALL_PROXY`, upper or lower case) makes restricted mode refuse every
//! fetch with `E_NET_DENIED`: behind a proxy the destination address can be
//! neither checked nor pinned. trusted_host mode connects directly.

use sandgate_policy::Policy;

pub use sandgate_fetch::{
    audit_path, CancelFlag, FetchError, FetchOptions, FetchResponse, Fetcher, FetcherBuilder, Hop,
    Resolve, SystemResolver, CROSS_ORIGIN_KEPT, DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT, MAX_REDIRECTS,
    MAX_TIMEOUT, PROXY_VARIABLES,
};

use crate::error::{with_causes, Error};

/// The fetcher `policy` grants, with the proxy the environment configures
/// declared.
pub fn from_policy(policy: &Policy) -> Fetcher {
    builder(policy).build()
}

/// A builder preset from `policy` and the environment's proxy, for callers
/// that add their own resolver or caps.
pub fn builder(policy: &Policy) -> FetcherBuilder {
    Fetcher::builder(policy.net_rules().clone())
        .net_ops(policy.budgets().net_ops)
        .proxy_from_env()
}

impl From<FetchError> for Error {
    /// The fetch's message (its `Display` repeats the code).
    #[cold]
    fn from(e: FetchError) -> Error {
        Error::caused_by(e.code(), with_causes(e.message(), &e), e)
    }
}
