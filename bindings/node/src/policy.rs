//! `Policy`: a loaded, checked policy file (docs/reference/policy.md).

use napi::Env;
use napi_derive::napi;

use crate::OrThrow;

/// A policy file, loaded and checked. Immutable.
#[napi]
pub struct Policy {
    pub(crate) inner: sandgate::policy::Policy,
}

/// The policy error as a sandgate error (`E_POLICY` with the key): the
/// first problem's message, then the file's read error where there is one;
/// the policy error stays its source.
pub(crate) fn policy_error(e: sandgate::policy::PolicyError) -> sandgate::Error {
    let mut message = e.message().to_owned();
    if let Some(cause) = std::error::Error::source(&e) {
        message.push_str(": ");
        message.push_str(&sandgate::chain_message(cause));
    }
    let key = e.key().map(str::to_owned);
    let out = sandgate::Error::caused_by(e.code(), message, e);
    match key {
        Some(k) => out.with_key(k),
        None => out,
    }
}

#[napi]
impl Policy {
    /// Reads and checks the policy file at `path`; relative roots resolve
    /// against its directory. Throws `E_POLICY` (with `key`) when refused.
    #[napi(factory)]
    pub fn load(env: &Env, path: String) -> napi::Result<Policy> {
        sandgate::policy::Policy::load(&path)
            .map(|inner| Policy { inner })
            .map_err(policy_error)
            .or_throw(env)
    }

    /// `sha256:<hex>` of the file's exact bytes.
    #[napi(getter)]
    pub fn digest(&self) -> String {
        self.inner.digest().to_owned()
    }

    /// What the policy grants, as the JSON endpoint's `summary` answers it
    /// (snake_case keys: `mode`, `read_roots`, `write_root`, `deny_write`,
    /// `limits`, `exec`, `net`, `budgets`, `digest`; `null` budget =
    /// unlimited).
    #[napi(
        getter,
        ts_return_type = "{ mode: string; read_roots: string[]; write_root: string | null; deny_write: string[]; limits: { max_read_bytes: number; max_write_bytes: number; allow_overwrite: boolean }; exec: Record<string, unknown>; net: { allow: string[]; allow_http: boolean }; budgets: Record<string, number | null>; digest: string }"
    )]
    pub fn summary(&self) -> serde_json::Value {
        self.inner.summary().to_json_value()
    }

    /// The summary as a page a person reads (what `sandgate check` prints).
    #[napi(js_name = "toString")]
    pub fn to_display_string(&self) -> String {
        self.inner.summary().to_string()
    }
}
