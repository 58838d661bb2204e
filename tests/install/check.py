"""Fresh-install check of the Python package: a confined read, a refused
escape and a confined command, against the policy given as argv[1]."""

import sys

import sandgate

NOTE = "hello from the workspace\n"
COMMAND = "cat note.txt; cat ../private/secret.txt"


def main(policy_path: str) -> None:
    print(f"python: sandgate {sandgate.version()} from {sandgate.LIBRARY_PATH}")
    policy = sandgate.Policy.load(policy_path)
    with sandgate.Sandbox.from_policy(policy) as sb:
        text = sb.read("note.txt").decode()
        assert text == NOTE, text
        print(f"python: read note.txt -> {text!r}")
        try:
            sb.read("../private/secret.txt")
        except sandgate.SandgateError as e:
            print(f"python: read ../private/secret.txt -> refused {e.code}")
        else:
            raise SystemExit("python: FAIL: a read outside the workspace succeeded")
    with sandgate.Executor(policy) as ex:
        r = ex.exec(COMMAND)
    fs = bool(r.confinement.get("fs"))
    print(f"python: exec {COMMAND!r} -> exit {r.exit_code}, stdout {r.stdout_text!r}, landlock fs {fs}")
    assert r.stdout_text.startswith(NOTE), r.stdout_text
    if fs:
        assert "secret" not in r.stdout_text and r.exit_code != 0, "the shell read outside its roots"
    print("python: ok")


if __name__ == "__main__":
    main(sys.argv[1])
