//! The cost of the C boundary: `sg_root_stat` called through the shared
//! library (loaded with `dlopen`, called through a C function pointer, as a
//! C program or a binding calls it) against `Root::stat` called directly in
//! Rust, on the same small file, interleaved in the same window.
//!
//! ```sh
//! cargo bench -p sandgate-ffi --bench ffi
//! ```
//!
//! Target: at most 100 ns more per call through C.

use std::ffi::{c_char, c_void, CString};
use std::time::Duration;

use criterion::{criterion_group, Criterion};
use facade::rootfs::Root;

#[path = "../tests/support/library.rs"]
#[allow(dead_code)]
mod library;

#[path = "../../../benches/interleave.rs"]
mod interleave;
use interleave::{paired, report, Group};

#[repr(C)]
#[derive(Default)]
struct Stat {
    kind: u32,
    mode: u32,
    size: u64,
    nlink: u64,
    dev: u64,
    ino: u64,
    uid: u32,
    gid: u32,
    mtime_sec: i64,
    mtime_nsec: u32,
}

type RootOpen =
    unsafe extern "C" fn(*const c_char, usize, u32, *mut *mut c_void, *mut *mut c_void) -> u32;
type RootStat =
    unsafe extern "C" fn(*const c_void, *const c_char, usize, *mut Stat, *mut *mut c_void) -> u32;
type RootFree = unsafe extern "C" fn(*mut c_void);

struct Lib {
    open: RootOpen,
    stat: RootStat,
    free: RootFree,
}

fn load() -> Lib {
    let lib = library::library();
    let c = CString::new(lib.to_str().unwrap()).unwrap();
    // SAFETY: dlopen takes a NUL-terminated path; the handle is kept for the
    // life of the process (never closed).
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!h.is_null(), "cannot load {}", lib.display());
    let sym = |name: &str| {
        let n = CString::new(name).unwrap();
        // SAFETY: `h` is a live handle and `n` NUL-terminated.
        let p = unsafe { libc::dlsym(h, n.as_ptr()) };
        assert!(!p.is_null(), "{name} not found");
        p
    };
    // SAFETY: the symbols are the header's functions with exactly these
    // signatures (include/sandgate.h).
    unsafe {
        Lib {
            open: std::mem::transmute::<*mut c_void, RootOpen>(sym("sg_root_open")),
            stat: std::mem::transmute::<*mut c_void, RootStat>(sym("sg_root_stat")),
            free: std::mem::transmute::<*mut c_void, RootFree>(sym("sg_root_free")),
        }
    }
}

fn stat(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    std::fs::write(dir.path().join("d/small.txt"), b"hello\n").unwrap();
    let lib = load();
    let name = dir.path().to_str().unwrap();
    let mut croot: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid (ptr, len), out-pointer and NULL err.
    let st = unsafe {
        (lib.open)(
            name.as_ptr().cast(),
            name.len(),
            0,
            &mut croot,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(st, 0);
    let root = Root::open(dir.path()).unwrap();
    let path = "d/small.txt";

    let mut g: Group<'_> = c.benchmark_group("ffi");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    paired(
        &mut g,
        "ffi",
        "sg_root_stat_via_c",
        "Root::stat in Rust",
        64,
        || {
            let mut out = Stat::default();
            // SAFETY: live root, valid (ptr, len), writable out, NULL err.
            let st = unsafe {
                (lib.stat)(
                    croot,
                    path.as_ptr().cast(),
                    path.len(),
                    &mut out,
                    std::ptr::null_mut(),
                )
            };
            assert_eq!((st, out.size), (0, 6));
        },
        || {
            let m = root.stat(std::hint::black_box(path)).unwrap();
            assert_eq!(m.len(), 6);
        },
    );
    g.finish();
    // SAFETY: the root from sg_root_open, freed once.
    unsafe { (lib.free)(croot) };
}

criterion_group!(benches, stat);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    report();
    println!("\nTarget: sg_root_stat through C at most 100 ns more per call than Root::stat.");
}
