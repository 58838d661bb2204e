//! The hardened invocation: git's argv and environment for a vetted
//! request, and the read-only ruleset it runs under.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::{inspect_repository, Snapshot};
use super::schema::{check_args, refuse_flag, Checked, DANGEROUS_LONG, DANGEROUS_SHORT};
use super::{shown, GitError, GitErrorKind, GitSubcommand};
use crate::confine::ConfineSpec;

/// Where git is looked for, in order. Never `PATH`.
pub const GIT_CANDIDATES: [&str; 3] = ["/usr/bin/git", "/usr/local/bin/git", "/bin/git"];

/// The files of `/etc` git's ruleset grants (read), when they exist: the
/// dynamic linker's cache and the time zone. Nothing else of `/etc`.
pub const GIT_ETC_FILES: [&str; 2] = ["/etc/ld.so.cache", "/etc/localtime"];

/// A vetted git run: program, argv, environment and directory. Run it
/// without a shell, through the executor's argv entry point
/// ([`crate::exec::LocalShellExecutor::exec_program`]) in
/// [`GitInvocation::cwd`], confined by [`GitInvocation::confine_spec`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitInvocation {
    /// Git, by absolute path.
    pub program: PathBuf,
    /// The arguments after the program name.
    pub args: Vec<OsString>,
    /// The complete environment (the child gets nothing else).
    pub env: Vec<(OsString, OsString)>,
    /// The canonical root: git's work tree, and the directory it runs in
    /// unless the caller picks one beneath it (the repository is pinned by
    /// `GIT_DIR` and `GIT_WORK_TREE`, so the directory only sets the prefix
    /// that relative paths are taken from).
    pub cwd: PathBuf,
    /// The subcommand.
    pub subcommand: GitSubcommand,
    /// git's private git directory (`GIT_DIR`), removed when the last
    /// clone of the invocation is dropped; `None` without a repository.
    private: Option<Arc<PrivateGitDir>>,
}

impl GitInvocation {
    /// What git may touch when confined (a ruleset of its own, not the
    /// shell's): read and execute beneath the root and the system
    /// directories but `/etc` (of which only [`GIT_ETC_FILES`]), write nothing (no write directory at all; `/dev/null`
    /// only), connect to and bind no TCP port, and `RLIMIT_FSIZE` 0 so that
    /// even without Landlock no regular file gains a byte. git needs no more
    /// for `status`, `diff` and `log` with `--no-optional-locks`: it writes
    /// no index, lock or temporary file. A driver the vetting missed, or a
    /// config rewritten between the vetting and git's own read, runs under
    /// the same ruleset. Prepare it with [`crate::confine::prepare`].
    pub fn confine_spec(&self) -> ConfineSpec {
        ConfineSpec {
            read_dirs: std::iter::once(self.cwd.clone())
                .chain(self.git_dir().map(Path::to_path_buf))
                .collect(),
            write_dirs: Vec::new(),
            connect_ports: Vec::new(),
            max_file_size: Some(0),
            // In the executor's namespaces too, where its forwarders and
            // proxy would reach what the shell is granted.
            no_tcp: true,
            // git reads none of the host's configuration (the system
            // config and attributes are off): of `/etc`, only the dynamic
            // linker's cache and the time zone (`--date=local`). A line of
            // a host file that git was tricked into reading and echoes
            // (as a vetting miss did) is never one of `/etc`.
            etc_files_only: Some(GIT_ETC_FILES.iter().map(PathBuf::from).collect()),
            ..ConfineSpec::default()
        }
    }
}

impl GitInvocation {
    /// git's private git directory, the copy of what was vetted that
    /// `GIT_DIR` names (see the module documentation); `None` when the
    /// root has no repository. It lies outside the root, so a caller that
    /// narrows what git may read must grant it too; it is removed when the
    /// invocation (the last of its clones) is dropped.
    pub fn git_dir(&self) -> Option<&Path> {
        self.private.as_deref().map(|p| p.0.as_path())
    }
}

/// A directory of this process's own in the temporary directory (mode
/// 0700), removed on drop.
#[derive(Debug, PartialEq, Eq)]
struct PrivateGitDir(PathBuf);

impl Drop for PrivateGitDir {
    fn drop(&mut self) {
        // Links inside are removed, never followed.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Builds git's private git directory from what the vetting read: the
/// control files (config, index, HEAD, packed-refs, info, ...) as copies of
/// the bytes vetted, `refs` and `logs` as links to the repository's, and
/// `objects` a directory of links to the repository's object directories
/// and packs, with an empty `info` (no alternates). git reads nothing of
/// `<root>/.git` but through those links, so a config, an index or a
/// control file rewritten after the vetting is never what git reads.
fn private_git_dir(dot_git: &Path, snapshot: &Snapshot) -> Result<PrivateGitDir, GitError> {
    use crate::tmpdir::{owner_tag, sweep_named, GIT_PREFIX};
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static OWNER: OnceLock<Option<String>> = OnceLock::new();
    let failed = |e: std::io::Error| GitError::io("cannot make git's private git directory", e);
    let base = crate::tmpdir::base().map_err(failed)?;
    // The name carries its owner (PID namespace, pid, start time), as the
    // executor's session directories do: a copy left by a process killed
    // before it could remove it (SIGKILL) is removed by the next process
    // to plan a run, once, here; a live owner's copy is left alone.
    let owner = OWNER.get_or_init(|| {
        let owner = owner_tag();
        if let Some(owner) = &owner {
            sweep_named(&base, GIT_PREFIX, owner);
        }
        owner
    });
    let dir = loop {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let unique = format!("{}{nanos:08x}", NEXT.fetch_add(1, Ordering::Relaxed));
        let path = base.join(match owner {
            Some(owner) => format!("{GIT_PREFIX}{owner}-{unique}"),
            None => format!("{GIT_PREFIX}{}-{unique}", std::process::id()),
        });
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => break PrivateGitDir(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(failed(e)),
        }
    };
    let mk = |rel: &Path| {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir.0.join(rel))
            .map_err(failed)
    };
    for rel in &snapshot.dirs {
        mk(rel)?;
    }
    for (rel, bytes, mtime) in &snapshot.files {
        // A copy past the file size limit (`ulimit -f`) would raise
        // `SIGXFSZ`, which ends the program embedding the executor.
        sandgate_rootfs::within_file_size_limit(bytes.len() as u64).map_err(|e| {
            GitError::io(
                &format!(
                    "cannot copy .git/{} into git's private git directory",
                    sandgate_codes::shown(rel)
                ),
                e,
            )
        })?;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dir.0.join(rel))
            .and_then(|mut f| {
                f.write_all(bytes)?;
                // The index's time tells git which entries are racily
                // clean: the copy keeps the original's.
                f.set_modified(*mtime)
            })
            .map_err(failed)?;
    }
    for rel in &snapshot.linked {
        std::os::unix::fs::symlink(dot_git.join(rel), dir.0.join(rel)).map_err(failed)?;
    }
    let objects = Path::new("objects");
    mk(objects)?;
    mk(&objects.join("info"))?;
    for name in &snapshot.objects {
        std::os::unix::fs::symlink(
            dot_git.join(objects).join(name),
            dir.0.join(objects).join(name),
        )
        .map_err(failed)?;
    }
    Ok(dir)
}

/// The first of [`GIT_CANDIDATES`] that is an executable regular file.
pub fn find_git() -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    GIT_CANDIDATES.iter().map(PathBuf::from).find(|p| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The fixed `-c` overrides every invocation gets (before the per-driver
/// ones).
pub const CONFIG_OVERRIDES: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "pager.status=false",
    "pager.diff=false",
    "pager.log=false",
    "diff.external=",
    "safe.bareRepository=explicit",
    "protocol.allow=never",
    "core.attributesFile=/dev/null",
    // Files git would read besides the repository and the tree, named by
    // the repository config: a mailmap's names (`%aN`, `log`'s author
    // lines), ignore patterns (`status --ignored`) and a diff order would
    // each show what a host file holds, and a FIFO there would hold git
    // until the timeout. The in-tree `.mailmap` and `.gitignore` still
    // apply (git opens those without following links).
    "core.excludesFile=/dev/null",
    "diff.orderFile=/dev/null",
    "mailmap.file=/dev/null",
    "log.showSignature=false",
    "gpg.program=/bin/false",
    "gpg.ssh.program=/bin/false",
    "gpg.x509.program=/bin/false",
    "credential.helper=",
    "core.askPass=",
    "diff.submodule=short",
    // The entries are read one after the other, as the vetting read them,
    // never from the offsets an index's IEOT extension gives threads.
    "index.threads=1",
    // The answer is text for the caller, never coloured by the
    // repository: `color.ui`, and the switches that win over it for
    // status, diff and log (and the advice hints on stderr). `--format`'s
    // `%C(...)` follows them too.
    "color.ui=never",
    "color.diff=never",
    "color.status=never",
    "color.advice=never",
    // git quotes a file name holding a control character; with the
    // repository's `core.quotePath=false` it left every byte above 0x7f
    // as it is, C1 controls among them (U+009B is a one-character CSI).
    "core.quotePath=true",
    // git log's default format is git's own: a `format.pretty` in the
    // repository would bring back what the schema refuses in `--format`
    // (`%(describe)`, which starts `git describe` for every commit, and
    // the `%G` signature atoms). `--format`/`--pretty`/`--oneline` in the
    // request still win.
    "format.pretty=medium",
];

/// Vets a confined git request as [`plan`] does (the words against the
/// schema, git's executable, the root and its repository) without copying
/// the repository or building the invocation: for a caller that only asks
/// whether the request would run (`sandgate explain`), which reads the
/// repository but writes nothing.
pub fn vet(words: &[String], allowed: &[GitSubcommand], root: &Path) -> Result<(), GitError> {
    vetted(words, allowed, root).map(drop)
}

/// A request [`vetted`]: what [`plan`] builds the invocation from.
struct Vetted {
    sub: GitSubcommand,
    checked: Checked,
    program: PathBuf,
    root: PathBuf,
    parent: PathBuf,
    repo: Option<Snapshot>,
}

/// The checks [`plan`] and [`vet`] share.
fn vetted(words: &[String], allowed: &[GitSubcommand], root: &Path) -> Result<Vetted, GitError> {
    match words.first() {
        Some(w) if w == "git" => {}
        Some(w) => {
            return Err(GitError::refused(
                w,
                "only `git` runs under confined git (process_allow git:status, git:diff, git:log)",
            ))
        }
        None => return Err(GitError::syntax("confined git refuses an empty request")),
    }
    let Some(word) = words.get(1) else {
        return Err(GitError::refused("git", "a subcommand is required"));
    };
    if word.starts_with('-') {
        let known = DANGEROUS_LONG
            .iter()
            .chain(DANGEROUS_SHORT)
            .any(|(f, _)| word == f || word.starts_with(&format!("{f}=")));
        return Err(if known {
            refuse_flag(GitSubcommand::Status, word)
        } else {
            GitError::refused(word, "git's global options are not admitted")
        });
    }
    let Some(sub) = GitSubcommand::from_word(word) else {
        return Err(GitError::refused(
            word,
            format_args!(
                "`git {}` is not a confined git subcommand (only status, diff and log)",
                shown(word)
            ),
        ));
    };
    if !allowed.contains(&sub) {
        return Err(GitError::new(
            GitErrorKind::NotAllowed,
            format!(
                "confined git refuses `git {}`: {} is not in process_allow",
                sub.as_str(),
                sub.allow_entry()
            ),
        ));
    }
    let checked = check_args(sub, &words[2..])?;

    let program = find_git().ok_or_else(|| {
        GitError::new(
            GitErrorKind::NoGit,
            "confined git: no git executable at /usr/bin/git, /usr/local/bin/git or /bin/git",
        )
    })?;
    let root =
        std::fs::canonicalize(root).map_err(|e| GitError::io("cannot resolve the root", e))?;
    let parent = match root.parent() {
        Some(p) if root != Path::new("/") => p.to_path_buf(),
        _ => {
            return Err(GitError::repository(
                "confined git refuses to run with the filesystem root as its root",
            ))
        }
    };
    if parent.as_os_str().as_encoded_bytes().contains(&b':') {
        return Err(GitError::repository(
            "confined git refuses a root whose parent path contains `:` (it cannot be a \
             GIT_CEILING_DIRECTORIES entry)",
        ));
    }
    let repo = inspect_repository(&root)?;
    if repo.is_none() && sub == GitSubcommand::Diff {
        return Err(GitError::repository(
            "confined git refuses `git diff`: the root is not a git repository (no .git), and \
             outside one git diff compares arbitrary paths",
        ));
    }
    Ok(Vetted {
        sub,
        checked,
        program,
        root,
        parent,
        repo,
    })
}

/// Plans a confined git run from a request split by [`super::split_words`].
///
/// `words[0]` must be `git`, `words[1]` a confined subcommand that is in
/// `allowed`; the rest must fit the subcommand's schema (see the module
/// documentation). `root` is the directory git runs in (the policy's root);
/// its repository is inspected (`.git` must be a plain directory whose
/// config can be vetted, or absent) and copied to a private git directory
/// that git is pinned to. Refusals name the refused word.
pub fn plan(
    words: &[String],
    allowed: &[GitSubcommand],
    root: &Path,
) -> Result<GitInvocation, GitError> {
    let Vetted {
        sub,
        checked,
        program,
        root,
        parent,
        repo,
    } = vetted(words, allowed, root)?;
    // git is pinned to the vetted repository: with GIT_DIR set it never
    // searches from its working directory, so a repository nested beneath
    // the root (or planted there after this check) is never the one it
    // uses. Without a repository at the root, GIT_DIR names /dev/null,
    // which is never one: git answers "not a git repository".
    let private = repo
        .as_ref()
        .map(|snapshot| private_git_dir(&root.join(".git"), snapshot))
        .transpose()?
        .map(Arc::new);
    let git_dir = match &private {
        Some(dir) => dir.0.clone().into_os_string(),
        None => OsString::from("/dev/null"),
    };
    let repo = repo.map(|s| s.config).unwrap_or_default();

    let mut args: Vec<OsString> = Vec::new();
    for kv in CONFIG_OVERRIDES {
        args.push("-c".into());
        args.push((*kv).into());
    }
    for name in &repo.filters {
        for kv in ["clean=", "smudge=", "process=", "required=false"] {
            // `filter.<name>.<kv>`, the name's bytes exactly as the config
            // holds them.
            let mut arg = b"filter.".to_vec();
            arg.extend_from_slice(name);
            arg.push(b'.');
            arg.extend_from_slice(kv.as_bytes());
            args.push("-c".into());
            args.push(OsString::from_vec(arg));
        }
    }
    args.push("--no-pager".into());
    args.push("--no-optional-locks".into());
    args.push(sub.as_str().into());
    match sub {
        GitSubcommand::Status => args.push("--ignore-submodules=all".into()),
        GitSubcommand::Diff => {
            args.push("--no-ext-diff".into());
            args.push("--no-textconv".into());
            args.push("--ignore-submodules=all".into());
            // git diff silently turns into `diff --no-index` when GIT_DIR
            // is not a repository it accepts (an empty `.git`, a format
            // version or extension it does not know, a `.git` removed
            // after the vetting), and then compares two arbitrary paths:
            // the revisions. `--no-walk` is a revision option that git
            // diff accepts and ignores (it walks no history), but the
            // no-index mode knows only diff options and refuses it, so
            // git stops with a usage error instead of reading paths.
            args.push("--no-walk".into());
        }
        GitSubcommand::Log => {
            args.push("--no-ext-diff".into());
            args.push("--no-textconv".into());
        }
    }
    args.extend(checked.flags.into_iter().map(OsString::from));
    args.extend(checked.revisions.into_iter().map(OsString::from));
    args.push("--".into());
    args.extend(checked.pathspecs.into_iter().map(OsString::from));

    let env: Vec<(OsString, OsString)> = [
        ("PATH", OsString::from("/usr/bin:/bin")),
        ("HOME", "/nonexistent".into()),
        ("LANG", "C".into()),
        ("LC_ALL", "C".into()),
        ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ("GIT_CONFIG_GLOBAL", "/dev/null".into()),
        ("GIT_ATTR_NOSYSTEM", "1".into()),
        ("GIT_TERMINAL_PROMPT", "0".into()),
        ("GIT_OPTIONAL_LOCKS", "0".into()),
        ("GIT_NO_LAZY_FETCH", "1".into()),
        ("GIT_CEILING_DIRECTORIES", parent.into_os_string()),
        ("GIT_DIR", git_dir),
        ("GIT_WORK_TREE", root.clone().into_os_string()),
        ("GIT_PAGER", "cat".into()),
        ("PAGER", "cat".into()),
    ]
    .into_iter()
    .map(|(k, v)| (OsString::from(k), v))
    .collect();

    Ok(GitInvocation {
        program,
        args,
        env,
        cwd: root,
        subcommand: sub,
        private,
    })
}
