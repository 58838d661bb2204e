//! Gate rules on values: ranges, byte caps, budgets, process grants. Network
//! entries have their own module.

use sandgate_policy::{PolicyErrorKind as K, MAX_TIMEOUT_MS};

use crate::common::{ok, refused};

// ---- exec.timeout_ms ----

#[test]
fn timeout_zero_is_refused() {
    let err = refused(
        "[exec]\ntimeout_ms = 0\n",
        K::InvalidValue,
        "exec.timeout_ms",
    );
    assert!(err.message().contains("86400000"), "{err}");
}

#[test]
fn timeout_negative_is_refused() {
    refused(
        "[exec]\ntimeout_ms = -1\n",
        K::InvalidValue,
        "exec.timeout_ms",
    );
}

#[test]
fn timeout_over_a_day_is_refused() {
    refused(
        "[exec]\ntimeout_ms = 86400001\n",
        K::InvalidValue,
        "exec.timeout_ms",
    );
}

#[test]
fn timeout_bounds_are_admitted() {
    assert_eq!(ok("[exec]\ntimeout_ms = 1\n").exec().timeout_ms, 1);
    assert_eq!(
        ok("[exec]\ntimeout_ms = 86400000\n").exec().timeout_ms,
        MAX_TIMEOUT_MS
    );
}

// ---- byte caps ----

#[test]
fn zero_max_read_bytes_is_refused() {
    refused(
        "[fs]\nmax_read_bytes = 0\n",
        K::InvalidValue,
        "fs.max_read_bytes",
    );
}

#[test]
fn negative_max_read_bytes_is_refused() {
    let err = refused(
        "[fs]\nmax_read_bytes = -5\n",
        K::InvalidValue,
        "fs.max_read_bytes",
    );
    assert!(err.message().contains("-5"), "{err}");
}

#[test]
fn zero_or_negative_max_write_bytes_is_refused() {
    refused(
        "[fs]\nmax_write_bytes = 0\n",
        K::InvalidValue,
        "fs.max_write_bytes",
    );
    refused(
        "[fs]\nmax_write_bytes = -1\n",
        K::InvalidValue,
        "fs.max_write_bytes",
    );
}

#[test]
fn zero_or_negative_max_output_bytes_is_refused() {
    refused(
        "[exec]\nmax_output_bytes = 0\n",
        K::InvalidValue,
        "exec.max_output_bytes",
    );
    refused(
        "[exec]\nmax_output_bytes = -8\n",
        K::InvalidValue,
        "exec.max_output_bytes",
    );
}

#[test]
fn one_byte_caps_are_admitted() {
    let p = ok("[fs]\nmax_read_bytes = 1\nmax_write_bytes = 1\n[exec]\nmax_output_bytes = 1\n");
    assert_eq!(p.limits().max_read_bytes, 1);
    assert_eq!(p.exec().max_output_bytes, 1);
}

// ---- exec values ----

#[test]
fn resource_limits_default_and_are_read() {
    let p = ok("[exec]\nenabled = true\n");
    assert_eq!(p.exec().max_memory_bytes, 2 << 30);
    assert_eq!(p.exec().max_tasks, 4096);
    assert_eq!(p.exec().max_cpu_ms, None);
    assert!(!p.exec().stated_limits.memory && !p.exec().stated_limits.tasks);
    let p = ok("[exec]\nmax_memory_bytes = 268435456\nmax_tasks = 64\nmax_cpu_ms = 500\n");
    assert_eq!(p.exec().max_memory_bytes, 256 << 20);
    assert_eq!(p.exec().max_tasks, 64);
    assert_eq!(p.exec().max_cpu_ms, Some(500));
    assert!(p.exec().stated_limits.memory && p.exec().stated_limits.tasks);
}

#[test]
fn zero_negative_or_too_small_resource_limits_are_refused() {
    for (text, key) in [
        ("max_memory_bytes = 0", "exec.max_memory_bytes"),
        ("max_memory_bytes = -1", "exec.max_memory_bytes"),
        ("max_memory_bytes = 1048576", "exec.max_memory_bytes"),
        ("max_tasks = 0", "exec.max_tasks"),
        ("max_tasks = 1", "exec.max_tasks"),
        ("max_cpu_ms = 0", "exec.max_cpu_ms"),
        ("max_cpu_ms = -5", "exec.max_cpu_ms"),
        ("max_cpu_ms = 9", "exec.max_cpu_ms"),
    ] {
        let err = refused(&format!("[exec]\n{text}\n"), K::InvalidValue, key);
        assert!(err.message().contains("cannot start a shell"), "{err}");
    }
}

#[test]
fn resource_limits_must_be_integers() {
    refused(
        "[exec]\nmax_memory_bytes = \"2G\"\n",
        K::WrongType,
        "exec.max_memory_bytes",
    );
}

#[test]
fn relative_shell_is_refused() {
    refused("[exec]\nshell = \"bash\"\n", K::InvalidValue, "exec.shell");
    refused("[exec]\nshell = \"\"\n", K::InvalidValue, "exec.shell");
}

#[test]
fn malformed_env_inherit_name_is_refused() {
    refused(
        "[exec]\nenv_inherit = [\"OK\", \"A=B\"]\n",
        K::InvalidValue,
        "exec.env_inherit[1]",
    );
    refused(
        "[exec]\nenv_inherit = [\"\"]\n",
        K::InvalidValue,
        "exec.env_inherit[0]",
    );
}

// ---- budgets ----

#[test]
fn fs_budget_without_any_root_is_refused() {
    let err = refused(
        "[budgets]\nfs_ops = 10\n",
        K::BudgetWithoutCapability,
        "budgets.fs_ops",
    );
    assert!(err.message().contains("fs.write_root"), "{err}");
    // Zero is still a budget for a capability that is not there.
    refused(
        "[budgets]\nfs_ops = 0\n",
        K::BudgetWithoutCapability,
        "budgets.fs_ops",
    );
}

#[test]
fn fs_budget_with_a_read_or_write_root_is_admitted() {
    assert_eq!(
        ok("[fs]\nread_roots = [\"inputs\"]\n[budgets]\nfs_ops = 10\n")
            .budgets()
            .fs_ops,
        Some(10)
    );
    assert_eq!(
        ok("[fs]\nwrite_root = \"workspace\"\n[budgets]\nfs_ops = 0\n")
            .budgets()
            .fs_ops,
        Some(0)
    );
}

#[test]
fn exec_budget_without_exec_table_is_refused() {
    refused(
        "[budgets]\nexec_ops = 1\n",
        K::BudgetWithoutCapability,
        "budgets.exec_ops",
    );
}

#[test]
fn exec_budget_with_exec_disabled_is_refused() {
    refused(
        "[exec]\nenabled = false\n[budgets]\nexec_ops = 1\n",
        K::BudgetWithoutCapability,
        "budgets.exec_ops",
    );
}

#[test]
fn exec_budget_with_exec_enabled_is_admitted() {
    assert_eq!(
        ok("[exec]\nenabled = true\n[budgets]\nexec_ops = 5\n")
            .budgets()
            .exec_ops,
        Some(5)
    );
}

#[test]
fn net_budget_with_empty_allow_is_refused() {
    refused(
        "[budgets]\nnet_ops = 1\n",
        K::BudgetWithoutCapability,
        "budgets.net_ops",
    );
    refused(
        "[net]\nallow = []\nallow_http = true\n[budgets]\nnet_ops = 1\n",
        K::BudgetWithoutCapability,
        "budgets.net_ops",
    );
}

#[test]
fn net_budget_with_an_allowed_host_is_admitted() {
    let p = ok("[net]\nallow = [\"api.example.com\"]\n[budgets]\nnet_ops = 7\n");
    assert_eq!(p.budgets().net_ops, Some(7));
}

#[test]
fn negative_budget_is_refused() {
    refused(
        "[fs]\nread_roots = [\"inputs\"]\n[budgets]\nfs_ops = -1\n",
        K::InvalidValue,
        "budgets.fs_ops",
    );
}

// ---- process_allow ----

#[test]
fn restricted_admits_the_three_confined_git_entries() {
    let p = ok(
        "[fs]\nwrite_root = \"workspace\"\n[exec]\nprocess_allow = [\"git:status\", \"git:diff\", \"git:log\"]\n",
    );
    assert_eq!(
        p.exec().process_allow,
        ["git:status", "git:diff", "git:log"]
    );
}

#[test]
fn restricted_refuses_any_other_process_entry() {
    for (i, entry) in [
        "sh",
        "git:push",
        "git:*",
        "git",
        "gh:pr",
        "git:Status",
        " git:log",
    ]
    .iter()
    .enumerate()
    {
        let text = format!(
            "[fs]\nwrite_root = \"workspace\"\n[exec]\nprocess_allow = [\"git:log\", {entry:?}]\n"
        );
        let err = refused(&text, K::ProcessNotAllowed, "exec.process_allow[1]");
        assert!(err.message().contains("trusted_host"), "{i}: {err}");
    }
}

#[test]
fn trusted_host_admits_other_process_entries() {
    let p = ok("security_mode = \"trusted_host\"\n[exec]\nprocess_allow = [\"sh\", \"gh:pr\"]\n");
    assert_eq!(p.exec().process_allow, ["sh", "gh:pr"]);
}

#[test]
fn confined_git_without_a_root_is_refused() {
    refused(
        "[exec]\nprocess_allow = [\"git:status\"]\n",
        K::ProcessNotAllowed,
        "exec.process_allow[0]",
    );
    assert!(
        ok("[fs]\nread_roots = [\"inputs\"]\n[exec]\nprocess_allow = [\"git:status\"]\n")
            .exec()
            .process_allow
            .contains(&"git:status".to_owned())
    );
}

#[test]
fn empty_process_entry_is_refused_in_trusted_host() {
    refused(
        "security_mode = \"trusted_host\"\n[exec]\nprocess_allow = [\"\"]\n",
        K::InvalidValue,
        "exec.process_allow[0]",
    );
}

#[test]
fn deny_write_patterns_are_kept_verbatim() {
    let p = ok("[fs]\ndeny_write = [\"./a/**\", \"*.YML\", \"\", \"/abs\"]\n");
    assert_eq!(p.deny_write(), ["./a/**", "*.YML", "", "/abs"]);
}

#[test]
fn policy_is_send_sync_clone() {
    fn assert_traits<T: Send + Sync + Clone + std::fmt::Debug + 'static>() {}
    assert_traits::<sandgate_policy::Policy>();
    fn assert_error<T: std::error::Error + Send + Sync + 'static>() {}
    assert_error::<sandgate_policy::PolicyError>();
    let p = ok("");
    let q = p.clone();
    std::thread::spawn(move || assert_eq!(q.digest().len(), 71))
        .join()
        .unwrap();
    assert_eq!(p.digest().len(), 71);
}
