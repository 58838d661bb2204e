//! Operation plans beneath a root (docs/reference/resolution.md), in the style of cap-std's
//! `fs_ops` fuzz target: a random sequence of operations over paths made of
//! a few tokens (`a`, `b`, `..`, `.`, `/`, a symlink name `l`), including
//! symlinks planted inside the tree that point anywhere (`..`, out of the
//! root, absolute, magic links), runs in a fresh temporary root once per
//! resolver (`Openat2` where the kernel has it, and `Walk`). After every
//! successful operation:
//!
//! - every descriptor the run holds (files, `open_dir` sub-roots,
//!   `open_parent` directories, `resolve_path` handles) still lies beneath
//!   the root's real path, as `/proc/self/fd/N` names it, and each one an
//!   operation on a sub-root returned lies beneath that sub-root;
//! - nothing outside the root changed: the sibling `outside/` tree (a
//!   sentinel file and directory) and the root's own entry in its parent;
//!
//! and after every operation, successful or not, no error message holds a
//! host absolute path. The two resolvers must give the same outcome for
//! every operation of the plan.

use std::fs;
use std::io::Write as _;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use sandgate_rootfs::{OpenOptions, RenameMode, Resolver, Root};

use crate::bytes::Bytes;

/// Path tokens, joined with `/` (so `/` itself makes `//` or a leading `/`).
const TOKENS: &[&str] = &["a", "b", "..", ".", "/", "l"];

/// Symlink targets; `$ROOT` and `$OUT` become the absolute paths of the
/// root and of the outside sibling.
const TARGETS: &[&str] = &[
    "a",
    "b",
    "a/b",
    ".",
    "..",
    "../..",
    "a/..",
    "a/../..",
    "l",
    "../outside",
    "../outside/secret",
    "../root/a",
    "$ROOT",
    "$ROOT/a",
    "$OUT",
    "$OUT/secret",
    "/",
    "/proc/self/root",
    "/proc/self/cwd",
    "/proc/self/fd/0",
    "/dev/null",
    "a/",
    "",
];

/// One operation, on root number `r` (0 is the root, others are sub-roots
/// from `open_dir`, taken modulo their number).
#[derive(Clone, Debug)]
pub enum Op {
    /// `open_file` for reading.
    Open(usize, String),
    /// `open_with` create + write, optionally exclusive, optionally not
    /// following a final symlink.
    Create(usize, String, bool, bool),
    /// `mkdir`.
    Mkdir(usize, String),
    /// `mkdir_all`.
    MkdirAll(usize, String),
    /// `remove`.
    Remove(usize, String),
    /// `remove_dir`.
    RemoveDir(usize, String),
    /// `rename_to` from root `r` to root `r2`, replacing or not.
    Rename(usize, String, usize, String, bool),
    /// A symlink planted at the path (through `open_parent`) with the target.
    Symlink(usize, String, String),
    /// `open_dir`: a new sub-root.
    OpenDir(usize, String),
    /// `open_parent`: a directory descriptor and a name.
    OpenParent(usize, String),
    /// `resolve_path`: an `O_PATH` descriptor.
    Resolve(usize, String),
    /// `write_atomic`, replacing or not.
    Write(usize, String, bool),
    /// `read_dir`, `stat`, `lstat`, `readlink`, `resolved_path`.
    Inspect(usize, String),
}

fn path(b: &mut Bytes) -> String {
    let n = 1 + b.below(5);
    let mut s = (0..n).map(|_| b.pick(TOKENS)).collect::<Vec<_>>().join("/");
    if b.below(6) == 0 {
        s.push('/');
    }
    s
}

/// Decodes up to `max` operations.
pub fn decode(data: &[u8], max: usize) -> Vec<Op> {
    let mut b = Bytes::new(data);
    let mut ops = Vec::new();
    while !b.is_empty() && ops.len() < max {
        let r = b.below(4);
        let op = match b.below(14) {
            0 | 1 => Op::Open(r, path(&mut b)),
            2 => Op::Create(r, path(&mut b), b.bool(), b.bool()),
            3 | 4 => Op::Mkdir(r, path(&mut b)),
            5 => Op::MkdirAll(r, path(&mut b)),
            6 => Op::Remove(r, path(&mut b)),
            7 => Op::RemoveDir(r, path(&mut b)),
            8 => Op::Rename(r, path(&mut b), b.below(4), path(&mut b), b.bool()),
            9 => Op::Symlink(r, path(&mut b), b.pick(TARGETS).to_owned()),
            10 => Op::OpenDir(r, path(&mut b)),
            11 => Op::OpenParent(r, path(&mut b)),
            12 => Op::Resolve(r, path(&mut b)),
            _ => {
                if b.bool() {
                    Op::Write(r, path(&mut b), b.bool())
                } else {
                    Op::Inspect(r, path(&mut b))
                }
            }
        };
        ops.push(op);
    }
    ops
}

/// Decodes a plan from `data` and checks it.
pub fn check(data: &[u8]) {
    run(&decode(data, 24));
}

/// The resolvers to compare: `Openat2` where the kernel has it, and `Walk`.
fn resolvers() -> Vec<Resolver> {
    if sandgate_rootfs::openat2_supported() {
        vec![Resolver::Openat2, Resolver::Walk]
    } else {
        vec![Resolver::Walk]
    }
}

/// Runs the plan under each resolver and compares the outcomes.
pub fn run(ops: &[Op]) {
    let outcomes: Vec<(Resolver, Vec<String>)> = resolvers()
        .into_iter()
        .map(|res| (res, run_with(ops, res)))
        .collect();
    let (first_res, first) = &outcomes[0];
    for (res, other) in &outcomes[1..] {
        for (i, (x, y)) in first.iter().zip(other).enumerate() {
            assert_eq!(
                x, y,
                "op {i} ({:?}): {first_res:?} vs {res:?}\nplan: {ops:#?}",
                ops[i]
            );
        }
    }
}

/// A scratch directory: `/dev/shm` when there is one (fast), else the
/// system's temporary directory.
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("sandgate-fuzz-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("tempdir")
}

/// What `/proc/self/fd/N` says the descriptor is, without a
/// ` (deleted)` suffix.
fn fd_path(fd: BorrowedFd<'_>) -> PathBuf {
    let p = fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("readlink fd");
    let s = p.to_str().expect("UTF-8 path");
    PathBuf::from(s.strip_suffix(" (deleted)").unwrap_or(s))
}

/// The state outside the root: the parent's entries and the whole
/// `outside/` tree with contents and link targets.
fn outside_state(base: &Path) -> Vec<String> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .expect("read_dir outside")
            .map(|e| e.expect("entry"))
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = format!("{rel}/{}", e.file_name().to_string_lossy());
            let t = e.file_type().expect("file type");
            if t.is_dir() {
                out.push(format!("{name}/"));
                walk(&e.path(), &name, out);
            } else if t.is_symlink() {
                out.push(format!("{name} -> {:?}", fs::read_link(e.path()).ok()));
            } else {
                out.push(format!("{name} = {:?}", fs::read(e.path()).ok()));
            }
        }
    }
    let mut out: Vec<String> = fs::read_dir(base)
        .expect("read_dir base")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    let meta = fs::symlink_metadata(base.join("root")).expect("the root is still there");
    out.push(format!("root is dir: {}", meta.is_dir()));
    walk(&base.join("outside"), "outside", &mut out);
    out
}

/// Held descriptors: each with the index of the root it came from.
struct Held {
    fds: Vec<(OwnedFd, usize)>,
}

impl Held {
    fn push(&mut self, fd: OwnedFd, from: usize) {
        if self.fds.len() >= 12 {
            self.fds.remove(0);
        }
        self.fds.push((fd, from));
    }
}

fn outcome<T>(r: &sandgate_rootfs::Result<T>, base: &str) -> Result<String, String> {
    match r {
        Ok(_) => Ok("ok".to_owned()),
        Err(e) => {
            let text = e.to_string();
            assert!(
                !text.contains(base),
                "an error message holds a host path: {text}"
            );
            Err(format!("{:?}", e.kind()))
        }
    }
}

/// Runs the plan with one resolver; answers one outcome per operation.
pub fn run_with(ops: &[Op], resolver: Resolver) -> Vec<String> {
    let tmp = scratch();
    let base = tmp.path().canonicalize().expect("canonical");
    let base_text = base.display().to_string();
    let root_path = base.join("root");
    fs::create_dir(&root_path).expect("mkdir root");
    fs::create_dir_all(base.join("outside/dir")).expect("mkdir outside");
    fs::write(base.join("outside/secret"), b"SECRET").expect("write secret");
    let before = outside_state(&base);

    let mut roots = vec![Root::open_with_resolver(&root_path, resolver).expect("open root")];
    let mut held = Held { fds: Vec::new() };
    let mut out = Vec::new();
    for op in ops {
        let n = roots.len();
        // (result, descriptors the op returned)
        let (res, new_fds, from): (Result<String, String>, Vec<OwnedFd>, usize) = match op {
            Op::Open(r, p) => {
                let r = r % n;
                let x = roots[r].open_file(p);
                let o = outcome(&x, &base_text);
                (o, x.into_iter().map(OwnedFd::from).collect(), r)
            }
            Op::Create(r, p, excl, follow) => {
                let r = r % n;
                let mut opts = OpenOptions::new();
                opts.write(true).follow(*follow);
                if *excl {
                    opts.create_new(true);
                } else {
                    opts.create(true);
                }
                let x = roots[r].open_with(p, &opts);
                let o = outcome(&x, &base_text);
                let fds = x
                    .into_iter()
                    .map(|mut f| {
                        let _ = f.write_all(b"x");
                        OwnedFd::from(f)
                    })
                    .collect();
                (o, fds, r)
            }
            Op::Mkdir(r, p) => (
                outcome(&roots[r % n].mkdir(p, 0o755), &base_text),
                vec![],
                r % n,
            ),
            Op::MkdirAll(r, p) => (
                outcome(&roots[r % n].mkdir_all(p, 0o755), &base_text),
                vec![],
                r % n,
            ),
            Op::Remove(r, p) => (outcome(&roots[r % n].remove(p), &base_text), vec![], r % n),
            Op::RemoveDir(r, p) => (
                outcome(&roots[r % n].remove_dir(p), &base_text),
                vec![],
                r % n,
            ),
            Op::Rename(r, from, r2, to, replace) => {
                let mode = if *replace {
                    RenameMode::Replace
                } else {
                    RenameMode::NoReplace
                };
                let x = roots[r % n].rename_to(from, &roots[r2 % n], to, mode);
                (outcome(&x, &base_text), vec![], r % n)
            }
            Op::Symlink(r, p, target) => {
                let r = r % n;
                let target = target
                    .replace("$ROOT", &root_path.display().to_string())
                    .replace("$OUT", &base.join("outside").display().to_string());
                let x = roots[r].open_parent(Path::new(p));
                let o = match &x {
                    Ok((dir, name)) => {
                        match rustix::fs::symlinkat(target.as_str(), dir.as_fd(), *name) {
                            Ok(()) => Ok("ok".to_owned()),
                            Err(e) => Err(format!("symlinkat {e:?}")),
                        }
                    }
                    Err(_) => outcome(&x, &base_text),
                };
                let fds = x.into_iter().map(|(d, _)| d.into_fd()).collect();
                (o, fds, r)
            }
            Op::OpenDir(r, p) => {
                let r = r % n;
                let x = roots[r].open_dir(p);
                let o = outcome(&x, &base_text);
                if let Ok(sub) = x {
                    if roots.len() < 4 {
                        let dup = sub.try_clone().expect("dup");
                        roots.push(dup);
                    }
                    (o, vec![sub.into_fd()], r)
                } else {
                    (o, vec![], r)
                }
            }
            Op::OpenParent(r, p) => {
                let r = r % n;
                let x = roots[r].open_parent(Path::new(p));
                let o = outcome(&x, &base_text);
                (o, x.into_iter().map(|(d, _)| d.into_fd()).collect(), r)
            }
            Op::Resolve(r, p) => {
                let r = r % n;
                let x = roots[r].resolve_path(p);
                let o = outcome(&x, &base_text);
                (o, x.into_iter().collect(), r)
            }
            Op::Write(r, p, replace) => {
                let mode = if *replace {
                    RenameMode::Replace
                } else {
                    RenameMode::NoReplace
                };
                let x = roots[r % n].write_atomic(p, b"data", mode);
                (outcome(&x, &base_text), vec![], r % n)
            }
            Op::Inspect(r, p) => {
                let root = &roots[r % n];
                let mut parts = Vec::new();
                let listed = root.read_dir(p);
                let _ = outcome(&listed, &base_text);
                parts.push(format!(
                    "{:?}",
                    listed
                        .map(|v| {
                            let mut names: Vec<String> = v
                                .iter()
                                .map(|e| format!("{}:{:?}", e.name().to_string_lossy(), e.kind()))
                                .collect();
                            names.sort();
                            names
                        })
                        .map_err(|e| e.kind())
                ));
                let stat = root.stat(p);
                let _ = outcome(&stat, &base_text);
                parts.push(format!(
                    "{:?}",
                    stat.map(|m| m.kind()).map_err(|e| e.kind())
                ));
                let lstat = root.lstat(p);
                let _ = outcome(&lstat, &base_text);
                parts.push(format!(
                    "{:?}",
                    lstat.map(|m| m.kind()).map_err(|e| e.kind())
                ));
                let link = root.readlink(p);
                let _ = outcome(&link, &base_text);
                parts.push(format!(
                    "{:?}",
                    link.map(|t| t.display().to_string().replace(&base_text, "$BASE"))
                        .map_err(|e| e.kind())
                ));
                let resolved = root.resolved_path(p);
                let _ = outcome(&resolved, &base_text);
                if let Ok(rp) = &resolved {
                    assert!(rp.is_relative(), "resolved_path {rp:?} is not relative");
                    assert!(
                        !rp.components()
                            .any(|c| c == std::path::Component::ParentDir),
                        "resolved_path {rp:?} climbs"
                    );
                }
                parts.push(format!(
                    "{:?}",
                    resolved
                        .map(|p| p.display().to_string())
                        .map_err(|e| e.kind())
                ));
                (Ok(parts.join(" ")), vec![], r % n)
            }
        };
        // The descriptors this op returned lie beneath the root it ran on.
        let sub = fd_path(roots[from].as_fd());
        for fd in &new_fds {
            let p = fd_path(fd.as_fd());
            assert!(
                p.starts_with(&sub) && p.starts_with(&root_path),
                "{op:?} ({resolver:?}) returned {p:?}, not beneath {sub:?}"
            );
        }
        for fd in new_fds {
            held.push(fd, from);
        }
        if res.is_ok() {
            // Everything held is still beneath the root.
            for root in &roots {
                let p = fd_path(root.as_fd());
                assert!(p.starts_with(&root_path), "sub-root at {p:?} after {op:?}");
            }
            for (fd, _) in &held.fds {
                let p = fd_path(fd.as_fd());
                assert!(
                    p.starts_with(&root_path),
                    "descriptor at {p:?} after {op:?}"
                );
            }
        }
        assert_eq!(
            outside_state(&base),
            before,
            "{op:?} ({resolver:?}) changed something outside the root"
        );
        out.push(match res {
            Ok(detail) => detail,
            Err(e) => format!("error {e}"),
        });
    }
    out
}
