//! Differential test of resolution beneath a root.
//!
//! Random trees (files, directories, and relative, absolute, dangling and
//! looping symlinks) are built on disk, and random paths (with `.`, `..`,
//! doubled and trailing slashes) are resolved in them by four resolvers that
//! must agree on every outcome, for `stat` (a final symlink followed) and for
//! `lstat` (not followed): which inode is reached, or which error.
//!
//! - `model`: a pure in-memory resolver written from the rules (docs/reference/resolution.md,
//!   openat2(2) with `RESOLVE_BENEATH`); it never touches the filesystem;
//! - `kernel`: a bare `openat2(O_PATH, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`
//!   with its errno mapped to a kind, so that the model is held to the kernel
//!   independently of the crate (which asks the walk to classify an ELOOP).
//!   One kernel quirk is allowed for, and only to this column: an escape
//!   through `..` after more than 20 links may come out as ELOOP (see
//!   [`ModelRun::kernel_may`]);
//! - `openat2`: `Root` with `Resolver::Openat2`;
//! - `walk`: `Root` with `Resolver::Walk`.
//!
//! Each tree is materialized in a fresh temporary directory as `root/`, with
//! a copy of the same tree in a sibling `outside/`: an escape would reach a
//! real inode there and be reported by its name.
//!
//! `PROPTEST_CASES` sets the number of random trees (default 512, each with
//! 8 to 16 paths, each path resolved by `stat` and by `lstat`);
//! `SANDGATE_DIFF_TMPDIR` where they are built (default `/dev/shm`, see
//! [`scratch_dir`]). Run with `--nocapture` to see what a run covered.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::{TestCaseError, TestRunner};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use sandgate_rootfs::{openat2_supported, ErrorKind, Resolver, Root, MAX_SYMLINKS};

// ===================================================================
// The model: a tree in memory and a resolver over it.
// ===================================================================

type NodeId = usize;

/// The root directory is always node 0.
const ROOT: NodeId = 0;

/// Linux's PATH_MAX, counting the terminating NUL.
const PATH_MAX: usize = 4096;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    File,
    Dir { children: BTreeMap<String, NodeId> },
    Symlink { target: String },
}

/// A tree of nodes. A node's parent always has a smaller id, so creating the
/// nodes in id order creates every directory before its entries.
///
/// Symlink targets are kept as written, except that the absolute prefixes
/// `/@root` and `/@outside` stand for the real absolute paths of `root/` and
/// `outside/` (substituted on disk only: for the model a target starting with
/// `/` is absolute, whatever follows).
#[derive(Clone, Debug)]
struct Tree {
    nodes: Vec<Node>,
    /// Each node's directory and name; `None` for the root.
    parent: Vec<Option<(NodeId, String)>>,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            nodes: vec![Node::Dir {
                children: BTreeMap::new(),
            }],
            parent: vec![None],
        }
    }

    fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Adds a new entry `name` to directory `dir`.
    fn add(&mut self, dir: NodeId, name: &str, node: Node) -> NodeId {
        let id = self.nodes.len();
        match &mut self.nodes[dir] {
            Node::Dir { children } => {
                assert!(
                    children.insert(name.to_owned(), id).is_none(),
                    "duplicate entry {name:?}"
                );
            }
            other => panic!("adding {name:?} to a non-directory {other:?}"),
        }
        self.nodes.push(node);
        self.parent.push(Some((dir, name.to_owned())));
        id
    }

    /// The entry `name` of directory `dir`, if any.
    fn child(&self, dir: NodeId, name: &str) -> Option<NodeId> {
        match &self.nodes[dir] {
            Node::Dir { children } => children.get(name).copied(),
            _ => None,
        }
    }

    /// The node at `path` by names only, following nothing ("" is the root).
    fn at(&self, path: &str) -> NodeId {
        let mut id = ROOT;
        for name in path.split('/').filter(|c| !c.is_empty()) {
            id = self
                .child(id, name)
                .unwrap_or_else(|| panic!("no entry {path:?} in the tree"));
        }
        id
    }

    /// The directory `path`, created with its parents as needed.
    fn mkdirs(&mut self, path: &str) -> NodeId {
        let mut id = ROOT;
        for name in path.split('/').filter(|c| !c.is_empty()) {
            id = match self.child(id, name) {
                Some(c) => c,
                None => self.add(
                    id,
                    name,
                    Node::Dir {
                        children: BTreeMap::new(),
                    },
                ),
            };
        }
        id
    }

    /// Adds `node` at `path`, creating the directories above it.
    fn put(&mut self, path: &str, node: Node) -> &mut Tree {
        let (dir, name) = match path.rsplit_once('/') {
            Some((d, n)) => (self.mkdirs(d), n),
            None => (ROOT, path),
        };
        self.add(dir, name, node);
        self
    }

    fn file(&mut self, path: &str) -> &mut Tree {
        self.put(path, Node::File)
    }

    fn dir(&mut self, path: &str) -> &mut Tree {
        self.mkdirs(path);
        self
    }

    fn link(&mut self, path: &str, target: &str) -> &mut Tree {
        self.put(
            path,
            Node::Symlink {
                target: target.to_owned(),
            },
        )
    }

    /// The path of a node from the root, "" for the root itself.
    fn path_of(&self, mut id: NodeId) -> String {
        let mut names = Vec::new();
        while let Some((dir, name)) = &self.parent[id] {
            names.push(name.as_str());
            id = *dir;
        }
        names.reverse();
        names.join("/")
    }

    fn describe(&self, id: NodeId) -> String {
        let path = match self.path_of(id) {
            p if p.is_empty() => ".".to_owned(),
            p => p,
        };
        match &self.nodes[id] {
            Node::File => format!("#{id} {path} (file)"),
            Node::Dir { .. } => format!("#{id} {path}/ (dir)"),
            Node::Symlink { target } => format!("#{id} {path} -> {target}"),
        }
    }

    /// The tree as an indented listing, for failure reports.
    fn dump(&self) -> String {
        let mut out = String::from("  #0 ./\n");
        self.dump_dir(ROOT, 2, &mut out);
        out
    }

    fn dump_dir(&self, dir: NodeId, depth: usize, out: &mut String) {
        let Node::Dir { children } = &self.nodes[dir] else {
            return;
        };
        for (name, &id) in children {
            let pad = " ".repeat(depth * 2);
            match &self.nodes[id] {
                Node::File => writeln!(out, "{pad}#{id} {name}"),
                Node::Dir { .. } => writeln!(out, "{pad}#{id} {name}/"),
                Node::Symlink { target } => writeln!(out, "{pad}#{id} {name} -> {target}"),
            }
            .unwrap();
            self.dump_dir(id, depth + 1, out);
        }
    }
}

/// The components of `s`, in order. Empty components (doubled slashes) name
/// nothing and are dropped; a trailing slash counts as a final ".", which
/// makes what precedes it a non-final component (so it must be, or lead
/// through links to, a directory).
fn components(s: &str) -> Vec<&str> {
    let mut comps: Vec<&str> = s.split('/').filter(|c| !c.is_empty()).collect();
    if s.ends_with('/') {
        comps.push(".");
    }
    comps
}

/// Resolves `path` in `tree` with the rules of
/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`; `follow` says whether
/// a final symlink is followed (`stat`) or not (`lstat`).
///
/// - a path that is empty names nothing; a NUL byte or PATH_MAX bytes make
///   it invalid; a leading '/' escapes;
/// - the walk keeps the chain of directories from the root down to where it
///   is: a name steps into a child, `..` goes back up (above the root it
///   escapes), `.` stays;
/// - every component that has any component after it (in the path, or in a
///   link's target still being read) must be a directory or a symlink, and a
///   symlink there is followed; a file there is "not a directory";
/// - a symlink is followed by reading its target's components next, relative
///   to the directory holding the link; following is counted first (the 41st
///   link fails with a loop), and only then is the target looked at (an
///   absolute target escapes);
/// - the final component is the answer, a symlink there only if `follow` is
///   off; if the final component is `.` or `..`, the directory reached.
fn model_run(tree: &Tree, path: &str, follow: bool) -> ModelRun {
    let mut followed = 0u32;
    let result = model_walk(tree, path, follow, &mut followed);
    ModelRun { result, followed }
}

/// A model resolution with what the kernel's answer may depend on.
struct ModelRun {
    result: Result<NodeId, ErrorKind>,
    /// Symlinks followed before the answer.
    followed: u32,
}

impl ModelRun {
    /// What a bare `openat2` may answer. The rules' answer, and one kernel
    /// quirk: when a lookup in RCU mode cannot go on, the kernel restarts
    /// it in ref-walk mode, and the restart keeps the symlink count of the
    /// first pass (`total_link_count` is set once per `do_filp_open`). So
    /// a resolution of more than 20 links comes out as ELOOP whenever the
    /// first pass got that far before it gave up. It gives up at `..` at
    /// the root under `RESOLVE_BENEATH` (`follow_dotdot_rcu` answers
    /// `-ECHILD`: an escape then says ELOOP instead of EXDEV), and on any
    /// path when a mount or unmount anywhere on the host changed the
    /// sequence count the walk checks (seen in CI, while other suites made
    /// mount namespaces: a chain of 33 links to a missing name said ELOOP
    /// instead of ENOENT; reproduced with `unshare -m` mounting in a loop).
    /// `Root` reclassifies every ELOOP with the walk, so it answers as the
    /// rules say, which the `openat2` column checks.
    fn kernel_may(&self) -> Vec<Outcome> {
        let mut may = vec![Outcome::of_model(self.result)];
        if 2 * self.followed > MAX_SYMLINKS {
            may.push(Outcome::Err(ErrorKind::Loop));
        }
        may
    }
}

/// The resolution itself; counts links in `followed`.
fn model_walk(
    tree: &Tree,
    path: &str,
    follow: bool,
    followed: &mut u32,
) -> Result<NodeId, ErrorKind> {
    if path.is_empty() {
        return Err(ErrorKind::NotFound);
    }
    if path.contains('\0') || path.len() >= PATH_MAX {
        return Err(ErrorKind::InvalidPath);
    }
    if path.starts_with('/') {
        return Err(ErrorKind::Escape);
    }
    // Directories from the root to the current one.
    let mut chain: Vec<NodeId> = vec![ROOT];
    // Components still to read, the next one last.
    let mut todo: Vec<&str> = components(path);
    todo.reverse();
    while let Some(name) = todo.pop() {
        let more = !todo.is_empty();
        let here = *chain.last().expect("the root is never popped");
        match name {
            "." => continue,
            ".." => {
                if chain.len() == 1 {
                    return Err(ErrorKind::Escape);
                }
                chain.pop();
                continue;
            }
            _ => {}
        }
        let Some(id) = tree.child(here, name) else {
            return Err(ErrorKind::NotFound);
        };
        match &tree.nodes[id] {
            Node::Dir { .. } => chain.push(id),
            Node::File if more => return Err(ErrorKind::NotDir),
            Node::File => return Ok(id),
            Node::Symlink { .. } if !more && !follow => return Ok(id),
            Node::Symlink { target } => {
                *followed += 1;
                if *followed > MAX_SYMLINKS {
                    return Err(ErrorKind::Loop);
                }
                if target.starts_with('/') {
                    return Err(ErrorKind::Escape);
                }
                todo.extend(components(target).into_iter().rev());
            }
        }
    }
    Ok(*chain.last().expect("the root is never popped"))
}

// ===================================================================
// The tree on disk, and the real resolvers.
// ===================================================================

/// What one resolver answered.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// An inode of the tree under `root/`.
    Node(NodeId),
    /// An inode that is not beneath the root (named if known).
    Foreign(String),
    Err(ErrorKind),
    /// The bare `openat2` kept failing with EAGAIN (renames elsewhere).
    Inconclusive,
}

impl Outcome {
    fn of_model(r: Result<NodeId, ErrorKind>) -> Outcome {
        match r {
            Ok(id) => Outcome::Node(id),
            Err(k) => Outcome::Err(k),
        }
    }

    fn show(&self, tree: &Tree) -> String {
        match self {
            Outcome::Node(id) => tree.describe(*id),
            Outcome::Foreign(what) => format!("FOREIGN INODE {what}"),
            Outcome::Err(k) => format!("Err({k:?})"),
            Outcome::Inconclusive => "no answer (EAGAIN 1000 times)".to_owned(),
        }
    }
}

/// A tree materialized in a temporary directory.
struct Disk {
    tmp: tempfile::TempDir,
    /// Every inode created, by (dev, ino).
    inodes: HashMap<(u64, u64), Outcome>,
}

/// Where the trees are built: `SANDGATE_DIFF_TMPDIR` if set, else
/// `/dev/shm` where it is a writable directory (a tmpfs: creating and
/// removing thousands of small trees there is many times faster than on a
/// journaled disk), else the usual temporary directory.
fn scratch_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(d) = std::env::var_os("SANDGATE_DIFF_TMPDIR") {
            return PathBuf::from(d);
        }
        let shm = Path::new("/dev/shm");
        let usable =
            fs::metadata(shm).is_ok_and(|m| m.is_dir()) && tempfile::tempdir_in(shm).is_ok();
        if usable {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        }
    })
    .clone()
}

fn key_of(path: &Path) -> (u64, u64) {
    let m = fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (m.dev(), m.ino())
}

impl Disk {
    /// Creates `tmp/root` and `tmp/outside`, each holding a copy of `tree`.
    fn new(tree: &Tree) -> Disk {
        let tmp = tempfile::Builder::new()
            .prefix("sandgate-diff-")
            .tempdir_in(scratch_dir())
            .expect("temporary directory");
        let root = tmp.path().join("root");
        let outside = tmp.path().join("outside");
        let (root_s, outside_s) = (root.to_str().unwrap(), outside.to_str().unwrap());
        let on_disk = |target: &str| -> String {
            if let Some(rest) = target.strip_prefix("/@root") {
                format!("{root_s}{rest}")
            } else if let Some(rest) = target.strip_prefix("/@outside") {
                format!("{outside_s}{rest}")
            } else {
                target.to_owned()
            }
        };
        let mut inodes = HashMap::new();
        inodes.insert(
            key_of(tmp.path()),
            Outcome::Foreign("the parent of the root".to_owned()),
        );
        for base in [&outside, &root] {
            fs::create_dir(base).unwrap();
            for id in 1..tree.len() {
                let p = base.join(tree.path_of(id));
                match &tree.nodes[id] {
                    Node::File => fs::write(&p, b"").unwrap(),
                    Node::Dir { .. } => fs::create_dir(&p).unwrap(),
                    Node::Symlink { target } => symlink(on_disk(target), &p).unwrap(),
                }
            }
        }
        for id in 0..tree.len() {
            let rel = tree.path_of(id);
            inodes.insert(
                key_of(&outside.join(&rel)),
                Outcome::Foreign(format!("outside/{rel}")),
            );
            inodes.insert(key_of(&root.join(&rel)), Outcome::Node(id));
        }
        Disk { tmp, inodes }
    }

    fn root(&self) -> PathBuf {
        self.tmp.path().join("root")
    }

    fn identify(&self, dev: u64, ino: u64) -> Outcome {
        self.inodes
            .get(&(dev, ino))
            .cloned()
            .unwrap_or_else(|| Outcome::Foreign(format!("dev {dev} ino {ino}")))
    }
}

/// The three real resolvers over one materialized tree.
struct Real {
    walk: Root,
    /// `Root` with `Resolver::Openat2` and a bare descriptor of the root for
    /// the direct kernel call; `None` where openat2 is unavailable.
    openat2: Option<(Root, OwnedFd)>,
}

impl Real {
    fn new(disk: &Disk, with_openat2: bool) -> Real {
        let root = disk.root();
        let walk = Root::open_with_resolver(&root, Resolver::Walk).unwrap();
        let openat2 = with_openat2.then(|| {
            let r = Root::open_with_resolver(&root, Resolver::Openat2).unwrap();
            let fd = rustix::fs::open(
                &root,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .unwrap();
            (r, fd)
        });
        Real { walk, openat2 }
    }
}

fn via_root(root: &Root, disk: &Disk, path: &str, follow: bool) -> Outcome {
    let r = if follow {
        root.stat(path)
    } else {
        root.lstat(path)
    };
    match r {
        Ok(m) => disk.identify(m.dev(), m.ino()),
        Err(e) => Outcome::Err(e.kind()),
    }
}

/// EAGAIN answers the bare `openat2` retried, in all.
static EAGAIN_RETRIES: AtomicUsize = AtomicUsize::new(0);

/// `openat2` called directly, its errno mapped as docs/reference/resolution.md and docs/reference/errors.md read it.
fn via_kernel(fd: &OwnedFd, disk: &Disk, path: &str, follow: bool) -> Outcome {
    let mut flags = OFlags::PATH | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let how = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    let mut tries = 0;
    let r = loop {
        match rustix::fs::openat2(fd, path, flags, Mode::empty(), how) {
            // A rename anywhere in the system (the kernel's rename seqcount
            // is global) raced with a ".." step: retry, as the crate does.
            Err(Errno::AGAIN) if tries < 1000 => {
                tries += 1;
                EAGAIN_RETRIES.fetch_add(1, Ordering::Relaxed);
            }
            // Renames elsewhere never let up: no answer from this column
            // (`Root` itself lets the walk answer after 16 tries).
            Err(Errno::AGAIN) => return Outcome::Inconclusive,
            r => break r,
        }
    };
    match r {
        Ok(fd) => {
            let m = fs::File::from(fd).metadata().unwrap();
            disk.identify(m.dev(), m.ino())
        }
        Err(e) => Outcome::Err(match e {
            Errno::XDEV => ErrorKind::Escape,
            Errno::LOOP => ErrorKind::Loop,
            Errno::NOENT => ErrorKind::NotFound,
            Errno::NOTDIR => ErrorKind::NotDir,
            Errno::NAMETOOLONG => ErrorKind::InvalidPath,
            e => return Outcome::Foreign(format!("unexpected errno {e:?}")),
        }),
    }
}

/// How often each outcome was seen, to show what the run covered.
#[derive(Default)]
struct Stats {
    checks: usize,
    /// Times the bare kernel answered ELOOP for an escape through `..`.
    kernel_quirk: usize,
    /// Times the bare kernel gave no answer (EAGAIN without end).
    kernel_inconclusive: usize,
    /// Nodes in all the trees built.
    nodes: usize,
    seen: BTreeMap<String, usize>,
}

impl Stats {
    fn record(&mut self, tree: &Tree, follow: bool, o: &Outcome) {
        self.checks += 1;
        let what = match o {
            Outcome::Node(id) => match &tree.nodes[*id] {
                _ if *id == ROOT => "root".to_owned(),
                Node::File => "file".to_owned(),
                Node::Dir { .. } => "dir".to_owned(),
                Node::Symlink { .. } => "symlink".to_owned(),
            },
            Outcome::Foreign(_) => "FOREIGN".to_owned(),
            Outcome::Inconclusive => "inconclusive".to_owned(),
            Outcome::Err(k) => format!("{k:?}"),
        };
        let op = if follow { "stat" } else { "lstat" };
        *self.seen.entry(format!("{op} {what}")).or_default() += 1;
    }

    fn count(&self, key: &str) -> usize {
        self.seen.get(key).copied().unwrap_or(0)
    }
}

/// Resolves `path` by `stat` and by `lstat` with every resolver; returns the
/// model's two outcomes, or a report of the first disagreement.
fn check_path(
    tree: &Tree,
    disk: &Disk,
    real: &Real,
    path: &str,
    stats: &mut Stats,
) -> Result<[Outcome; 2], String> {
    let mut answers = Vec::with_capacity(2);
    for follow in [true, false] {
        let run = model_run(tree, path, follow);
        let model = Outcome::of_model(run.result);
        let walk = via_root(&real.walk, disk, path, follow);
        let (kernel, openat2) = match &real.openat2 {
            Some((root, fd)) => (
                Some(via_kernel(fd, disk, path, follow)),
                Some(via_root(root, disk, path, follow)),
            ),
            None => (None, None),
        };
        let agree = walk == model
            && kernel
                .as_ref()
                .is_none_or(|k| *k == Outcome::Inconclusive || run.kernel_may().contains(k))
            && openat2.as_ref().is_none_or(|o| *o == model);
        if !agree {
            let op = if follow { "stat" } else { "lstat" };
            let show = |o: &Option<Outcome>| match o {
                Some(o) => o.show(tree),
                None => "(openat2 unavailable)".to_owned(),
            };
            return Err(format!(
                "resolvers disagree on {op}({path:?})\n  \
                 model:   {}\n  kernel:  {}\n  openat2: {}\n  walk:    {}\ntree:\n{}",
                model.show(tree),
                show(&kernel),
                show(&openat2),
                walk.show(tree),
                tree.dump(),
            ));
        }
        match &kernel {
            Some(Outcome::Inconclusive) => stats.kernel_inconclusive += 1,
            Some(k) if *k != model => stats.kernel_quirk += 1,
            _ => {}
        }
        stats.record(tree, follow, &model);
        answers.push(model);
    }
    Ok([answers[0].clone(), answers[1].clone()])
}

fn openat2_or_note() -> bool {
    let ok = openat2_supported();
    if !ok {
        eprintln!("note: openat2 is unavailable here; comparing only the walk with the model");
    }
    ok
}

// ===================================================================
// Random trees and paths.
// ===================================================================

/// Entry names: few, so that paths and link targets hit entries often.
const NAMES: &[&str] = &["a", "b", "c", "d", "dir", "f"];

/// A tree as generated; built into a [`Tree`] for each case.
#[derive(Clone, Debug)]
enum Spec {
    File,
    Dir(BTreeMap<String, Spec>),
    Link(String),
}

#[derive(Clone, Debug)]
struct TreeSpec {
    top: BTreeMap<String, Spec>,
    /// A chain `ch0 -> ch1 -> ... -> ch{n-1} -> target` of `n` links in the
    /// root, to reach the 40-link limit (paths and targets also name `ch0`).
    chain: Option<(usize, String)>,
}

impl TreeSpec {
    fn build(&self) -> Tree {
        fn add_all(tree: &mut Tree, dir: NodeId, entries: &BTreeMap<String, Spec>) {
            for (name, spec) in entries {
                match spec {
                    Spec::File => {
                        tree.add(dir, name, Node::File);
                    }
                    Spec::Link(t) => {
                        tree.add(dir, name, Node::Symlink { target: t.clone() });
                    }
                    Spec::Dir(children) => {
                        let id = tree.add(
                            dir,
                            name,
                            Node::Dir {
                                children: BTreeMap::new(),
                            },
                        );
                        add_all(tree, id, children);
                    }
                }
            }
        }
        let mut tree = Tree::new();
        add_all(&mut tree, ROOT, &self.top);
        if let Some((n, end)) = &self.chain {
            for i in 0..*n {
                let target = if i + 1 == *n {
                    end.clone()
                } else {
                    format!("ch{}", i + 1)
                };
                tree.add(ROOT, &format!("ch{i}"), Node::Symlink { target });
            }
        }
        tree
    }
}

/// One path component, for paths and link targets.
fn component() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        12 => select(NAMES),
        3 => Just(".."),
        1 => Just("."),
        1 => Just(""), // a doubled slash
        1 => Just("ch0"),
        1 => Just("x"), // never created
    ]
}

/// Joins components; a leading empty component would make the result
/// absolute, so it becomes "." instead.
fn join(comps: &[&str], lead_dot: bool, trailing: bool) -> String {
    let mut s = comps.join("/");
    if s.starts_with('/') {
        s.insert(0, '.');
    }
    if lead_dot {
        s.insert_str(0, "./");
    }
    if trailing {
        s.push('/');
    }
    s
}

fn link_target() -> impl Strategy<Value = String> {
    let relative = (
        prop::bool::weighted(0.1),
        prop::collection::vec(component(), 1..4),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(lead_dot, comps, trailing)| {
            let s = join(&comps, lead_dot, trailing);
            // A symlink cannot have an empty target.
            if s.is_empty() {
                ".".to_owned()
            } else {
                s
            }
        });
    let special = select(
        &[
            ".",
            "./",
            "..",
            "../",
            "../..",
            "../outside/a",
            "../outside/f",
            "../../outside/dir",
            "a/..",
            "dir/..",
            "dir/../f",
            "dir/",
            "f/",
            "f/x",
            "f/.",
            "f/..",
            "a:b",
        ][..],
    )
    .prop_map(str::to_owned);
    let absolute = select(
        &[
            "/",
            "/etc",
            "/etc/passwd",
            "//a",
            "/@outside",
            "/@outside/a",
            "/@outside/dir/",
            "/@root",
            "/@root/a",
            "/@root/f",
            "/@root/dir/",
            "/proc/self/cwd",
            "/proc/self/root",
        ][..],
    )
    .prop_map(str::to_owned);
    prop_oneof![10 => relative, 3 => special, 2 => absolute]
}

fn tree_spec() -> impl Strategy<Value = TreeSpec> {
    let leaf = prop_oneof![
        4 => Just(Spec::File),
        4 => link_target().prop_map(Spec::Link),
        1 => Just(Spec::Dir(BTreeMap::new())),
    ];
    let entry = leaf.prop_recursive(3, 24, 4, |inner| {
        prop::collection::btree_map(select(NAMES).prop_map(str::to_owned), inner, 0..5)
            .prop_map(Spec::Dir)
    });
    let top = prop::collection::btree_map(select(NAMES).prop_map(str::to_owned), entry, 1..=6);
    let chain = prop::option::weighted(
        0.3,
        (
            select(&[1usize, 2, 3, 20, 39, 40, 41, 45][..]),
            link_target(),
        ),
    );
    (top, chain).prop_map(|(top, chain)| TreeSpec { top, chain })
}

/// Paths given whole, for the lexical edge cases.
const FIXED_PATHS: &[&str] = &[
    "",
    ".",
    "./",
    "..",
    "../",
    "./..",
    "/",
    "/a",
    "//a",
    "a/../..",
    "dir/../../dir",
    ".//./a//",
    "ch0",
    "ch0/",
    "ch0/..",
    "ch0/../ch0",
];

/// One component of a generated path.
#[derive(Clone, Debug)]
enum Comp {
    /// An entry of the directory the path names so far, by names only
    /// (following nothing), so that paths reach deep into the tree; a name
    /// from [`NAMES`] where that directory is not known or is empty.
    Child(Index),
    Lit(&'static str),
}

#[derive(Clone, Debug)]
enum PathSpec {
    Fixed(&'static str),
    /// Starting at an entry of the tree (chosen by index; the root if
    /// `None`), more components.
    Built {
        base: Option<Index>,
        lead_dot: bool,
        comps: Vec<Comp>,
        trailing: bool,
    },
}

impl PathSpec {
    fn render(&self, tree: &Tree) -> String {
        let PathSpec::Built {
            base,
            lead_dot,
            comps,
            trailing,
        } = self
        else {
            let PathSpec::Fixed(p) = self else {
                unreachable!()
            };
            return (*p).to_owned();
        };
        let base = base.map_or(ROOT, |i| i.index(tree.len()));
        let mut names: Vec<String> = Vec::new();
        if base != ROOT {
            names.push(tree.path_of(base));
        }
        // The node named so far, by names; `None` once that is not known.
        let mut at = Some(base);
        for c in comps {
            let name = match c {
                Comp::Child(i) => match at.map(|id| &tree.nodes[id]) {
                    Some(Node::Dir { children }) if !children.is_empty() => children
                        .keys()
                        .nth(i.index(children.len()))
                        .unwrap()
                        .clone(),
                    _ => NAMES[i.index(NAMES.len())].to_owned(),
                },
                Comp::Lit(l) => (*l).to_owned(),
            };
            at = match (at, name.as_str()) {
                (at, "" | ".") => at,
                (Some(id), "..") => tree.parent[id].as_ref().map(|(dir, _)| *dir),
                (Some(id), n) => tree.child(id, n),
                (None, _) => None,
            };
            names.push(name);
        }
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        join(&names, *lead_dot, *trailing)
    }
}

fn path_spec() -> impl Strategy<Value = PathSpec> {
    let comp = prop_oneof![
        3 => any::<Index>().prop_map(Comp::Child),
        2 => component().prop_map(Comp::Lit),
    ];
    let built = (
        prop::option::weighted(0.4, any::<Index>()),
        prop::bool::weighted(0.1),
        prop::collection::vec(comp, 0..5),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(base, lead_dot, comps, trailing)| PathSpec::Built {
            base,
            lead_dot,
            comps,
            trailing,
        });
    prop_oneof![1 => select(FIXED_PATHS).prop_map(PathSpec::Fixed), 12 => built]
}

#[test]
fn random_trees_agree() {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 512;
    }
    // A failure prints the minimal tree and path; it belongs in the fixed
    // regression tests below rather than in a file next to this one.
    config.failure_persistence = None;
    let cases = config.cases;
    let with_openat2 = openat2_or_note();
    let stats = RefCell::new(Stats::default());
    let mut runner = TestRunner::new(config);
    let strategy = (tree_spec(), prop::collection::vec(path_spec(), 8..=16));
    let result = runner.run(&strategy, |(spec, paths)| {
        let tree = spec.build();
        let disk = Disk::new(&tree);
        let real = Real::new(&disk, with_openat2);
        let mut stats = stats.borrow_mut();
        stats.nodes += tree.len();
        for p in &paths {
            let path = p.render(&tree);
            check_path(&tree, &disk, &real, &path, &mut stats).map_err(TestCaseError::fail)?;
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let stats = stats.into_inner();
    eprintln!(
        "{cases} trees ({} nodes in all, built in {}), {} resolutions compared \
         (stat and lstat):",
        stats.nodes,
        scratch_dir().display(),
        stats.checks
    );
    for (what, n) in &stats.seen {
        eprintln!("  {what:>16}: {n}");
    }
    eprintln!(
        "  bare openat2 said ELOOP for a '..' escape after >20 links: {}",
        stats.kernel_quirk
    );
    eprintln!(
        "  bare openat2 EAGAIN retries: {}; resolutions left without its answer: {}",
        EAGAIN_RETRIES.load(Ordering::Relaxed),
        stats.kernel_inconclusive
    );
    if cases >= 256 {
        for what in [
            "stat file",
            "stat dir",
            "stat root",
            "lstat symlink",
            "stat Escape",
            "stat Loop",
            "stat NotFound",
            "stat NotDir",
            "lstat Escape",
            "lstat Loop",
            "lstat NotDir",
        ] {
            assert!(stats.count(what) > 0, "the run never produced {what}");
        }
    }
}

// ===================================================================
// Fixed trees with expected outcomes: these pin the model itself.
// ===================================================================

#[derive(Clone, Debug)]
enum Expect {
    /// The node at this path of the tree (by names, following nothing).
    At(String),
    Err(ErrorKind),
}

use ErrorKind::{Escape, InvalidPath, Loop, NotDir, NotFound};

fn at(path: impl Into<String>) -> Expect {
    Expect::At(path.into())
}

fn err(k: ErrorKind) -> Expect {
    Expect::Err(k)
}

/// Checks every `(path, stat, lstat)` case: all resolvers agree, and they
/// give the expected outcomes.
fn check_fixed(tree: &Tree, cases: &[(String, Expect, Expect)]) {
    let disk = Disk::new(tree);
    let real = Real::new(&disk, openat2_or_note());
    let mut stats = Stats::default();
    let mut failures = Vec::new();
    for (path, stat, lstat) in cases {
        match check_path(tree, &disk, &real, path, &mut stats) {
            Err(report) => failures.push(report),
            Ok(got) => {
                for (op, want, got) in [("stat", stat, &got[0]), ("lstat", lstat, &got[1])] {
                    let want = match want {
                        Expect::At(p) => Outcome::Node(tree.at(p)),
                        Expect::Err(k) => Outcome::Err(*k),
                    };
                    if *got != want {
                        failures.push(format!(
                            "{op}({path:?}): all resolvers say {}, expected {}",
                            got.show(tree),
                            want.show(tree)
                        ));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{}\ntree:\n{}",
        failures.join("\n"),
        tree.dump()
    );
}

fn case(path: &str, stat: Expect, lstat: Expect) -> (String, Expect, Expect) {
    (path.to_owned(), stat, lstat)
}

#[test]
fn fixed_tree_agrees() {
    let mut tree = Tree::new();
    tree.file("f")
        .file("dir/g")
        .file("dir/sub/h")
        .link("l_f", "f")
        .link("l_dir", "dir")
        .link("l_dir_slash", "dir/")
        .link("l_f_slash", "f/")
        .link("l_dotdot_in", "dir/../f")
        .link("dir/l_up", "../f")
        .link("dir/sub/l_top", "../..")
        .link("dir/sub/l_esc", "../../..")
        .link("dir/l_to_l_dir", "../l_dir")
        .link("l_mid", "dir/sub/..")
        .link("l_abs_in", "/@root/f")
        .link("l_abs_out", "/@outside/f")
        .link("l_slash", "/")
        .link("l_rel_out", "../outside/f")
        .link("l_dot", ".")
        .link("l_dotdot", "..")
        .link("loop_a", "loop_b")
        .link("loop_b", "loop_a")
        .link("self", "self")
        .link("dangling", "nothing")
        .link("dangling_dir", "nothing/")
        .link("l_f_as_dir", "f/x")
        .link("l_dir_file", "dir/g")
        .link("l_colon", "a:b")
        .dir("empty");
    let cases = [
        case("f", at("f"), at("f")),
        case("f/", err(NotDir), err(NotDir)),
        case("f/.", err(NotDir), err(NotDir)),
        case("f/..", err(NotDir), err(NotDir)),
        case("f//", err(NotDir), err(NotDir)),
        case("dir", at("dir"), at("dir")),
        case("dir/..", at(""), at("")),
        case("dir/../", at(""), at("")),
        case("dir//g", at("dir/g"), at("dir/g")),
        case("dir/./g/", err(NotDir), err(NotDir)),
        case(".//dir///sub//", at("dir/sub"), at("dir/sub")),
        case("..", err(Escape), err(Escape)),
        case("./..", err(Escape), err(Escape)),
        case("dir/../..", err(Escape), err(Escape)),
        case("dir/sub/../../..", err(Escape), err(Escape)),
        case("dir/../../dir", err(Escape), err(Escape)),
        case("l_f", at("f"), at("l_f")),
        case("l_f/", err(NotDir), err(NotDir)),
        case("l_dir", at("dir"), at("l_dir")),
        case("l_dir/", at("dir"), at("dir")),
        case("l_dir/.", at("dir"), at("dir")),
        case("l_dir/g", at("dir/g"), at("dir/g")),
        case("l_dir/..", at(""), at("")),
        case("l_dir/../..", err(Escape), err(Escape)),
        case("l_dir_slash", at("dir"), at("l_dir_slash")),
        case("l_dir_slash/g", at("dir/g"), at("dir/g")),
        case("l_f_slash", err(NotDir), at("l_f_slash")),
        case("l_dotdot_in", at("f"), at("l_dotdot_in")),
        case("dir/l_up", at("f"), at("dir/l_up")),
        case("dir/sub/l_top", at(""), at("dir/sub/l_top")),
        case("dir/sub/l_top/f", at("f"), at("f")),
        case("dir/sub/l_esc", err(Escape), at("dir/sub/l_esc")),
        case("dir/sub/l_esc/", err(Escape), err(Escape)),
        case("dir/l_to_l_dir/g", at("dir/g"), at("dir/g")),
        case("dir/l_to_l_dir/..", at(""), at("")),
        case("l_mid", at("dir"), at("l_mid")),
        case("l_abs_in", err(Escape), at("l_abs_in")),
        case("l_abs_in/", err(Escape), err(Escape)),
        case("l_abs_out", err(Escape), at("l_abs_out")),
        case("l_slash", err(Escape), at("l_slash")),
        case("l_slash/", err(Escape), err(Escape)),
        case("l_rel_out", err(Escape), at("l_rel_out")),
        case("l_dot", at(""), at("l_dot")),
        case("l_dot/l_dot/f", at("f"), at("f")),
        case("l_dot/..", err(Escape), err(Escape)),
        case("l_dotdot", err(Escape), at("l_dotdot")),
        case("loop_a", err(Loop), at("loop_a")),
        case("loop_a/", err(Loop), err(Loop)),
        case("self", err(Loop), at("self")),
        case("self/x", err(Loop), err(Loop)),
        case("dangling", err(NotFound), at("dangling")),
        case("dangling/", err(NotFound), err(NotFound)),
        case("dangling_dir", err(NotFound), at("dangling_dir")),
        case("l_f_as_dir", err(NotDir), at("l_f_as_dir")),
        case("l_dir_file/..", err(NotDir), err(NotDir)),
        case("l_colon", err(NotFound), at("l_colon")),
        case("missing/..", err(NotFound), err(NotFound)),
        case("empty/", at("empty"), at("empty")),
        case("", err(NotFound), err(NotFound)),
        case(".", at(""), at("")),
        case("./", at(""), at("")),
        case("/", err(Escape), err(Escape)),
        case("/f", err(Escape), err(Escape)),
        case("//f", err(Escape), err(Escape)),
    ];
    check_fixed(&tree, &cases);
}

/// Whether `n` links in one resolution are allowed.
fn within(n: usize, ok: Expect) -> Expect {
    if n <= MAX_SYMLINKS as usize {
        ok
    } else {
        err(Loop)
    }
}

/// Adds `c0 -> c1 -> ... -> c{n-1} -> end` under `prefix`.
fn chain(tree: &mut Tree, prefix: &str, n: usize, end: &str) {
    for i in 0..n {
        let target = if i + 1 == n {
            end.to_owned()
        } else {
            format!("{prefix}{}", i + 1)
        };
        tree.link(&format!("{prefix}{i}"), &target);
    }
}

#[test]
fn symlink_limit_boundary() {
    for n in [1, 20, 21, 39, 40, 41, 45] {
        let mut tree = Tree::new();
        tree.file("f").file("d/g");
        chain(&mut tree, "f", n, "f");
        chain(&mut tree, "d", n, "d");
        chain(&mut tree, "abs", n, "/@root/f");
        chain(&mut tree, "up", n, "../f");
        chain(&mut tree, "dangle", n, "nothing");
        let last = n - 1;
        let cases = [
            // n links to a file.
            case("f0", within(n, at("f")), at("f0")),
            case("f0/", within(n, err(NotDir)), within(n, err(NotDir))),
            case(&format!("f{last}"), at("f"), at(format!("f{last}"))),
            // n links to a directory, then through it.
            case("d0", within(n, at("d")), at("d0")),
            case("d0/", within(n, at("d")), within(n, at("d"))),
            case("d0/g", within(n, at("d/g")), within(n, at("d/g"))),
            case("d0/..", within(n, at("")), within(n, at(""))),
            // 2n links in one resolution.
            case(
                "d0/../d0/g",
                within(2 * n, at("d/g")),
                within(2 * n, at("d/g")),
            ),
            // The link count is checked before the target: the 41st link
            // fails as a loop even when its target is absolute or escapes.
            case("abs0", within(n, err(Escape)), at("abs0")),
            case("abs0/", within(n, err(Escape)), within(n, err(Escape))),
            // From 21 to 40 links, a bare openat2 may say ELOOP here (see
            // `ModelRun::kernel_may`); `Root` must still say Escape.
            case("up0", within(n, err(Escape)), at("up0")),
            case("dangle0", within(n, err(NotFound)), at("dangle0")),
            case(
                "dangle0/x",
                within(n, err(NotFound)),
                within(n, err(NotFound)),
            ),
        ];
        check_fixed(&tree, &cases);
    }
}

#[test]
fn repeated_dot_link_boundary() {
    let mut tree = Tree::new();
    tree.file("f").link("l", ".").link("abs", "/@root/f");
    let mut cases = Vec::new();
    for k in [1, 20, 21, 39, 40, 41, 50] {
        let through = "l/".repeat(k);
        // k links, then a file.
        cases.push(case(
            &format!("{through}f"),
            within(k, at("f")),
            within(k, at("f")),
        ));
        // k links, then the link itself: stat follows it once more.
        cases.push(case(
            &format!("{through}l"),
            within(k + 1, at("")),
            within(k, at("l")),
        ));
        // k links, then an absolute link.
        cases.push(case(
            &format!("{through}abs"),
            within(k + 1, err(Escape)),
            within(k, at("abs")),
        ));
        // k links and "..": the root's parent is never reached (a bare
        // openat2 may say ELOOP from 21 links on; `Root` says Escape).
        cases.push(case(
            &format!("{through}.."),
            within(k, err(Escape)),
            within(k, err(Escape)),
        ));
    }
    check_fixed(&tree, &cases);
}

#[test]
fn path_length_boundary() {
    let mut tree = Tree::new();
    tree.file("f");
    // 4095 bytes resolve; 4096 (PATH_MAX with the NUL) are refused.
    let longest = format!("{}f", "./".repeat((PATH_MAX - 2) / 2));
    assert_eq!(longest.len(), PATH_MAX - 1);
    let too_long = "./".repeat(PATH_MAX / 2);
    let cases = [
        case(&longest, at("f"), at("f")),
        case(&too_long, err(InvalidPath), err(InvalidPath)),
    ];
    check_fixed(&tree, &cases);
}
