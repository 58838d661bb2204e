"""`sandgate mcp` driven by the official MCP Python SDK over stdio.

Every tool is called through a real client session; refusals must come back
as tool results with isError and the code, protocol errors as MCPError, and
nothing outside the root may be read or changed. SANDGATE_BIN names the
binary under test.
"""

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

SECRET = "TOP-SECRET-OUTSIDE"

POLICY = """security_mode = "restricted"

[fs]
read_roots = ["srv/app"]
write_root = "srv/app"
allow_overwrite = true
deny_write = [".github/**", "Cargo.lock", "secrets.txt"]
"""


def build(tmp: Path) -> Path:
    app = tmp / "srv/app"
    (app / "src").mkdir(parents=True)
    (app / ".git").mkdir()
    (app / ".github/workflows").mkdir(parents=True)
    sec = tmp / "srv/app-secrets"
    sec.mkdir(parents=True)
    (sec / "key").write_text(SECRET + "\n")
    (app / "a.txt").write_text("line 1\nline 2\nline 3\nline 4\n")
    (app / "src/lib.rs").write_text("fn alpha() {}\nfn beta() {}\n")
    (app / "src/big.txt").write_text("x" * 5000)
    (app / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    (app / "blob.bin").write_bytes(b"\x00\x01\x02")
    (app / ".git/config").write_text("[core]\n")
    (app / ".github/workflows/ci.yml").write_text("on: push\n")
    (app / "Cargo.lock").write_text("# lock\n")
    (app / "secrets.txt").write_text("in-root but protected\n")
    os.symlink("../app-secrets", app / "rel_out")
    os.symlink(str(sec / "key"), app / "abs_out")
    os.symlink("../app-secrets/new-file", app / "dangling")
    (tmp / "policy.toml").write_text(POLICY)
    return app


@pytest.fixture
def tree(tmp_path):
    tmp = tmp_path.resolve()
    app = build(tmp)
    return tmp, app


def outside_unchanged(tmp: Path):
    sec = tmp / "srv/app-secrets"
    assert sorted(os.listdir(sec)) == ["key"], "nothing may appear outside the root"
    assert (sec / "key").read_text() == SECRET + "\n"


async def with_session(tmp: Path, body, args=None, **session_kw):
    args = args or ["mcp", "--policy", str(tmp / "policy.toml"), "--audit", str(tmp / "audit.jsonl")]
    params = StdioServerParameters(command=os.environ["SANDGATE_BIN"], args=args, cwd=str(tmp))
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w, **session_kw) as s:
            await s.initialize()
            return await body(s)


def run(tmp, body, **kw):
    return asyncio.run(with_session(tmp, body, **kw))


def text_of(res) -> str:
    return "\n".join(c.text for c in res.content if getattr(c, "type", "") == "text")


# sandgate's own tools; every other tool declares the reference server's
# output schema and answers structured content (which the SDK validates
# against that schema on every call).
OWN_TOOLS = {"grep", "exec", "fetch"}


async def ok(s, name, args):
    res = await s.call_tool(name, args)
    assert not res.is_error, f"{name} {args}: {text_of(res)}"
    if name == "exec":
        # stdout and stderr apart, the text blocks after the exit code's.
        sc = res.structured_content
        assert isinstance(sc["exit_code"], int), sc
        blocks = [c.text for c in res.content]
        assert blocks[1].split("\n", 1)[1] == sc["stdout"], (blocks, sc)
        assert blocks[2].split("\n", 1)[1] == sc["stderr"], (blocks, sc)
    elif name in OWN_TOOLS:
        assert res.structured_content is None
    else:
        assert res.structured_content == {"content": text_of(res)}
    return text_of(res)


async def refused(s, name, args, code):
    res = await s.call_tool(name, args)
    t = text_of(res)
    assert res.is_error, f"{name} {args} should be refused, got: {t}"
    assert t.startswith(code), f"{name} {args}: want {code}, got: {t}"
    assert SECRET not in t
    assert "app-secrets" not in t, f"a refusal named a host path outside the root: {t}"
    return t


def test_lists_tools_with_schemas_and_annotations(tree):
    tmp, _ = tree

    async def body(s):
        tools = {t.name: t for t in (await s.list_tools()).tools}
        want = {
            "read_text_file", "read_media_file", "read_multiple_files", "write_file", "edit_file",
            "create_directory", "list_directory", "list_directory_with_sizes", "directory_tree",
            "move_file", "search_files", "get_file_info", "list_allowed_directories", "grep",
        }
        # exec and fetch are not granted by this policy.
        assert set(tools) == want
        for t in tools.values():
            a = t.annotations
            assert a is not None and a.read_only_hint is not None and a.open_world_hint is False
            assert t.input_schema["type"] == "object"
            if t.name in OWN_TOOLS:
                assert t.output_schema is None
            else:
                assert t.output_schema["required"] == ["content"], t.name
        assert tools["read_text_file"].annotations.read_only_hint is True
        assert tools["write_file"].annotations.destructive_hint is True
        assert set(tools["edit_file"].input_schema["properties"]) == {"path", "edits", "dryRun"}
        assert "excludePatterns" in tools["search_files"].input_schema["properties"]
        assert "sortBy" in tools["list_directory_with_sizes"].input_schema["properties"]

    run(tmp, body)


def test_every_tool_answers(tree):
    tmp, app = tree

    async def body(s):
        assert await ok(s, "read_text_file", {"path": "a.txt"}) == "line 1\nline 2\nline 3\nline 4\n"
        assert await ok(s, "read_text_file", {"path": str(app / "a.txt"), "head": 2}) == "line 1\nline 2\n"
        assert await ok(s, "read_text_file", {"path": "a.txt", "tail": 1}) == "line 4\n"
        await refused(s, "read_text_file", {"path": "a.txt", "head": 1, "tail": 1}, "E_REQUEST")

        media = await s.call_tool("read_media_file", {"path": "pic.png"})
        assert not media.is_error and media.content[0].type == "image"
        assert media.content[0].mime_type == "image/png"
        blob = await s.call_tool("read_media_file", {"path": "blob.bin"})
        assert blob.content[0].type == "resource"
        # The structured form carries the same data, typed as the reference
        # server types it.
        assert media.structured_content["content"] == [
            {"type": "image", "data": media.content[0].data, "mimeType": "image/png"}
        ]
        assert blob.structured_content["content"][0]["type"] == "blob"
        assert blob.structured_content["content"][0]["data"] == blob.content[0].resource.blob

        multi = await ok(s, "read_multiple_files", {"paths": ["a.txt", "missing.txt", "src/lib.rs"]})
        assert "line 1" in multi and "fn alpha" in multi and "missing.txt: Error - E_NOT_FOUND" in multi

        await ok(s, "write_file", {"path": "new/file.txt", "content": "fresh\n"})
        assert (app / "new/file.txt").read_text() == "fresh\n"
        await ok(s, "write_file", {"path": "new/file.txt", "content": "again\n"})
        assert (app / "new/file.txt").read_text() == "again\n"

        diff = await ok(s, "edit_file", {"path": "a.txt", "edits": [{"oldText": "line 2", "newText": "LINE TWO"}], "dryRun": True})
        assert "-line 2" in diff and "+LINE TWO" in diff
        assert "line 2" in (app / "a.txt").read_text()
        await ok(s, "edit_file", {"path": "a.txt", "edits": [{"oldText": "line 2", "newText": "LINE TWO"}, {"oldText": "line 3", "newText": "LINE THREE"}]})
        assert (app / "a.txt").read_text() == "line 1\nLINE TWO\nLINE THREE\nline 4\n"
        # One edit failing leaves the file as it was.
        await refused(s, "edit_file", {"path": "a.txt", "edits": [{"oldText": "line 1", "newText": "x"}, {"oldText": "nope", "newText": "y"}]}, "E_EDIT_NO_MATCH")
        assert (app / "a.txt").read_text().startswith("line 1\n")

        await ok(s, "create_directory", {"path": "d1/d2/d3"})
        await ok(s, "create_directory", {"path": "d1/d2"})
        assert (app / "d1/d2/d3").is_dir()

        listing = await ok(s, "list_directory", {"path": "."})
        assert "[DIR] src" in listing and "[FILE] a.txt" in listing and "[LINK] rel_out" in listing
        sized = await ok(s, "list_directory_with_sizes", {"path": "src", "sortBy": "size"})
        assert sized.index("big.txt") < sized.index("lib.rs") and "Total: 2 files" in sized

        tree_json = await ok(s, "directory_tree", {"path": "src", "excludePatterns": ["big.txt"]})
        assert '"lib.rs"' in tree_json and "big.txt" not in tree_json

        await ok(s, "move_file", {"source": "new/file.txt", "destination": "new/moved.txt"})
        assert (app / "new/moved.txt").exists() and not (app / "new/file.txt").exists()

        found = await ok(s, "search_files", {"path": ".", "pattern": "**/*.rs"})
        assert found.splitlines() == ["src/lib.rs"]
        assert await ok(s, "search_files", {"path": "src", "pattern": "*.txt", "excludePatterns": ["big*"]}) == "No matches found"

        info = await ok(s, "get_file_info", {"path": "a.txt"})
        assert "type: file" in info

        allowed = await ok(s, "list_allowed_directories", {})
        assert str(app) in allowed

        hits = await ok(s, "grep", {"pattern": "ALPHA", "case_insensitive": True, "glob": "*.rs"})
        assert hits.strip() == "src/lib.rs:1:fn alpha() {}"
        files = await ok(s, "grep", {"pattern": "fn", "mode": "files"})
        # blob.bin holds a NUL: passed over, and the answer says so.
        assert files.splitlines() == [
            "src/lib.rs",
            "[1 binary file(s) (a NUL in the first 8 KiB) were passed over without being searched]",
        ]
        ctx = await ok(s, "grep", {"pattern": "beta", "before": 1, "path": "src/lib.rs"})
        assert "src/lib.rs-1-fn alpha() {}" in ctx and "src/lib.rs:2:fn beta() {}" in ctx

    run(tmp, body)
    outside_unchanged(tmp)
    audit = (tmp / "audit.jsonl").read_text().splitlines()
    assert any('"op":"write"' in l and '"outcome":"OK"' in l for l in audit)


def test_protocol_errors_are_jsonrpc_errors(tree):
    tmp, _ = tree

    async def body(s):
        with pytest.raises(MCPError):
            await s.call_tool("no_such_tool", {})
        with pytest.raises(MCPError):
            await s.call_tool("read_text_file", {"path": 3})
        with pytest.raises(MCPError):
            await s.call_tool("read_text_file", {"path": "a.txt", "unknown": 1})
        # exec is not granted, so it is not a tool here.
        with pytest.raises(MCPError):
            await s.call_tool("exec", {"command": "true"})
        # The session goes on.
        await s.send_ping()
        assert await ok(s, "read_text_file", {"path": "a.txt", "head": 1}) == "line 1\n"

    run(tmp, body)


def test_attack_symlinks_prefix_siblings_and_dotdot(tree):
    tmp, app = tree

    async def body(s):
        for p in ["rel_out/key", "abs_out", str(app / "rel_out/key"), str(app / "abs_out")]:
            await refused(s, "read_text_file", {"path": p}, "E_PATH_ESCAPE")
        await refused(s, "list_directory", {"path": "rel_out"}, "E_PATH_ESCAPE")
        # A sibling sharing the root's name as a prefix is outside.
        sibling = str(tmp / "srv/app-secrets/key")
        await refused(s, "read_text_file", {"path": sibling}, "E_PATH_ESCAPE")
        await refused(s, "write_file", {"path": str(tmp / "srv/app-secrets/new"), "content": "x"}, "E_PATH_ESCAPE")
        # `..` in every position.
        for p in ["..", "../app-secrets/key", "src/../../app-secrets/key", "src/..", "a.txt/..",
                  str(app) + "/../app-secrets/key", str(app) + "/src/../../app-secrets/key"]:
            await refused(s, "read_text_file", {"path": p}, "E_PATH_INVALID")
            await refused(s, "write_file", {"path": p, "content": "x"}, "E_PATH_INVALID")
        await refused(s, "move_file", {"source": "a.txt", "destination": "../app-secrets/moved"}, "E_PATH_INVALID")
        multi = await ok(s, "read_multiple_files", {"paths": ["rel_out/key", sibling, "a.txt"]})
        assert SECRET not in multi and "line 1" in multi
        for tool, args in [("grep", {"pattern": "SECRET"}), ("search_files", {"path": ".", "pattern": "**/key"}),
                           ("directory_tree", {"path": "."})]:
            out = await ok(s, tool, args)
            assert SECRET not in out and "key" not in out.replace("keys", "")

    run(tmp, body)
    outside_unchanged(tmp)


def test_attack_dangling_symlink_and_hard_link(tree):
    tmp, app = tree
    os.link(tmp / "srv/app-secrets/key", app / "hard")

    async def body(s):
        await refused(s, "write_file", {"path": "dangling", "content": "x"}, "E_")
        # A hard link to an outside file: refused, and a dry run shows nothing.
        await refused(s, "edit_file", {"path": "hard", "edits": [{"oldText": "TOP", "newText": "x"}], "dryRun": True}, "E_HARDLINK")
        await refused(s, "edit_file", {"path": "hard", "edits": [{"oldText": "TOP", "newText": "x"}]}, "E_HARDLINK")
        await refused(s, "write_file", {"path": "hard", "content": "x"}, "E_HARDLINK")

    run(tmp, body)
    outside_unchanged(tmp)


def test_attack_case_and_unicode_spellings_of_protected_names(tree):
    tmp, app = tree

    async def body(s):
        for p in [".git/config", ".GIT/config", ".Git/hooks/pre-commit", ".github/workflows/ci.yml",
                  ".GitHub/workflows/x.yml", "Cargo.lock", "CARGO.LOCK", "cargo.lock", "sub/Cargo.lock",
                  "secrets.txt", "SECRETS.TXT", "\u017fecrets.txt", "se\u0441rets.txt".replace("\u0441", "c")]:
            await refused(s, "write_file", {"path": p, "content": "x"}, "E_FS_PROTECTED")
        await refused(s, "edit_file", {"path": ".git/config", "edits": [{"oldText": "core", "newText": "x"}], "dryRun": True}, "E_FS_PROTECTED")
        await refused(s, "move_file", {"source": "a.txt", "destination": ".GIT/a"}, "E_FS_PROTECTED")
        await refused(s, "move_file", {"source": ".github", "destination": "gh"}, "E_FS_PROTECTED")

    run(tmp, body)
    assert (app / ".git/config").read_text() == "[core]\n"
    assert not (app / ".GIT").exists() and not (app / "\u017fecrets.txt").exists()


def test_client_roots_never_widen(tree):
    tmp, _ = tree
    import mcp_types as types

    async def roots(_ctx):
        return types.ListRootsResult(roots=[types.Root(uri=(tmp / "srv/app-secrets").as_uri())])

    async def body(s):
        await refused(s, "read_text_file", {"path": str(tmp / "srv/app-secrets/key")}, "E_PATH_ESCAPE")
        await refused(s, "list_directory", {"path": str(tmp / "srv/app-secrets")}, "E_PATH_ESCAPE")
        # A root outside everything granted adds nothing: the intersection
        # is empty, so even the policy's own files are refused.
        await refused(s, "read_text_file", {"path": "a.txt"}, "E_DENIED")

    run(tmp, body, list_roots_callback=roots)
    outside_unchanged(tmp)


def test_client_roots_narrow_the_policy(tree):
    tmp, app = tree
    import mcp_types as types

    async def roots(_ctx):
        return types.ListRootsResult(roots=[types.Root(uri=(app / "src").as_uri())])

    async def body(s):
        assert "fn alpha" in await ok(s, "read_text_file", {"path": "src/lib.rs"})
        assert "fn alpha" in await ok(s, "read_text_file", {"path": str(app / "src/lib.rs")})
        await ok(s, "write_file", {"path": "src/new.rs", "content": "x"})
        await refused(s, "read_text_file", {"path": "a.txt"}, "E_DENIED")
        await refused(s, "write_file", {"path": str(app / "outside-src.txt"), "content": "x"}, "E_DENIED")
        allowed = (await ok(s, "list_allowed_directories", {})).splitlines()
        assert f"{app / 'src'} (read, write)" in allowed, allowed
        assert not any(line.startswith(f"{app} ") for line in allowed), allowed

    run(tmp, body, list_roots_callback=roots)
    assert not (app / "outside-src.txt").exists()


def test_client_roots_stay_when_asking_again_fails(tree):
    """A client that says its roots changed and then fails to list them
    keeps the roots it had: the session never widens to the policy's."""
    tmp, app = tree
    import mcp_types as types
    asked = []

    async def roots(_ctx):
        asked.append(1)
        if len(asked) > 1:
            raise RuntimeError("the roots cannot be listed now")
        return types.ListRootsResult(roots=[types.Root(uri=(app / "src").as_uri())])

    async def body(s):
        await refused(s, "read_text_file", {"path": "a.txt"}, "E_DENIED")
        await s.send_roots_list_changed()
        for _ in range(100):
            if len(asked) > 1:
                break
            await asyncio.sleep(0.02)
        assert len(asked) == 2
        await asyncio.sleep(0.2)
        await refused(s, "read_text_file", {"path": "a.txt"}, "E_DENIED")
        await refused(s, "get_file_info", {"path": str(app / "a.txt")}, "E_DENIED")
        assert "fn alpha" in await ok(s, "read_text_file", {"path": "src/lib.rs"})

    run(tmp, body, list_roots_callback=roots)


def test_client_roots_hold_through_symlinks(tree):
    """A client root narrower than the policy's holds for what a name
    resolves to, not only for how it is spelled: links inside it that lead
    elsewhere in the policy's root are refused, links that stay inside it
    work."""
    tmp, app = tree
    import mcp_types as types

    os.symlink("..", app / "src/up")
    os.symlink(str(app), app / "src/abs_up")
    os.symlink("../a.txt", app / "src/a_link")
    os.symlink("lib.rs", app / "src/lib_link")
    os.symlink("../nowhere", app / "src/dangling_up")

    async def roots(_ctx):
        return types.ListRootsResult(roots=[types.Root(uri=(app / "src").as_uri())])

    async def body(s):
        for p in ["src/up/a.txt", str(app / "src/up/a.txt"), "src/abs_up/a.txt", "src/a_link",
                  str(app / "src/a_link"), "src/up/src/lib.rs"]:
            await refused(s, "read_text_file", {"path": p}, "E_DENIED")
        await refused(s, "get_file_info", {"path": "src/a_link"}, "E_DENIED")
        await refused(s, "list_directory", {"path": "src/up"}, "E_DENIED")
        await refused(s, "directory_tree", {"path": "src/abs_up"}, "E_DENIED")
        await refused(s, "search_files", {"path": "src/up", "pattern": "*.txt"}, "E_DENIED")
        await refused(s, "grep", {"pattern": "line", "path": "src/up"}, "E_DENIED")
        await refused(s, "write_file", {"path": "src/up/new.txt", "content": "x"}, "E_DENIED")
        await refused(s, "write_file", {"path": "src/a_link", "content": "x"}, "E_DENIED")
        await refused(s, "write_file", {"path": "src/dangling_up", "content": "x"}, "E_DENIED")
        await refused(s, "create_directory", {"path": "src/up/made"}, "E_DENIED")
        await refused(s, "edit_file", {"path": "src/a_link", "edits": [{"oldText": "line 1", "newText": "x"}]},
                      "E_DENIED")
        await refused(s, "move_file", {"source": "src/up/a.txt", "destination": "src/moved.txt"}, "E_DENIED")
        # A search with no path would go through the whole root.
        await refused(s, "grep", {"pattern": "line"}, "E_DENIED")
        assert (await ok(s, "grep", {"pattern": "fn", "path": "src", "mode": "files"})).strip() == "src/lib.rs"
        await refused(s, "search_files", {"path": ".", "pattern": "**/*.txt"}, "E_DENIED")
        res = await s.call_tool("read_multiple_files", {"paths": ["src/lib.rs", "src/up/a.txt"]})
        assert "fn alpha" in text_of(res) and "line 1" not in text_of(res)
        # Links that stay inside the client's root, and plain names, work.
        assert "fn alpha" in await ok(s, "read_text_file", {"path": "src/lib_link"})
        assert "fn alpha" in await ok(s, "read_text_file", {"path": str(app / "src/lib.rs")})
        await ok(s, "write_file", {"path": "src/new.rs", "content": "y"})
        await ok(s, "create_directory", {"path": "src/d1/d2"})

    run(tmp, body, list_roots_callback=roots)
    assert (app / "a.txt").read_text().startswith("line 1")
    assert not (app / "new.txt").exists() and not (app / "made").exists() and not (app / "nowhere").exists()
    assert (app / "src/new.rs").read_text() == "y"


def test_client_roots_judge_the_root_that_answers(tmp_path):
    """With several read roots, a relative name is read from the first root
    that holds it; a client root in another granted directory does not let
    that read through."""
    tmp = tmp_path.resolve()
    one, two = tmp / "one", tmp / "two"
    one.mkdir()
    two.mkdir()
    (one / "both.txt").write_text("from one\n")
    (one / "only1.txt").write_text("only one\n")
    (two / "both.txt").write_text("from two\n")
    (two / "only2.txt").write_text("only two\n")
    (one / "d").mkdir()
    (two / "d").mkdir()
    (one / "d/x.txt").write_text("from one\n")
    (two / "d/y.txt").write_text("from two\n")
    import mcp_types as types

    async def roots(_ctx):
        return types.ListRootsResult(roots=[types.Root(uri=two.as_uri())])

    async def body(s):
        assert "only two" in await ok(s, "read_text_file", {"path": "only2.txt"})
        assert "only two" in await ok(s, "read_text_file", {"path": str(two / "only2.txt")})
        await refused(s, "read_text_file", {"path": "only1.txt"}, "E_DENIED")
        await refused(s, "read_text_file", {"path": "both.txt"}, "E_DENIED")
        await refused(s, "get_file_info", {"path": "both.txt"}, "E_DENIED")
        await refused(s, "list_directory", {"path": "."}, "E_DENIED")
        # Writes go to the first directory, the write root: outside the
        # client's root.
        await refused(s, "write_file", {"path": "only2.txt", "content": "x"}, "E_DENIED")
        await refused(s, "grep", {"pattern": "only"}, "E_DENIED")

    run(tmp, body, args=["mcp", str(one), str(two)], list_roots_callback=roots)
    assert sorted(os.listdir(one)) == ["both.txt", "d", "only1.txt"]
    assert (two / "only2.txt").read_text() == "only two\n"

    # A search goes through a directory in every read root that holds it:
    # with the client's root in the first, the second's copy is refused.
    async def first_roots(_ctx):
        return types.ListRootsResult(roots=[types.Root(uri=(one / "d").as_uri())])

    async def searches(s):
        assert "from one" in await ok(s, "read_text_file", {"path": "d/x.txt"})
        for tool, args in [("grep", {"pattern": "from", "path": "d"}),
                           ("search_files", {"path": "d", "pattern": "*.txt"}),
                           ("search_files", {"path": str(one / "d"), "pattern": "*.txt"})]:
            t = await refused(s, tool, args, "E_DENIED")
            assert "from two" not in t and "y.txt" not in t

    run(tmp, searches, args=["mcp", str(one), str(two)], list_roots_callback=first_roots)


def test_attack_path_swapped_while_calls_run(tree):
    tmp, app = tree
    stop = threading.Event()
    swap = app / "swap"
    swap.mkdir()
    (swap / "key").write_text("inside\n")

    def swapper():
        inside = app / "swap_dir"
        link = app / "swap_link"
        os.symlink(str(tmp / "srv/app-secrets"), link)
        while not stop.is_set():
            # A write may recreate `swap` as a directory between two renames;
            # then this round is skipped.
            try:
                os.rename(swap, inside)
                os.rename(link, swap)
                time.sleep(0)
                os.rename(swap, link)
                os.rename(inside, swap)
            except OSError:
                time.sleep(0)

    t = threading.Thread(target=swapper)
    t.start()

    async def body(s):
        for _ in range(150):
            r = await s.call_tool("read_text_file", {"path": "swap/key"})
            assert SECRET not in text_of(r)
            w = await s.call_tool("write_file", {"path": "swap/planted", "content": "x"})
            assert SECRET not in text_of(w)

    try:
        run(tmp, body)
    finally:
        stop.set()
        t.join()
    outside_unchanged(tmp)


def test_reference_form_through_a_link(tree):
    """A directory named through a link is one directory: listed once, and
    reachable by either spelling."""
    tmp, app = tree
    link = tmp / "app-link"
    os.symlink(app, link)

    async def body(s):
        allowed = (await ok(s, "list_allowed_directories", {})).splitlines()
        assert allowed.count(f"{app} (read, write)") == 1, allowed
        assert "line 1" in await ok(s, "read_text_file", {"path": str(link / "a.txt")})
        assert "line 1" in await ok(s, "read_text_file", {"path": str(app / "a.txt")})

    run(tmp, body, args=["mcp", str(link)])


def test_reference_form_dirs(tree):
    tmp, app = tree

    async def body(s):
        allowed = await ok(s, "list_allowed_directories", {})
        assert str(app) in allowed
        await ok(s, "write_file", {"path": str(app / "via-dirs.txt"), "content": "ok\n"})
        # The restricted form protects .git.
        await refused(s, "write_file", {"path": ".git/config", "content": "x"}, "E_FS_PROTECTED")
        await refused(s, "read_text_file", {"path": str(tmp / "srv/app-secrets/key")}, "E_PATH_ESCAPE")

    run(tmp, body, args=["mcp", str(app)])
    assert (app / "via-dirs.txt").read_text() == "ok\n"
    outside_unchanged(tmp)


def start_http(tmp: Path):
    import re
    import subprocess

    proc = subprocess.Popen(
        [os.environ["SANDGATE_BIN"], "mcp", "--policy", str(tmp / "policy.toml"),
         "--http", "127.0.0.1:0", "--token-file", str(tmp / "token")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    url = None
    for line in proc.stderr:
        m = re.search(r"serving MCP on (http://\S+)", line)
        if m:
            url = m.group(1)
            break
    assert url, "the server did not say where it listens"
    return proc, url


def test_streamable_http_with_the_bearer_token(tree):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    tmp, app = tree
    proc, url = start_http(tmp)
    try:
        token_file = tmp / "token"
        assert oct(token_file.stat().st_mode & 0o777) == "0o600"
        token = token_file.read_text()

        async def session(headers, body):
            async with httpx2.AsyncClient(headers=headers) as http:
                async with streamable_http_client(url, http_client=http) as (r, w):
                    async with ClientSession(r, w) as s:
                        await s.initialize()
                        return await body(s)

        async def body(s):
            assert await ok(s, "read_text_file", {"path": "a.txt", "head": 1}) == "line 1\n"
            await ok(s, "write_file", {"path": "via-http.txt", "content": "h\n"})
            await refused(s, "read_text_file", {"path": str(tmp / "srv/app-secrets/key")}, "E_PATH_ESCAPE")
            await refused(s, "write_file", {"path": ".git/config", "content": "x"}, "E_FS_PROTECTED")

        asyncio.run(session({"Authorization": f"Bearer {token}"}, body))
        assert (app / "via-http.txt").read_text() == "h\n"

        # Without the token, or with another one, nothing is served.
        for headers in [{}, {"Authorization": "Bearer " + "0" * 64}, {"Authorization": token}]:
            r = httpx2.post(url, headers={**headers, "Accept": "application/json, text/event-stream"},
                            json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert r.status_code == 401, (headers, r.status_code)
        # A page in a browser naming another origin, or a rebinding host name.
        auth = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}}
        assert httpx2.post(url, headers={**auth, "Origin": "http://evil.example"}, json=init).status_code == 403
        assert httpx2.post(url, headers={**auth, "Host": "evil.example"}, json=init).status_code == 403
    finally:
        proc.kill()
        proc.wait()
    outside_unchanged(tmp)


def test_head_and_tail_past_two_thousand_lines(tmp_path):
    # The reference server takes any head or tail; the sandbox's ranged read
    # serves 2,000 lines at most, so longer ones read the whole file, within
    # max_read_bytes.
    tmp = tmp_path.resolve()
    ws = tmp / "ws"
    ws.mkdir()
    lines = [f"{i}\n" for i in range(1, 5001)]
    (ws / "n.txt").write_text("".join(lines))
    (ws / "open.txt").write_text("".join(lines[:2999]) + "last, no newline")
    (ws / "big.txt").write_text("y\n" * 40_000)
    (tmp / "policy.toml").write_text(
        f'[fs]\nread_roots = ["{ws}"]\nwrite_root = "{ws}"\nmax_read_bytes = 65536\n'
    )

    async def body(s):
        assert await ok(s, "read_text_file", {"path": "n.txt", "head": 2000}) == "".join(lines[:2000])
        assert await ok(s, "read_text_file", {"path": "n.txt", "head": 2500}) == "".join(lines[:2500])
        assert await ok(s, "read_text_file", {"path": "n.txt", "tail": 3000}) == "".join(lines[2000:])
        assert await ok(s, "read_text_file", {"path": "n.txt", "head": 10**12}) == "".join(lines)
        assert await ok(s, "read_text_file", {"path": "n.txt", "tail": 10**12}) == "".join(lines)
        assert await ok(s, "read_text_file", {"path": "open.txt", "tail": 2001}) == (
            "".join(lines[999:2999]) + "last, no newline"
        )
        assert await ok(s, "read_text_file", {"path": "open.txt", "head": 3000}) == (
            "".join(lines[:2999]) + "last, no newline"
        )
        # Short ones still stream: a big file's first lines come back.
        assert await ok(s, "read_text_file", {"path": "big.txt", "head": 3}) == "y\ny\ny\n"
        # A long one needs the whole file within the cap, and says so.
        t = await refused(s, "read_text_file", {"path": "big.txt", "head": 2001}, "E_TOO_LARGE")
        assert "2000" in t or "2,000" in t, t

    asyncio.run(with_session(tmp, body, args=["mcp", "--policy", str(tmp / "policy.toml")]))


def test_read_multiple_files_answers_at_most_one_reads_worth(tmp_path):
    # One call naming the same big file thousands of times would otherwise
    # build an answer of thousands of times max_read_bytes in the server's
    # memory. Files past the cap are refused one by one; the rest still come.
    tmp = tmp_path.resolve()
    ws = tmp / "ws"
    ws.mkdir()
    (ws / "six.txt").write_text("6" * 600)
    (ws / "small.txt").write_text("tiny\n")
    (tmp / "policy.toml").write_text(
        f'[fs]\nread_roots = ["{ws}"]\nwrite_root = "{ws}"\nmax_read_bytes = 1000\n'
    )

    async def body(s):
        t = await ok(s, "read_multiple_files", {"paths": ["six.txt", "six.txt", "small.txt", "missing.txt"]})
        parts = t.split("\n---\n")
        assert parts[0] == "six.txt:\n" + "6" * 600 + "\n", parts[0]
        assert parts[1].startswith("six.txt: Error - E_TOO_LARGE"), parts[1]
        assert "max_read_bytes" in parts[1], parts[1]
        assert parts[2] == "small.txt:\ntiny\n\n", parts[2]
        assert parts[3].startswith("missing.txt: Error - E_NOT_FOUND"), parts[3]
        # A flood stays within the cap (plus one refusal line per name).
        t = await ok(s, "read_multiple_files", {"paths": ["six.txt"] * 20_000})
        assert t.count("6" * 600) == 1
        assert len(t) < 1000 + 20_000 * 200, len(t)

    asyncio.run(with_session(tmp, body, args=["mcp", "--policy", str(tmp / "policy.toml")]))


def test_client_roots_narrow_the_shell_too(tmp_path):
    # A client's roots narrow exec as they narrow the file tools: the command
    # reaches, of the granted directories, only what lies beneath the client's
    # roots (a second Landlock layer), so a shell cannot write or read what
    # write_file and read_text_file would refuse.
    import mcp_types as types

    tmp = tmp_path.resolve()
    ws = tmp / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "top.txt").write_text("top of the workspace\n")
    (ws / "src/in.txt").write_text("inside the client's root\n")
    (tmp / "policy.toml").write_text(
        f'[fs]\nread_roots = ["{ws}"]\nwrite_root = "{ws}"\nallow_overwrite = true\n'
        '[exec]\nenabled = true\nshell = "/bin/sh"\nconfine = "best_effort"\n'
    )

    async def roots(_ctx):
        return types.ListRootsResult(roots=[types.Root(uri=(ws / "src").as_uri())])

    script = (
        "cat in.txt; echo made > made.txt && echo made-ok; "
        f"echo out > {ws}/out.txt || echo out-refused; "
        f"cat {ws}/top.txt || echo top-refused"
    )

    async def narrowed(s):
        t = await ok(s, "exec", {"command": script, "cwd": "src"})
        assert "inside the client's root" in t, t
        assert "made-ok" in t, t
        assert "out-refused" in t and "top-refused" in t, t
        assert "top of the workspace" not in t, t
        # The cwd must lie inside the client's roots; by default it is the
        # first of them.
        await refused(s, "exec", {"command": "true", "cwd": "."}, "E_DENIED")
        t = await ok(s, "exec", {"command": "cat in.txt && pwd"})
        assert "inside the client's root" in t and f"{ws}/src" in t, t

    asyncio.run(
        with_session(
            tmp, narrowed, args=["mcp", "--policy", str(tmp / "policy.toml")], list_roots_callback=roots
        )
    )
    assert (ws / "src/made.txt").read_text() == "made\n"
    assert not (ws / "out.txt").exists()

    # Without client roots the policy's whole write root applies.
    async def whole(s):
        t = await ok(s, "exec", {"command": f"echo out > {ws}/out.txt && cat {ws}/top.txt"})
        assert "top of the workspace" in t, t

    asyncio.run(with_session(tmp, whole, args=["mcp", "--policy", str(tmp / "policy.toml")]))
    assert (ws / "out.txt").read_text() == "out\n"


def test_a_client_root_a_command_swaps_for_a_link_gives_nothing(tmp_path):
    # A client root is where it led when the client listed it: a command
    # narrowed to an outer root that replaces an inner root with a link
    # (here to the whole workspace) must not widen the next command or the
    # file tools. A root that was a link when listed keeps working.
    import mcp_types as types

    tmp = tmp_path.resolve()
    ws = tmp / "ws"
    (ws / "a/x").mkdir(parents=True)
    (ws / "lib").mkdir()
    (ws / "lib/in.txt").write_text("in lib\n")
    os.symlink("lib", ws / "via")
    (ws / "top.txt").write_text(SECRET + "\n")
    (tmp / "policy.toml").write_text(
        f'[fs]\nread_roots = ["{ws}"]\nwrite_root = "{ws}"\nallow_overwrite = true\n'
        '[exec]\nenabled = true\nshell = "/bin/sh"\nconfine = "best_effort"\n'
    )

    async def roots(_ctx):
        return types.ListRootsResult(
            roots=[types.Root(uri=(ws / d).as_uri()) for d in ["a", "a/x", "via"]]
        )

    async def body(s):
        t = await ok(s, "exec", {"command": "rmdir x && ln -s .. x && echo swapped"})
        assert "swapped" in t, t
        t = await ok(s, "exec", {"command": "cat ../top.txt x/top.txt; ls x/"})
        assert SECRET not in t and "top.txt" not in t.split("--- stderr")[0], t
        r = await s.call_tool("read_text_file", {"path": "a/x/top.txt"})
        assert r.is_error and SECRET not in text_of(r), text_of(r)
        # The root listed through a link leads where it led then.
        assert "in lib" in await ok(s, "read_text_file", {"path": "via/in.txt"})
        assert "in lib" in await ok(s, "exec", {"command": f"cat {ws}/lib/in.txt", "cwd": "via"})

    asyncio.run(
        with_session(
            tmp, body, args=["mcp", "--policy", str(tmp / "policy.toml")], list_roots_callback=roots
        )
    )


def test_a_root_listed_again_after_a_command_swapped_it_still_gives_nothing(tmp_path):
    # When the client lists its roots again (roots/list_changed), a root it
    # had listed before keeps the place it led to then: a command that
    # swapped it for a link cannot widen the session by waiting for the
    # next list.
    import mcp_types as types

    tmp = tmp_path.resolve()
    ws = tmp / "ws"
    (ws / "a/x").mkdir(parents=True)
    (ws / "top.txt").write_text(SECRET + "\n")
    (tmp / "policy.toml").write_text(
        f'[fs]\nread_roots = ["{ws}"]\nwrite_root = "{ws}"\nallow_overwrite = true\n'
        '[exec]\nenabled = true\nshell = "/bin/sh"\nconfine = "best_effort"\n'
    )
    asked = []

    async def roots(_ctx):
        asked.append(1)
        return types.ListRootsResult(roots=[types.Root(uri=(ws / d).as_uri()) for d in ["a", "a/x"]])

    async def body(s):
        t = await ok(s, "exec", {"command": "rmdir x && ln -s .. x && echo swapped"})
        assert "swapped" in t, t
        await s.send_roots_list_changed()
        for _ in range(100):
            if len(asked) > 1:
                break
            await asyncio.sleep(0.02)
        assert len(asked) == 2
        await asyncio.sleep(0.2)
        r = await s.call_tool("read_text_file", {"path": "a/x/top.txt"})
        assert r.is_error and SECRET not in text_of(r), text_of(r)
        t = await ok(s, "exec", {"command": "cat x/top.txt ../top.txt; ls x/"})
        assert SECRET not in t and "top.txt" not in t.split("--- stderr")[0], t
        # The outer root still works.
        await ok(s, "write_file", {"path": "a/still.txt", "content": "ok"})

    asyncio.run(
        with_session(
            tmp, body, args=["mcp", "--policy", str(tmp / "policy.toml")], list_roots_callback=roots
        )
    )
    assert (ws / "a/still.txt").read_text() == "ok"
