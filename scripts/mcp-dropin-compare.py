#!/usr/bin/env python3
"""`sandgate mcp DIR` beside the reference filesystem MCP server, side by side.

Both servers are started in their `… DIR` form on the same directory and
driven by the official MCP Python SDK through the same battery of calls; the
directory's content is reset before each call, and each answer (isError,
text content, structuredContent) is printed with the files the call left
behind, then a line saying whether the two agree. The reference server is
not vendored: pass the path of its installed `dist/index.js` (`cargo xtask
bench --only mcp` installs it with `npm ci` under target/bench/mcp-reference).

    target/mcp-venv/bin/python scripts/mcp-dropin-compare.py \
        --sandgate target/debug/sandgate \
        --reference target/bench/mcp-reference/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js \
        [--only SUBSTRING] [--diff-only]

Not a CI step: it needs the reference server from npm.
"""

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

# The directory every call starts from: name -> bytes (a name ending in "/"
# is an empty directory).
FIXTURE = {
    "a.txt": b"one\ntwo\nthree\nfour\n",
    "nofinal.txt": b"one\ntwo\nthree",
    "empty.txt": b"",
    "crlf.txt": b"one\r\ntwo\r\nthree\r\n",
    "dup.txt": b"foo\nbar\nfoo\n",
    "code.py": b"def f():\n    x = 1\n    y = 2\n    return x\n",
    "notes.md": b"# notes\n",
    ".hidden.md": b"hidden\n",
    "Upper.MD": b"upper\n",
    "docs/readme.md": b"readme\n",
    "docs/guide.md": b"guide\n",
    "docs/deep/x.md": b"x\n",
    "node_modules/pkg/index.md": b"pkg\n",
    "build.log": b"log\n",
    "emptydir/": b"",
    "big.bin": b"\x00" * 2048,
    "pic.png": b"\x89PNG\r\n\x1a\nfake",
}


def reset(root: Path):
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    for name, data in FIXTURE.items():
        p = root / name
        if name.endswith("/"):
            p.mkdir(parents=True, exist_ok=True)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        os.chmod(p, 0o640 if name == "a.txt" else 0o644)


def snapshot(root: Path):
    """The directory's state: path -> content (or 'dir'), and mode."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            p = Path(dirpath) / d
            out[str(p.relative_to(root)) + "/"] = "dir"
        for f in filenames:
            p = Path(dirpath) / f
            st = p.lstat()
            out[str(p.relative_to(root))] = [p.read_bytes().decode("utf-8", "replace"), oct(st.st_mode & 0o777)]
    return dict(sorted(out.items()))


def cases(root: str):
    A = lambda n: f"{root}/{n}"  # noqa: E731 - absolute host paths, as a host sends them
    edit = lambda p, edits, dry=False: ("edit_file", {"path": A(p), "edits": [{"oldText": o, "newText": n} for o, n in edits], "dryRun": dry})  # noqa: E731
    return {
        "edit exact": edit("a.txt", [("two\n", "TWO\n")]),
        "edit exact dryRun": edit("a.txt", [("two\n", "TWO\n")], True),
        "edit ws-tolerant unindented old": edit("code.py", [("x = 1\ny = 2", "x = 10\ny = 20")]),
        "edit ws-tolerant relative indent": edit("code.py", [("    x = 1\n    y = 2", "x = 1\n  if x:\n      y = 2")]),
        "edit ws-tolerant trailing spaces": edit("code.py", [("def f():   \n    x = 1", "def g():\n    x = 1")]),
        "edit multiple occurrences": edit("dup.txt", [("foo", "baz")]),
        "edit crlf file": edit("crlf.txt", [("two\nthree", "TWO\nTHREE")]),
        "edit crlf old text": edit("a.txt", [("two\r\nthree", "2\r\n3")]),
        "edit no match": edit("a.txt", [("nope", "x")]),
        "edit chained": edit("a.txt", [("two", "deux"), ("deux\nthree", "trois")]),
        "edit second fails": edit("a.txt", [("two", "deux"), ("nope", "x")]),
        "edit empty old": edit("a.txt", [("", "start ")]),
        "edit no edits": ("edit_file", {"path": A("a.txt"), "edits": []}),
        "edit nofinal": edit("nofinal.txt", [("three", "3")], True),
        "edit backticks": edit("a.txt", [("one", "```x```")], True),
        "edit missing file": edit("missing.txt", [("a", "b")]),
        "read whole": ("read_text_file", {"path": A("a.txt")}),
        "read head 2": ("read_text_file", {"path": A("a.txt"), "head": 2}),
        "read tail 2": ("read_text_file", {"path": A("a.txt"), "tail": 2}),
        "read head+tail": ("read_text_file", {"path": A("a.txt"), "head": 1, "tail": 1}),
        "read head 0": ("read_text_file", {"path": A("a.txt"), "head": 0}),
        "read tail 0": ("read_text_file", {"path": A("a.txt"), "tail": 0}),
        "read nofinal head 5": ("read_text_file", {"path": A("nofinal.txt"), "head": 5}),
        "read nofinal tail 2": ("read_text_file", {"path": A("nofinal.txt"), "tail": 2}),
        "read empty": ("read_text_file", {"path": A("empty.txt")}),
        "read empty head": ("read_text_file", {"path": A("empty.txt"), "head": 3}),
        "read empty tail": ("read_text_file", {"path": A("empty.txt"), "tail": 3}),
        "read crlf": ("read_text_file", {"path": A("crlf.txt")}),
        "read crlf head 2": ("read_text_file", {"path": A("crlf.txt"), "head": 2}),
        "read crlf tail 2": ("read_text_file", {"path": A("crlf.txt"), "tail": 2}),
        "read missing": ("read_text_file", {"path": A("missing.txt")}),
        "read dir": ("read_text_file", {"path": A("docs")}),
        "read relative": ("read_text_file", {"path": "a.txt"}),
        "media png": ("read_media_file", {"path": A("pic.png")}),
        "media bin": ("read_media_file", {"path": A("notes.md")}),
        "multi ok": ("read_multiple_files", {"paths": [A("a.txt"), A("notes.md")]}),
        "multi one failing": ("read_multiple_files", {"paths": [A("a.txt"), A("missing.txt")]}),
        "write new": ("write_file", {"path": A("new.txt"), "content": "hello\n"}),
        "write over keeps mode": ("write_file", {"path": A("a.txt"), "content": "replaced\n"}),
        "write missing parent": ("write_file", {"path": A("nodir/new.txt"), "content": "x"}),
        "write onto dir": ("write_file", {"path": A("docs"), "content": "x"}),
        "mkdir new nested": ("create_directory", {"path": A("n1/n2/n3")}),
        "mkdir exists": ("create_directory", {"path": A("docs")}),
        "mkdir over file": ("create_directory", {"path": A("a.txt")}),
        "ls root": ("list_directory", {"path": root}),
        "ls docs": ("list_directory", {"path": A("docs")}),
        "ls file": ("list_directory", {"path": A("a.txt")}),
        "lss name": ("list_directory_with_sizes", {"path": A("docs")}),
        "lss root name": ("list_directory_with_sizes", {"path": root}),
        "lss root size": ("list_directory_with_sizes", {"path": root, "sortBy": "size"}),
        "tree docs": ("directory_tree", {"path": A("docs")}),
        "tree emptydir": ("directory_tree", {"path": A("emptydir")}),
        "tree exclude plain": ("directory_tree", {"path": root, "excludePatterns": ["node_modules", "deep", "big.bin", "pic.png", ".hidden.md", "Upper.MD", "crlf.txt", "dup.txt", "code.py", "nofinal.txt", "empty.txt", "emptydir"]}),
        "tree exclude star": ("directory_tree", {"path": root, "excludePatterns": ["*.md", "*.txt", "*.bin", "*.py", "*.png", "*.log", "*.MD"]}),
        "tree exclude dstar": ("directory_tree", {"path": root, "excludePatterns": ["**/*.md", "node_modules/**", "*.txt", "*.bin", "*.py", "*.png", "*.log", "*.MD", "emptydir"]}),
        "tree exclude dir/**": ("directory_tree", {"path": A("docs"), "excludePatterns": ["deep/**"]}),
        "tree relative path": ("directory_tree", {"path": "docs", "excludePatterns": ["deep"]}),
        "move new": ("move_file", {"source": A("a.txt"), "destination": A("moved.txt")}),
        "move onto existing": ("move_file", {"source": A("a.txt"), "destination": A("notes.md")}),
        "move into missing dir": ("move_file", {"source": A("a.txt"), "destination": A("nodir/a.txt")}),
        "move dir": ("move_file", {"source": A("docs"), "destination": A("emptydir/docs")}),
        "move missing source": ("move_file", {"source": A("missing"), "destination": A("x")}),
        "search *.md": ("search_files", {"path": root, "pattern": "*.md"}),
        "search **/*.md": ("search_files", {"path": root, "pattern": "**/*.md"}),
        "search substring": ("search_files", {"path": root, "pattern": "read"}),
        "search case": ("search_files", {"path": root, "pattern": "**/*.md", "excludePatterns": ["node_modules"]}),
        "search exclude **": ("search_files", {"path": root, "pattern": "**/*.md", "excludePatterns": ["**/deep/**", "node_modules/**"]}),
        "search exclude *.md": ("search_files", {"path": root, "pattern": "**", "excludePatterns": ["*.md"]}),
        "search dirs": ("search_files", {"path": root, "pattern": "**/deep"}),
        "search sub": ("search_files", {"path": A("docs"), "pattern": "*.md"}),
        "search none": ("search_files", {"path": root, "pattern": "*.zzz"}),
        "info file": ("get_file_info", {"path": A("a.txt")}),
        "info dir": ("get_file_info", {"path": A("docs")}),
        "info missing": ("get_file_info", {"path": A("missing")}),
        "allowed": ("list_allowed_directories", {}),
    }


async def drive(cmd, args, root: Path, selected):
    params = StdioServerParameters(command=cmd, args=args, cwd=str(root.parent))
    out = {}
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            for name, (tool, targs) in selected.items():
                reset(root)
                try:
                    res = await s.call_tool(tool, targs)
                    d = res.model_dump(by_alias=True, exclude_none=True)
                    ans = {
                        "isError": bool(d.get("isError")),
                        "content": d.get("content", []),
                        "structuredContent": d.get("structuredContent"),
                    }
                except Exception as e:  # a JSON-RPC error
                    ans = {"rpc_error": str(e)}
                ans["after"] = snapshot(root)
                out[name] = ans
    return out


def text_of(ans):
    if "rpc_error" in ans:
        return "RPC ERROR: " + ans["rpc_error"]
    parts = []
    for c in ans["content"]:
        parts.append(c.get("text", json.dumps(c)))
    return ("[isError] " if ans["isError"] else "") + "\n".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sandgate", required=True)
    ap.add_argument("--reference", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--diff-only", action="store_true")
    ap.add_argument("--json", help="write both answers to this file")
    o = ap.parse_args()
    sandgate, reference = str(Path(o.sandgate).resolve()), str(Path(o.reference).resolve())
    base = Path(tempfile.mkdtemp(prefix="dropin-")).resolve()
    root = base / "proj"
    root.mkdir()
    reset(root)
    selected = {k: v for k, v in cases(str(root)).items() if o.only in k}
    try:
        ref = asyncio.run(drive("node", [reference, str(root)], root, selected))
        own = asyncio.run(drive(sandgate, ["mcp", str(root)], root, selected))
    finally:
        shutil.rmtree(base)
    same = 0
    for name in selected:
        a, b = ref[name], own[name]
        agree = a == b
        same += agree
        if agree and o.diff_only:
            continue
        print(f"=== {name}: {'SAME' if agree else 'DIFFERENT'}  {selected[name][0]} {json.dumps(selected[name][1])}")
        if not agree:
            print("--- reference:\n" + text_of(a))
            print("--- sandgate:\n" + text_of(b))
            if a.get("structuredContent") != b.get("structuredContent"):
                print("--- structuredContent differs:\n  ref:", json.dumps(a.get("structuredContent"))[:600],
                      "\n  own:", json.dumps(b.get("structuredContent"))[:600])
            if a["after"] != b["after"]:
                ka, kb = a["after"], b["after"]
                for k in sorted(set(ka) | set(kb)):
                    if ka.get(k) != kb.get(k):
                        print(f"--- after differs at {k}: ref={ka.get(k)!r} own={kb.get(k)!r}")
        print()
    print(f"{same} of {len(selected)} the same")
    if o.json:
        Path(o.json).write_text(json.dumps({"reference": ref, "sandgate": own}, indent=1))


if __name__ == "__main__":
    main()
