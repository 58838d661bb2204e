//! `Policy`: a loaded, checked policy file (SPEC §6).

use napi::Env;
use napi_derive::napi;

use crate::OrThrow;

/// A policy file, loaded and checked. Immutable.
#[napi]
pub struct Policy {
    pub(crate) inner: sandgate::policy::Policy,
}

/// The policy error as a sandgate error (`E_POLICY` with the key).
pub(crate) fn policy_error(e: &sandgate::policy::PolicyError) -> sandgate::Error {
    let mut out = sandgate::Error::new(e.code(), e.message().to_owned());
    if let Some(k) = e.key() {
        out = out.with_key(k);
    }
    out
}

#[napi]
impl Policy {
    /// Reads and checks the policy file at `path`; relative roots resolve
    /// against its directory. Throws `E_POLICY` (with `key`) when refused.
    #[napi(factory)]
    pub fn load(env: &Env, path: String) -> napi::Result<Policy> {
        sandgate::policy::Policy::load(&path)
            .map(|inner| Policy { inner })
            .map_err(|e| policy_error(&e))
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
