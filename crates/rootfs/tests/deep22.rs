//! Paths as deep as the kernel takes, through the root's operations that
//! go one component at a time.

use sandgate_rootfs::{Resolver, Root};

/// `mkdir_all` of a path of 2,047 components (4,093 bytes, as long as the
/// kernel takes) in a thread with a stack of 256 KiB, with either
/// resolver. It recursed once per missing component,
/// and a frame per level overflowed the 2 MiB stack, which aborted the
/// embedding process; it now goes up to the first directory that exists
/// and down again in a loop.
#[test]
fn deep22_mkdir_all_of_the_longest_path_keeps_to_a_small_stack() {
    for resolver in [Resolver::Openat2, Resolver::Walk] {
        if matches!(resolver, Resolver::Openat2) && !sandgate_rootfs::openat2_supported() {
            continue;
        }
        // 256 KiB, an eighth of a thread's default 2 MiB, which the
        // recursion overflowed: what passes in it passes in the default.
        let stack = 256usize << 10;
        {
            let tmp = tempfile::tempdir().unwrap();
            let root = Root::open_with_resolver(tmp.path(), resolver).unwrap();
            let path = vec!["a"; 2047].join("/");
            assert_eq!(path.len(), 4093);
            let made = std::thread::Builder::new()
                .stack_size(stack)
                .spawn(move || {
                    let first = root.mkdir_all(&path, 0o755).map_err(|e| e.to_string());
                    let again = root.mkdir_all(&path, 0o755).map_err(|e| e.to_string());
                    let deepest = root
                        .stat(&path)
                        .map(|m| m.is_dir())
                        .map_err(|e| e.to_string());
                    // Half made already, half to make.
                    let longer = format!("{}/b/c", &path[..2001]);
                    let other = root.mkdir_all(&longer, 0o755).map_err(|e| e.to_string());
                    let other_made = root.stat(&longer).map(|m| m.is_dir()).unwrap_or(false);
                    (first, again, deepest, other, other_made)
                })
                .unwrap()
                .join()
                .unwrap();
            assert_eq!(
                made,
                (Ok(()), Ok(()), Ok(true), Ok(()), true),
                "{resolver:?}, stack {stack}"
            );
        }
    }
}
