"""The shared vectors (tests/vectors/*.json, format in that directory's
README.md), one pytest case per vector case, run through the Python API:
Policy.load, Sandbox.from_policy, an Executor from the same policy for
`exec` and a Fetcher for `fetch`, each request op mapped to its method and
the result converted to the docs/reference/json-endpoint.md answer shape before matching."""

from __future__ import annotations

import base64
import json
import os
import tempfile
from pathlib import Path

import pytest

import sandgate
from sandgate import Executor, Fetcher, Policy, Sandbox, SandgateError

VECTORS = Path(__file__).resolve().parents[3] / "tests" / "vectors"

#: Cases skipped by name, with the reason (see README "Deliberate
#: differences"). None: only `wire` cases and wire steps are skipped.
SKIP: dict[str, str] = {}


def _load_cases():
    out = []
    for f in sorted(VECTORS.glob("*.json")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        for c in doc["cases"]:
            out.append(pytest.param(c, id=f"{f.stem}:{c['name']}"))
    return out


CASES = _load_cases()


# ---------------------------------------------------------------------------
# Trees


def _expand(text: str, case_dir: str) -> str:
    return text.replace("{case_dir}", case_dir)


def build(case: dict, d: Path) -> None:
    for e in case.get("tree", []):
        p = d / e["path"]
        p.parent.mkdir(parents=True, exist_ok=True)
        if "file" in e:
            p.write_bytes(e["file"].encode("utf-8"))
        elif "file_base64" in e:
            p.write_bytes(base64.b64decode(e["file_base64"], validate=True))
        elif "dir" in e:
            p.mkdir(parents=True, exist_ok=True)
        elif "symlink" in e:
            os.symlink(_expand(e["symlink"], str(d)), p)
        elif "hardlink" in e:
            os.link(d / e["hardlink"], p)
        else:
            raise AssertionError(f"tree entry without a kind: {e}")
        if "mode" in e:
            os.chmod(p, int(e["mode"], 8))
    (d / "policy.toml").write_bytes(_expand(case["policy"], str(d)).encode("utf-8"))


def check_tree_after(case: dict, d: Path) -> list[str]:
    out = []
    for e in case.get("tree_after", []):
        rel = e["path"]
        p = d / rel
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            st = None
        if e.get("absent"):
            if st is not None:
                out.append(f"tree_after {rel}: must not exist")
            continue
        if st is None:
            out.append(f"tree_after {rel}: missing")
            continue
        import stat as S

        want = None
        if "file" in e:
            want = e["file"].encode("utf-8")
        elif "file_base64" in e:
            want = base64.b64decode(e["file_base64"])
        if want is not None:
            if not S.S_ISREG(st.st_mode):
                out.append(f"tree_after {rel}: must be a regular file")
            elif p.read_bytes() != want:
                out.append(f"tree_after {rel}: content {p.read_bytes()!r}, want {want!r}")
        elif e.get("dir"):
            if not S.S_ISDIR(st.st_mode):
                out.append(f"tree_after {rel}: must be a directory")
            elif "entries" in e and sorted(os.listdir(p)) != sorted(e["entries"]):
                out.append(f"tree_after {rel}: entries {sorted(os.listdir(p))}, want {sorted(e['entries'])}")
        elif "symlink" in e:
            w = _expand(e["symlink"], str(d))
            if not S.S_ISLNK(st.st_mode):
                out.append(f"tree_after {rel}: must be a symlink")
            elif os.readlink(p) != w:
                out.append(f"tree_after {rel}: symlink to {os.readlink(p)!r}, want {w!r}")
        elif "hardlink" in e:
            o = os.lstat(d / e["hardlink"])
            if (o.st_ino, o.st_dev) != (st.st_ino, st.st_dev):
                out.append(f"tree_after {rel}: must be the same file as {e['hardlink']}")
        if "mode" in e and (st.st_mode & 0o7777) != int(e["mode"], 8):
            out.append(f"tree_after {rel}: mode {st.st_mode & 0o7777:04o}, want {e['mode']}")
    return out


# ---------------------------------------------------------------------------
# Requests -> API calls -> JSON endpoint answers


def _put_content(out: dict, key: str, data: bytes) -> None:
    try:
        out[key] = data.decode("utf-8")
    except UnicodeDecodeError:
        out[f"{key}_base64"] = base64.b64encode(data).decode("ascii")


def error_answer(e: SandgateError) -> dict:
    err = {"code": e.code, "message": e.message}
    for k in ("path", "pattern", "key", "rule"):
        v = getattr(e, k)
        if v is not None:
            err[k] = v
    if e.hops is not None:
        err["hops"] = [h.as_dict() for h in e.hops]
    return {"ok": False, "error": err}


class Session:
    """What ToolSession::from_policy builds: an executor, then a sandbox,
    and the summary the `summary` op answers."""

    def __init__(self, policy: Policy) -> None:
        self.summary = policy.summary()
        self.executor = Executor(policy)
        try:
            self.sandbox = Sandbox.from_policy(policy)
        except BaseException:
            self.executor.close()
            raise
        self.fetcher = Fetcher(policy)

    def close(self) -> None:
        self.fetcher.close()
        self.sandbox.close()
        self.executor.close()

    def answer(self, req: dict) -> dict:
        try:
            out = self.dispatch(dict(req))
        except SandgateError as e:
            return error_answer(e)
        out["ok"] = True
        return out

    def dispatch(self, r: dict) -> dict:
        sb, op, out = self.sandbox, r.pop("op"), {}
        if op == "summary":
            out["summary"] = self.summary
        elif op == "read":
            path = r["path"]
            if "offset" not in r and "limit" not in r:
                data = sb.read(path)
                out["size"] = len(data)
                _put_content(out, "content", data)
            else:
                offset = r.get("offset", 1)
                limit = r.get("limit", sandgate.MAX_RANGE_LINES)
                res = sb.read_lines(path, offset, limit)
                out.update(
                    size=len(res.content),
                    offset=res.offset,
                    limit=limit,
                    lines=res.lines,
                    total_lines=res.total_lines,
                    truncated=res.truncated,
                )
                _put_content(out, "content", res.content)
        elif op == "write":
            if "content" in r:
                data = r["content"]
            else:
                data = base64.b64decode(r["content_base64"], validate=True)
            out["size"] = sb.write(r["path"], data, overwrite=r.get("overwrite", False))
        elif op == "edit":
            out["replacements"] = sb.edit(r["path"], r["old"], r["new"], all=r.get("all", False))
        elif op == "list":
            out["entries"] = [{"name": e.name, "kind": e.kind, "size": e.size} for e in sb.list(r["path"])]
        elif op == "stat":
            out.update(sb.stat(r["path"]).as_dict())
        elif op == "mkdir":
            sb.mkdir(r["path"])
        elif op == "delete":
            sb.delete(r["path"])
        elif op == "rename":
            sb.rename(r["from"], r["to"])
        elif op == "glob":
            out["paths"] = sb.glob(r["pattern"], r.get("path"))
        elif op == "grep":
            ms = sb.grep(r["pattern"], r.get("path"), r.get("max_results"))
            out["matches"] = [
                {
                    "path": m.path,
                    "line": m.line,
                    "text": m.text,
                    **({"text_start": m.text_start} if m.text_start else {}),
                    **({"line_truncated": True} if m.line_truncated else {}),
                }
                for m in ms
            ]
            if ms.binary:
                out["binary"] = ms.binary
        elif op == "exec":
            res = self.executor.exec(r["command"], r.get("cwd"), r.get("timeout_ms"))
            out["exit_code"] = res.exit_code
            _put_content(out, "stdout", res.stdout)
            _put_content(out, "stderr", res.stderr)
            out.update(
                truncated=res.truncated,
                timed_out=res.timed_out,
                aborted=res.aborted,
                confined=res.confinement,
                env_names_digest=res.env_names_digest,
                duration_ms=res.duration_ms,
            )
        elif op == "fetch":
            body = r.get("body")
            if "body_base64" in r:
                body = base64.b64decode(r["body_base64"], validate=True)
            res = self.fetcher.fetch(
                r["url"],
                method=r.get("method"),
                headers=r.get("headers"),
                body=body,
                timeout_ms=r.get("timeout_ms"),
                max_bytes=r.get("max_bytes"),
            )
            out.update(status=res.status, headers=res.headers)
            _put_content(out, "body", res.body)
            out.update(truncated=res.truncated, hops=[h.as_dict() for h in res.hops])
        else:
            raise AssertionError(f"op {op!r} has no mapping")
        return out


# ---------------------------------------------------------------------------
# Matching


def matches(expected, actual, at: str, out: list[str]) -> None:
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k, ev in expected.items():
            if k not in actual:
                out.append(f"{at}.{k}: missing, want {ev!r}")
            else:
                matches(ev, actual[k], f"{at}.{k}", out)
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            out.append(f"{at}: {len(actual)} elements, want {len(expected)}: {actual!r}")
            return
        for i, (e, a) in enumerate(zip(expected, actual)):
            matches(e, a, f"{at}[{i}]", out)
    else:
        # JSON equality: bools are not numbers, 3 == 3.0.
        same = expected == actual and (isinstance(expected, bool) == isinstance(actual, bool))
        if not same:
            out.append(f"{at}: {actual!r}, want {expected!r}")


def check_answer(expect: dict, answer: dict) -> list[str]:
    want_ok = expect["ok"]
    if answer.get("ok") is not want_ok:
        return [f"want ok={want_ok}, got {answer!r}"]
    out: list[str] = []
    if want_ok:
        fields = {k: v for k, v in expect.items() if k != "ok"}
        matches(fields, answer, "answer", out)
        if "error" in answer:
            out.append(f"an ok answer carries error: {answer!r}")
    else:
        err = answer["error"]
        for k in ("code", "path", "pattern", "key"):
            if k not in expect:
                continue
            if expect[k] is None:
                if k in err:
                    out.append(f"error.{k}: {err[k]!r}, want none")
            elif err.get(k) != expect[k]:
                out.append(f"error.{k}: {err.get(k)!r}, want {expect[k]!r}")
        if not isinstance(err.get("message"), str):
            out.append("error.message: missing")
        if out:
            out.append(f"  (answer: {answer!r})")
    return out


# ---------------------------------------------------------------------------
# The test


def _skip_reason(case: dict) -> str | None:
    if case.get("wire"):
        return "wire case: about the JSON-lines endpoint only"
    if case["name"] in SKIP:
        return SKIP[case["name"]]
    return None


@pytest.mark.parametrize("case", CASES)
def test_vector(case: dict) -> None:
    reason = _skip_reason(case)
    if reason:
        pytest.skip(reason)
    with tempfile.TemporaryDirectory(prefix="sgpy-") as tmp:
        d = Path(tmp).resolve()
        build(case, d)
        problems = run(case, d)
    assert not problems, "\n".join(problems)


def run(case: dict, d: Path) -> list[str]:
    try:
        policy = Policy.load(d / "policy.toml")
        try:
            session = Session(policy)
        finally:
            policy.close()
        loaded = None
    except SandgateError as e:
        loaded = e
    if "policy_error" in case:
        pe = case["policy_error"]
        if loaded is None:
            session.close()
            return [f"the policy loaded; want it refused with {pe}"]
        out = []
        if loaded.code != pe["code"]:
            out.append(f"policy refused with {loaded.code}, want {pe['code']} ({loaded.message})")
        if "key" in pe and loaded.key != pe["key"]:
            out.append(f"policy refused naming key {loaded.key!r}, want {pe['key']!r} ({loaded.message})")
        return out
    if loaded is not None:
        return [f"the policy was refused: {loaded!r}"]
    host = str(d)
    out: list[str] = []
    try:
        # Every step runs in one session, with the summary computed before
        # the policy handle was freed (sandbox and executor outlive it).
        for i, step in enumerate(case["steps"]):
            if step.get("wire"):
                continue  # expects E_REQUEST and changes nothing
            req = step["request"]
            answer = session.answer(req)
            diffs = check_answer(step["expect"], answer)
            if req["op"] != "summary" and host in json.dumps(answer, ensure_ascii=False):
                diffs.append(f"the answer names a host path: {answer!r}")
            out += [f"step {i} {json.dumps(req, ensure_ascii=False)}: {x}" for x in diffs]
    finally:
        session.close()
    out += check_tree_after(case, d)
    return out
