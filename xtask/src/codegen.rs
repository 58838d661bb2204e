//! `cargo xtask codegen [--check]`: generates the error-code tables from
//! crates/codes (see [`crate::codetables`]) and `include/sandgate.h` from
//! crates/ffi with the pinned cbindgen; `--check` fails when a committed
//! file differs from a fresh generation or when the header's version
//! defines disagree with the workspace's version.

use std::fs;
use std::path::Path;

use crate::{codetables, workspace_root};

const HEADER: &str = "include/sandgate.h";

/// The workspace version, `[workspace.package] version` of Cargo.toml.
fn workspace_version(root: &Path) -> Result<String, String> {
    let text = fs::read_to_string(root.join("Cargo.toml"))
        .map_err(|e| format!("cannot read Cargo.toml: {e}"))?;
    let mut in_package = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[workspace.package]";
        } else if in_package {
            if let Some(rest) = line.strip_prefix("version") {
                let v = rest.trim_start().trim_start_matches('=').trim();
                return Ok(v.trim_matches('"').to_owned());
            }
        }
    }
    Err("Cargo.toml has no [workspace.package] version".into())
}

fn generate(root: &Path, version: &str) -> Result<String, String> {
    let crate_dir = root.join("crates/ffi");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .map_err(|e| format!("cbindgen.toml: {e}"))?;
    let parts: Vec<&str> = version.split('.').collect();
    let [major, minor, patch] = parts[..] else {
        return Err(format!("version `{version}` is not MAJOR.MINOR.PATCH"));
    };
    let defines = format!(
        "\n/* The version of sandgate this header describes. */\n\
         #define SANDGATE_VERSION \"{version}\"\n\
         #define SANDGATE_VERSION_MAJOR {major}\n\
         #define SANDGATE_VERSION_MINOR {minor}\n\
         #define SANDGATE_VERSION_PATCH {patch}\n"
    );
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_crate(&crate_dir)
        .with_after_include(defines)
        .generate()
        .map_err(|e| format!("cbindgen: {e}"))?;
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).map_err(|e| format!("cbindgen wrote non-UTF-8: {e}"))
}

/// Reads `#define NAME value` from header text.
pub(crate) fn define<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("#define ")?;
        let (n, v) = rest.split_once(char::is_whitespace)?;
        (n == name).then(|| v.trim())
    })
}

/// Checks the header's version defines against the workspace version.
fn check_versions(header: &str, version: &str) -> Result<(), String> {
    let want = format!("\"{version}\"");
    match define(header, "SANDGATE_VERSION") {
        Some(v) if v == want => {}
        Some(v) => {
            return Err(format!(
                "{HEADER}: SANDGATE_VERSION is {v} but Cargo.toml says {want}; run `cargo xtask codegen`"
            ))
        }
        None => return Err(format!("{HEADER}: no SANDGATE_VERSION define")),
    }
    let parts: Vec<&str> = version.split('.').collect();
    for (name, want) in ["MAJOR", "MINOR", "PATCH"].iter().zip(parts) {
        let def = format!("SANDGATE_VERSION_{name}");
        if define(header, &def) != Some(want) {
            return Err(format!(
                "{HEADER}: {def} is {:?} but Cargo.toml's version is {version}; run `cargo xtask codegen`",
                define(header, &def)
            ));
        }
    }
    for def in ["SANDGATE_ABI_MAJOR", "SANDGATE_ABI_MINOR"] {
        if define(header, def).is_none() {
            return Err(format!("{HEADER}: no {def} define"));
        }
    }
    Ok(())
}

pub fn run(args: &[String]) -> Result<(), String> {
    let check = match args {
        [] => false,
        [a] if a == "--check" => true,
        _ => return Err("usage: cargo xtask codegen [--check]".into()),
    };
    let root = workspace_root();
    let version = workspace_version(&root)?;
    // The tables first: the header is generated from crates/ffi's sources,
    // the code constants among them.
    let mut stale = Vec::new();
    let docs = fs::read_to_string(root.join(codetables::DOCS_ERRORS))
        .map_err(|e| format!("cannot read {}: {e}", codetables::DOCS_ERRORS))?;
    for (rel, fresh) in codetables::all(&docs)? {
        if check {
            let committed = fs::read_to_string(root.join(rel)).unwrap_or_default();
            if committed != fresh {
                stale.push(format!(
                    "{rel} is stale{}",
                    first_difference(&committed, &fresh)
                ));
            }
        } else {
            write_file(&root, rel, &fresh)?;
        }
    }
    if !stale.is_empty() {
        return Err(format!(
            "{}; run `cargo xtask codegen` and commit the result",
            stale.join("; ")
        ));
    }
    let fresh = generate(&root, &version)?;
    check_versions(&fresh, &version)?;
    check_function_docs(&fresh)?;
    if check {
        let committed = fs::read_to_string(root.join(HEADER))
            .map_err(|e| format!("cannot read {HEADER}: {e}; run `cargo xtask codegen`"))?;
        check_versions(&committed, &version)?;
        if committed != fresh {
            return Err(format!(
                "{HEADER} is stale{}; run `cargo xtask codegen` and commit it",
                first_difference(&committed, &fresh)
            ));
        }
        eprintln!("{HEADER} and the code tables are up to date (version {version})");
    } else {
        write_file(&root, HEADER, &fresh)?;
    }
    Ok(())
}

/// Checks that every function the header declares documents its return
/// value and its safety contract: the comment block right above each
/// prototype has a `# Return value` and a `# Safety` section.
fn check_function_docs(header: &str) -> Result<(), String> {
    let lines: Vec<&str> = header.lines().collect();
    let mut undocumented = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(open) = line.find("sg_").filter(|_| line.contains('(')) else {
            continue;
        };
        // A prototype starts at column 0 with its return type.
        if line.starts_with(char::is_whitespace) || line.starts_with("//") || line.starts_with('#')
        {
            continue;
        }
        let name: String = line[open..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !line[open + name.len()..].starts_with('(') {
            continue;
        }
        let doc: Vec<&str> = lines[..i]
            .iter()
            .rev()
            .take_while(|l| l.starts_with("//"))
            .copied()
            .collect();
        let has = |section: &str| {
            doc.iter()
                .any(|l| l.trim_start_matches('/').trim() == section)
        };
        if !has("# Return value") || !has("# Safety") {
            undocumented.push(name);
        }
    }
    if undocumented.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{HEADER}: these functions lack a `# Return value` or `# Safety` section in their doc comment (crates/ffi): {}",
            undocumented.join(", ")
        ))
    }
}

/// ` (first difference at line N)`, for a stale file's message.
fn first_difference(committed: &str, fresh: &str) -> String {
    let line = committed
        .lines()
        .zip(fresh.lines())
        .position(|(a, b)| a != b)
        .map_or_else(
            || committed.lines().count().min(fresh.lines().count()) + 1,
            |i| i + 1,
        );
    format!(" (first difference at line {line})")
}

fn write_file(root: &Path, rel: &str, text: &str) -> Result<(), String> {
    let path = root.join(rel);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    fs::write(&path, text).map_err(|e| format!("cannot write {rel}: {e}"))?;
    eprintln!("wrote {rel}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undocumented_functions_are_named() {
        let good = "// Frees it.\n//\n// # Return value\n//\n// None.\n//\n// # Safety\n//\n// Live.\nvoid sg_x_free(struct sg_x *x);\n";
        assert!(check_function_docs(good).is_ok());
        let bad = "// Frees it.\n//\n// # Safety\n//\n// Live.\nvoid sg_x_free(struct sg_x *x);\n";
        assert!(check_function_docs(bad).unwrap_err().contains("sg_x_free"));
    }

    #[test]
    fn version_defines_are_checked() {
        let good = "#define SANDGATE_VERSION \"1.2.3\"\n#define SANDGATE_VERSION_MAJOR 1\n\
                    #define SANDGATE_VERSION_MINOR 2\n#define SANDGATE_VERSION_PATCH 3\n\
                    #define SANDGATE_ABI_MAJOR 1\n#define SANDGATE_ABI_MINOR 0\n";
        assert!(check_versions(good, "1.2.3").is_ok());
        assert!(check_versions(good, "1.2.4")
            .unwrap_err()
            .contains("SANDGATE_VERSION"));
        let bad_minor = good.replace("MINOR 2", "MINOR 9");
        assert!(check_versions(&bad_minor, "1.2.3")
            .unwrap_err()
            .contains("MINOR"));
        assert!(check_versions("", "1.2.3").is_err());
    }
}
