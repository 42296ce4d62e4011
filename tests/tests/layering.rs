//! The node's and the coordinator's modules import each other only as `docs/architecture.md`
//! allows.
//!
//! Why a test: each binary is one crate, so Cargo accepts any circle between its modules. The
//! architecture page lists, per top-level module of each crate, its layer and the modules it
//! may import; this test reads those tables and every `crate::…` path in the crates'
//! production code and fails on any difference, and on any allowed import that does not point
//! to a lower layer (which is what keeps the graph free of circles).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The node's top-level modules whose production code must see only the routing table, not
/// `Runtime`.
const REQUEST_PATH: &[&str] = &["routing", "leases", "caps", "cluster"];

/// The section of `docs/architecture.md` with the node's table.
const NODE_TABLE: &str = "## Allowed arrows";
/// The section with the coordinator's table.
const COORDINATOR_TABLE: &str = "## Coordinator: allowed arrows";

#[derive(Debug, Default)]
struct Table {
    /// Module → (layer, the modules it may import).
    rows: BTreeMap<String, (u32, BTreeSet<String>)>,
}

/// Parses the rows `| layer | \`module\` | \`a\`, \`b\` |` of the section `heading`.
fn parse_table(markdown: &str, heading: &str) -> Result<Table, String> {
    let section = markdown
        .split(&format!("{heading}\n"))
        .nth(1)
        .ok_or_else(|| format!("no \"{heading}\" section"))?;
    let mut table = Table::default();
    for line in section.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        let [layer, module, imports] = cells.as_slice() else {
            continue;
        };
        let Ok(layer) = layer.parse::<u32>() else {
            continue; // the header and the separator row
        };
        let module = ticked(module)
            .next()
            .ok_or_else(|| format!("row without a module: {line}"))?;
        let imports = ticked(imports).map(str::to_owned).collect();
        if table
            .rows
            .insert(module.to_owned(), (layer, imports))
            .is_some()
        {
            return Err(format!("`{module}` is listed twice"));
        }
    }
    if table.rows.is_empty() {
        return Err("the table has no rows".into());
    }
    Ok(table)
}

/// The `backticked` words of a cell.
fn ticked(cell: &str) -> impl Iterator<Item = &str> {
    cell.split('`').skip(1).step_by(2)
}

/// The production code of a file: line comments dropped, and the trailing
/// `#[cfg(test)] mod tests { … }` cut off.
fn production_code(source: &str) -> String {
    let source = match source.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &source[..i],
        None => source,
    };
    source
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules a piece of code names through `crate::`: `crate::a::…`,
/// `crate::{b, c::…}` (across lines too).
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names of the group: at brace depth 0, after `{` or `,`.
            let mut depth = 0;
            let mut expecting = true;
            let mut name = String::new();
            for c in group.chars() {
                if depth == 0 && expecting && (c.is_alphanumeric() || c == '_') {
                    name.push(c);
                    continue;
                }
                if !name.is_empty() {
                    out.insert(std::mem::take(&mut name));
                    expecting = false;
                }
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => expecting = true,
                    _ => {}
                }
            }
            if !name.is_empty() {
                out.insert(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The node's imports between top-level modules, from production code: module → imported
/// module → the files that import it. Also returns every top-level module.
struct Scan {
    modules: BTreeSet<String>,
    arrows: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    /// Files of the request path that name `Runtime`.
    runtime_in_request_path: Vec<String>,
}

/// `request_path`: the modules that must not name `Runtime`.
fn scan(src: &Path, request_path: &[&str]) -> Result<Scan, String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut scan = Scan {
        modules: BTreeSet::new(),
        arrows: BTreeMap::new(),
        runtime_in_request_path: Vec::new(),
    };
    for file in files {
        let rel = file.strip_prefix(src).unwrap_or(&file);
        let rel_text = rel.to_string_lossy().replace('\\', "/");
        let top = rel_text
            .split('/')
            .next()
            .unwrap_or("")
            .trim_end_matches(".rs")
            .to_owned();
        // The crate roots are the wiring of the modules, not a module.
        if top == "lib" || top == "main" {
            continue;
        }
        scan.modules.insert(top.clone());
        // Test code may reach anywhere; only what ships is layered.
        if rel.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{rel_text}: {e}"))?;
        let code = production_code(&text);
        for target in crate_paths(&code) {
            if target != top {
                scan.arrows
                    .entry(top.clone())
                    .or_default()
                    .entry(target)
                    .or_default()
                    .insert(rel_text.clone());
            }
        }
        let names_runtime = code
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|word| word == "Runtime");
        if request_path.contains(&top.as_str()) && names_runtime {
            scan.runtime_in_request_path.push(rel_text);
        }
    }
    Ok(scan)
}

/// Every way the code and the table disagree, or the table breaks its own rule.
fn violations(table: &Table, scan: &Scan) -> Vec<String> {
    let mut out = Vec::new();
    for module in &scan.modules {
        if !table.rows.contains_key(module) {
            out.push(format!("module `{module}` is not in the table"));
        }
    }
    for (module, (layer, imports)) in &table.rows {
        if !scan.modules.contains(module) {
            out.push(format!("the table lists `{module}`, which is not a module"));
        }
        for import in imports {
            match table.rows.get(import) {
                Some((to, _)) if to > layer => {}
                Some((to, _)) => out.push(format!(
                    "`{module}` (layer {layer}) may import `{import}` (layer {to}): not a lower layer"
                )),
                None => out.push(format!("`{module}` may import `{import}`, which is not listed")),
            }
        }
    }
    for (module, targets) in &scan.arrows {
        let allowed = table.rows.get(module).map(|(_, imports)| imports);
        for (target, files) in targets {
            if !allowed.is_some_and(|a| a.contains(target)) {
                let files: Vec<&str> = files.iter().map(String::as_str).collect();
                out.push(format!(
                    "`{module}` imports `{target}` ({}), which the table does not allow",
                    files.join(", ")
                ));
            }
        }
        if let Some(allowed) = allowed {
            for stale in allowed.iter().filter(|a| !targets.contains_key(*a)) {
                out.push(format!(
                    "the table lets `{module}` import `{stale}`, which it no longer does"
                ));
            }
        }
    }
    for (module, (_, imports)) in &table.rows {
        if !imports.is_empty() && !scan.arrows.contains_key(module) {
            out.push(format!(
                "the table lists imports of `{module}`, which imports nothing"
            ));
        }
    }
    for file in &scan.runtime_in_request_path {
        out.push(format!(
            "{file} names `Runtime`; the request path takes `RoutingTable`"
        ));
    }
    out
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn table_of(heading: &str) -> Result<Table, String> {
    let doc = manifest_dir().join("../docs/architecture.md");
    parse_table(
        &std::fs::read_to_string(&doc).map_err(|e| e.to_string())?,
        heading,
    )
}

fn real_table() -> Result<Table, String> {
    table_of(NODE_TABLE)
}

fn real_scan() -> Result<Scan, String> {
    scan(&manifest_dir().join("../router-node/src"), REQUEST_PATH)
}

fn coordinator_scan() -> Result<Scan, String> {
    scan(&manifest_dir().join("../coordinator/src"), &[])
}

#[test]
fn the_node_imports_only_what_its_layers_allow() {
    let scan = real_scan().unwrap();
    assert!(scan.modules.len() > 10, "found {:?}", scan.modules);
    let problems = violations(&real_table().unwrap(), &scan);
    assert!(
        problems.is_empty(),
        "docs/architecture.md and the code disagree:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_coordinator_imports_only_what_its_layers_allow() {
    let scan = coordinator_scan().unwrap();
    assert!(scan.modules.len() > 10, "found {:?}", scan.modules);
    let problems = violations(&table_of(COORDINATOR_TABLE).unwrap(), &scan);
    assert!(
        problems.is_empty(),
        "docs/architecture.md and the coordinator's code disagree:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_coordinators_old_circle_is_refused() {
    // `janitor` took the whole service (`Coordinator`) while `service` sat above `leader`,
    // which drives the janitor: a circle. A table that allowed it again must fail.
    let mut table = table_of(COORDINATOR_TABLE).unwrap();
    if let Some((_, imports)) = table.rows.get_mut("janitor") {
        imports.insert("service".into());
    }
    let problems = violations(&table, &coordinator_scan().unwrap());
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`janitor`") && p.contains("not a lower layer")),
        "{problems:?}"
    );
}

#[test]
fn an_upward_arrow_in_the_table_is_refused() {
    let mut table = real_table().unwrap();
    let scan = real_scan().unwrap();
    // `state` (a low layer) may import `routing` (a higher one): a circle in the making.
    if let Some((_, imports)) = table.rows.get_mut("state") {
        imports.insert("routing".into());
    }
    let problems = violations(&table, &scan);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`state`") && p.contains("not a lower layer")),
        "{problems:?}"
    );
}

#[test]
fn an_import_the_table_does_not_list_is_refused() {
    let mut table = real_table().unwrap();
    let scan = real_scan().unwrap();
    // Forget that `routing` may import `actors` (which it does).
    if let Some((_, imports)) = table.rows.get_mut("routing") {
        imports.remove("actors");
    }
    let problems = violations(&table, &scan);
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("`routing` imports `actors`")),
        "{problems:?}"
    );
}

#[test]
fn a_bad_table_fails_to_parse_or_check() {
    assert!(parse_table("# no table here", NODE_TABLE).is_err());
    let doubled = "## Allowed arrows\n| layer | module | may import |\n|---|---|---|\n\
                   | 1 | `a` | `b` |\n| 2 | `a` | — |\n";
    assert!(parse_table(doubled, NODE_TABLE).is_err());
    // A module the code has but the table lacks, and a row for a module that does not exist.
    let table = parse_table(
        "## Allowed arrows\n| layer | module | may import |\n|---|---|---|\n| 1 | `ghost` | — |\n",
        NODE_TABLE,
    )
    .unwrap();
    let problems = violations(&table, &real_scan().unwrap());
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`ghost`, which is not a module"))
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("module `routing` is not in the table"))
    );
}

#[test]
fn crate_paths_are_read_from_uses_groups_and_inline_paths() {
    let code = production_code(
        "use crate::alpha::Thing;\n\
         use crate::{beta, gamma::{x, y}, delta::z as w};\n\
         use crate::{\n    epsilon::E,\n    zeta,\n};\n\
         fn f() { crate::eta::call(); } // crate::comment_only::x\n\
         /// [`crate::doc_only`]\n\
         #[cfg(test)]\nmod tests {\n    use crate::test_only::X;\n}\n",
    );
    let found: Vec<String> = crate_paths(&code).into_iter().collect();
    assert_eq!(
        found,
        ["alpha", "beta", "delta", "epsilon", "eta", "gamma", "zeta"]
    );
}
