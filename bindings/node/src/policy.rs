//! `Policy`: a loaded, checked policy file (docs/reference/policy.md).

use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_derive::napi;

use crate::{json_of, opt_str_arg, str_arg, OrThrow};

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

/// The policy `options` (an object of the policy file's keys) state.
pub(crate) fn from_options(
    env: &Env,
    options: Unknown<'_>,
    base_dir: Option<Unknown<'_>>,
) -> napi::Result<Result<sandgate::policy::Policy, sandgate::Error>> {
    let options = match json_of(env, options, "options")? {
        Ok(o) => o,
        Err(e) => return Ok(Err(e)),
    };
    Ok(opt_str_arg(base_dir, "baseDir").and_then(|d| policy_of(&options, d)))
}

fn policy_of(
    options: &serde_json::Value,
    base_dir: Option<String>,
) -> Result<sandgate::policy::Policy, sandgate::Error> {
    use sandgate::policy::{Policy, PolicyOptions};
    let base = match base_dir {
        Some(d) => std::path::PathBuf::from(d),
        None => std::env::current_dir().map_err(|e| {
            sandgate::Error::new(
                sandgate::ErrorCode::Io,
                format!("cannot find the working directory: {e}"),
            )
        })?,
    };
    let options = PolicyOptions::from_flat_json(&options.to_string()).map_err(policy_error)?;
    Policy::from_options(&options, &base).map_err(policy_error)
}

#[napi]
impl Policy {
    /// Reads and checks the policy file at `path`; relative roots resolve
    /// against its directory. Throws `E_POLICY` (with `key`) when refused.
    #[napi(factory)]
    pub fn load(
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> napi::Result<Policy> {
        let path = str_arg(path, "path").or_throw(env)?;
        sandgate::policy::Policy::load(&path)
            .map(|inner| Policy { inner })
            .map_err(policy_error)
            .or_throw(env)
    }

    /// Checks policy text as if read from a file in `baseDir` (relative
    /// roots resolve against it; the write root may not contain it).
    /// Throws `E_POLICY` (with `key`) when refused.
    #[napi(factory)]
    pub fn parse(
        env: &Env,
        #[napi(ts_arg_type = "string")] text: Unknown<'_>,
        #[napi(ts_arg_type = "string")] base_dir: Unknown<'_>,
    ) -> napi::Result<Policy> {
        let (text, base_dir) = (
            str_arg(text, "text").or_throw(env)?,
            str_arg(base_dir, "baseDir").or_throw(env)?,
        );
        sandgate::policy::Policy::from_bytes(text.as_bytes(), std::path::Path::new(&base_dir), None)
            .map(|inner| Policy { inner })
            .map_err(policy_error)
            .or_throw(env)
    }

    /// A policy stated from code: an object whose keys are the policy
    /// file's key names, verbatim (`{ write_root: 'work', enabled: true,
    /// timeout_ms: 5000 }`; a section may be given whole, `{ exec: {...}
    /// }`). Absent keys take the file's defaults and the file's gate rules
    /// apply: a refusal throws `E_POLICY` naming the dotted key. Relative
    /// roots resolve against `baseDir` (default: the working directory).
    #[napi(
        factory,
        ts_args_type = "options: { security_mode?: 'restricted' | 'trusted_host'; read_roots?: string[]; write_root?: string; deny_write?: string[]; max_read_bytes?: number; max_write_bytes?: number; allow_overwrite?: boolean; enabled?: boolean; shell?: string; timeout_ms?: number; max_output_bytes?: number; env_inherit?: string[]; confine?: 'off' | 'best_effort' | 'required'; process_allow?: string[]; max_memory_bytes?: number; max_tasks?: number; max_cpu_ms?: number; allow?: string[]; allow_http?: boolean; credentials?: Array<{ host: string; port?: number; header?: string; env?: string; file?: string; scheme?: 'Bearer' | 'token' | 'basic'; user?: string; methods?: string[]; path_prefixes?: string[] }>; rules?: Array<{ host: string; port?: number; methods?: string[]; path_prefixes?: string[]; action: 'allow' | 'deny' }>; fs_ops?: number; exec_ops?: number; net_ops?: number }, baseDir?: string | undefined | null"
    )]
    pub fn from_options(
        env: &Env,
        options: Unknown<'_>,
        base_dir: Option<Unknown<'_>>,
    ) -> napi::Result<Policy> {
        from_options(env, options, base_dir)?
            .map(|inner| Policy { inner })
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
        ts_return_type = "{ mode: string; read_roots: string[]; write_root: string | null; deny_write: string[]; limits: { max_read_bytes: number; max_write_bytes: number; allow_overwrite: boolean }; exec: Record<string, unknown>; net: { allow: string[]; allow_http: boolean; credentials?: string[]; rules?: string[] }; budgets: Record<string, number | null>; digest: string }"
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
