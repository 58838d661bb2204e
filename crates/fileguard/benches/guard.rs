//! Per-path cost of deny-write checks: 20 realistic patterns over 10,000
//! generated paths (about 59% pure ASCII, about 28 bytes each), with plain
//! globset `is_match` on the raw paths as the baseline in the same run.
//!
//! Each iteration checks all 10,000 paths; criterion's throughput line gives
//! paths per second, so ns/path = 1e9 / (elements per second).
//!
//! Run: `cargo bench -p sandgate-fileguard -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use sandgate_fileguard::{fold, Candidate, Guard, GuardBuilder};

const PATTERNS: [&str; 20] = [
    ".github/**",
    ".claude/**",
    ".claude/settings.json",
    ".pi/**",
    "Makefile",
    "Dockerfile",
    "*.yml",
    "*.yaml",
    "*.pem",
    ".env",
    "Cargo.lock",
    "package-lock.json",
    "secrets/**",
    "docs/*.md",
    "scripts/*.sh",
    "crates/*/Cargo.toml",
    ".vscode/settings.json",
    "**/node_modules/**",
    "**/.husky/**",
    "документы/**",
];

const ASCII_DIRS: &[&str] = &[
    "src",
    "lib",
    "tests",
    "docs",
    ".github",
    "workflows",
    "crates",
    "core",
    "app",
    "scripts",
    "config",
    "assets",
    "internal",
    "cmd",
    "pkg",
    "web",
    "api",
    "Utils",
    "Models",
    "node_modules",
    ".claude",
    "secrets",
    "build",
    "vendor",
    "components",
    "integration_tests",
    "documentation",
    "services",
    "middleware",
];
const ASCII_FILES: &[&str] = &[
    "main.rs",
    "mod.rs",
    "lib.rs",
    "index.ts",
    "ci.yml",
    "deploy.yaml",
    "settings.json",
    "notes.md",
    "README.md",
    "Makefile",
    "Cargo.toml",
    "package.json",
    "app.test.ts",
    "data.csv",
    "server.go",
    "util.py",
    "Dockerfile",
    "key.pem",
    ".env",
    "LICENSE",
    "requirements.txt",
    "CONTRIBUTING.md",
    "docker-compose.yml",
    "user_controller.rb",
    "NavigationBar.tsx",
];
const OTHER_DIRS: &[&str] = &[
    "документы",
    "Отчёты",
    "café",
    "Über",
    "naïve",
    "日本語",
    "資料",
    "ファイル",
    "Ελληνικά",
    "résumé",
    "Ångström",
    "ñandú",
    "straße",
    "proyectos",
    "cafe\u{301}",
    "數據",
    "Müller",
    "Präsentationen",
    "Bibliothèque",
    "προγράμματα",
];
const OTHER_FILES: &[&str] = &[
    "отчёт.txt",
    "заметки.md",
    "résumé.pdf",
    "日本.txt",
    "Übersicht.md",
    "café.yml",
    "naïve.rs",
    "ΣΗΜΕΙΩΣΕΙΣ.txt",
    "ñ.csv",
    "写真.png",
    "straße.toml",
    "Å.txt",
    "📁notes.md",
    "ſecret.pem",
    "Jahresabschluß.xlsx",
    "заметки_встречи.md",
];

/// A small deterministic generator (xorshift64*), so every run measures the
/// same paths.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

fn paths() -> Vec<String> {
    let mut rng = Rng(0x5eed_f11e_9a4d);
    (0..10_000)
        .map(|_| {
            let ascii = rng.below(100) < 59;
            let depth = 2 + rng.below(3);
            let mut comps: Vec<&str> = Vec::new();
            for _ in 0..depth - 1 {
                let from = if ascii || rng.below(2) == 0 {
                    ASCII_DIRS
                } else {
                    OTHER_DIRS
                };
                comps.push(rng.pick(from));
            }
            let from = if ascii
                || (depth > 1 && !comps.iter().all(|c| c.is_ascii()) && rng.below(2) == 0)
            {
                ASCII_FILES
            } else {
                OTHER_FILES
            };
            comps.push(rng.pick(from));
            let mut path = comps.join("/");
            if !ascii && path.is_ascii() {
                path = format!("{}/{path}", rng.pick(OTHER_DIRS));
            }
            path
        })
        .collect()
}

fn guard() -> Guard {
    GuardBuilder::new()
        .patterns(PATTERNS)
        .restricted(true)
        .build()
        .unwrap()
}

/// globset over raw paths: base-name patterns become `**/name`.
fn globset(case_insensitive: bool) -> GlobSet {
    let mut b = GlobSetBuilder::new();
    for p in PATTERNS {
        let p = if p.contains('/') {
            p.to_owned()
        } else {
            format!("**/{p}")
        };
        let glob = GlobBuilder::new(&p)
            .literal_separator(true)
            .case_insensitive(case_insensitive)
            .build()
            .unwrap();
        b.add(glob);
    }
    b.build().unwrap()
}

fn bench(c: &mut Criterion) {
    let paths = paths();
    let ascii = paths.iter().filter(|p| p.is_ascii()).count();
    let bytes: usize = paths.iter().map(String::len).sum();
    let g = guard();
    let refused_write = paths
        .iter()
        .filter(|p| g.check_write(p, None).is_refused())
        .count();
    let refused_move = paths
        .iter()
        .filter(|p| g.check_rename_or_delete(p, None).is_refused())
        .count();
    eprintln!(
        "{} paths, {:.1}% ASCII, {:.1} bytes on average; refused: {} by write, {} by rename/delete \
         (`**/node_modules/**` makes every path a possible directory above a protected one)",
        paths.len(),
        100.0 * ascii as f64 / paths.len() as f64,
        bytes as f64 / paths.len() as f64,
        refused_write,
        refused_move,
    );

    let mut group = c.benchmark_group("per_path");
    group.throughput(Throughput::Elements(paths.len() as u64));

    group.bench_function("fileguard_check_rename_or_delete", |b| {
        b.iter(|| {
            let mut refused = 0usize;
            for p in &paths {
                refused += usize::from(g.check_rename_or_delete(black_box(p), None).is_refused());
            }
            black_box(refused)
        })
    });
    group.bench_function("fileguard_check_write", |b| {
        b.iter(|| {
            let mut refused = 0usize;
            for p in &paths {
                refused += usize::from(g.check_write(black_box(p), None).is_refused());
            }
            black_box(refused)
        })
    });
    group.bench_function("fileguard_check_write_spelled_and_resolved", |b| {
        b.iter(|| {
            let mut refused = 0usize;
            for p in &paths {
                refused += usize::from(g.check_write(black_box(p), Some(p)).is_refused());
            }
            black_box(refused)
        })
    });
    let candidates: Vec<Candidate<'_>> = paths.iter().map(|p| Candidate::new(p)).collect();
    group.bench_function("fileguard_check_write_prepared_candidate", |b| {
        b.iter(|| {
            let mut refused = 0usize;
            for cand in &candidates {
                refused += usize::from(g.check_write_candidate(black_box(cand), None).is_refused());
            }
            black_box(refused)
        })
    });
    group.bench_function("fold_only", |b| {
        b.iter(|| {
            for p in &paths {
                black_box(fold(black_box(p)));
            }
        })
    });
    let raw = globset(false);
    group.bench_function("baseline_globset_is_match_raw", |b| {
        b.iter(|| {
            for p in &paths {
                black_box(raw.is_match(black_box(p.as_str())));
            }
        })
    });
    let ci = globset(true);
    group.bench_function("baseline_globset_is_match_ascii_case_insensitive", |b| {
        b.iter(|| {
            for p in &paths {
                black_box(ci.is_match(black_box(p.as_str())));
            }
        })
    });
    group.finish();

    c.bench_function("build_guard_20_patterns", |b| b.iter(|| black_box(guard())));
}

criterion_group!(benches, bench);
criterion_main!(benches);
