package sandgate_test

// The capability model of an os.Root-based file toolkit (ordered read
// roots, one write root that grants no reads, byte caps, a two-part
// overwrite rule, an audit callback) and its path contract, as table tests
// against this binding: a host built on that model can swap in sandgate.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

func TestPathContractTable(t *testing.T) {
	d := tmp(t)
	ws := filepath.Join(d, "agent-workspace")
	outside := filepath.Join(d, "outside")
	for _, dir := range []string{ws, outside} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	sb, err := sandgate.NewSandbox(sandgate.WithWriteRoot(ws))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	cases := []struct {
		name string
		want error // nil: allowed
	}{
		{"reports/summary.md", nil},
		{"../secrets.txt", sandgate.ErrPathInvalid},
		{"/etc/passwd", sandgate.ErrPathInvalid},
		{`C:\Windows\win.ini`, sandgate.ErrPathInvalid},
		{"C:x", sandgate.ErrPathInvalid},
		{`\\server\share\x`, sandgate.ErrPathInvalid},
		{"CON", sandgate.ErrPathInvalid},
		{"notes.txt:stream", sandgate.ErrPathInvalid},
		{"a\x00b", sandgate.ErrPathInvalid},
		{"", sandgate.ErrPathInvalid},
		{"out/report.txt", sandgate.ErrPathEscape},
		{".", sandgate.ErrPathInvalid},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, "/", "|"), func(t *testing.T) {
			_, err := sb.Write(c.name, []byte("x"), false)
			if c.want == nil {
				if err != nil {
					t.Fatalf("Write(%q): %v", c.name, err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("Write(%q) = %v, want %v", c.name, err, c.want)
			}
		})
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("something was written outside the root: %v", entries)
	}
}

func TestCapabilitiesFailClosedAndStaySeparate(t *testing.T) {
	d := tmp(t)
	inputs, templates, ws := filepath.Join(d, "inputs"), filepath.Join(d, "templates"), filepath.Join(d, "ws")
	write(t, filepath.Join(inputs, "a.txt"), "input")
	write(t, filepath.Join(templates, "a.txt"), "template")
	write(t, filepath.Join(templates, "t.txt"), "only-template")
	write(t, filepath.Join(ws, "w.txt"), "written")

	none, err := sandgate.NewSandbox()
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	if _, err := none.Read("a.txt"); !errors.Is(err, sandgate.ErrDenied) {
		t.Fatalf("read with nothing granted: %v", err)
	}
	if _, err := none.Write("a.txt", []byte("x"), false); !errors.Is(err, sandgate.ErrDenied) {
		t.Fatalf("write with nothing granted: %v", err)
	}

	var audited []string
	sb, err := sandgate.NewSandbox(
		sandgate.WithReadRoots(inputs, templates),
		sandgate.WithWriteRoot(ws),
		sandgate.WithMaxReadBytes(6),
		sandgate.WithMaxWriteBytes(4),
		sandgate.WithAudit(func(e sandgate.AuditEvent) { audited = append(audited, e.Op+" "+e.Path) }),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// Read roots in order: the first that holds the name wins.
	if b, err := sb.Read("a.txt"); err != nil || string(b) != "input" {
		t.Fatalf("a.txt = %q, %v", b, err)
	}
	if b, err := sb.Read("t.txt"); err == nil || !errors.Is(err, sandgate.ErrTooLarge) {
		t.Fatalf("a 13-byte read under a 6-byte cap = %q, %v", b, err)
	}
	// The write root grants no reads.
	if _, err := sb.Read("w.txt"); !errors.Is(err, sandgate.ErrNotFound) && !errors.Is(err, sandgate.ErrDenied) {
		t.Fatalf("read of a write-root file: %v", err)
	}
	if _, err := sb.Write("big.txt", []byte("12345"), false); !errors.Is(err, sandgate.ErrTooLarge) {
		t.Fatalf("a 5-byte write under a 4-byte cap: %v", err)
	}
	if _, err := sb.Write("ok.txt", []byte("1234"), false); err != nil {
		t.Fatal(err)
	}
	// Audit entries name the root-relative path and never the content.
	joined := strings.Join(audited, "\n")
	if !strings.Contains(joined, "write ok.txt") || strings.Contains(joined, "1234") {
		t.Fatalf("audit: %q", joined)
	}
}

func TestOverwriteNeedsBothTheSandboxAndTheCall(t *testing.T) {
	for _, c := range []struct {
		sandbox, call bool
		want          error
	}{
		{false, false, sandgate.ErrExists},
		{false, true, sandgate.ErrExists},
		{true, false, sandgate.ErrExists},
		{true, true, nil},
	} {
		d := tmp(t)
		write(t, filepath.Join(d, "f.txt"), "old")
		sb, err := sandgate.NewSandbox(
			sandgate.WithReadRoots(d), sandgate.WithWriteRoot(d), sandgate.WithAllowOverwrite(c.sandbox))
		if err != nil {
			t.Fatal(err)
		}
		_, err = sb.Write("f.txt", []byte("new"), c.call)
		got, _ := os.ReadFile(filepath.Join(d, "f.txt"))
		sb.Close()
		if c.want == nil {
			if err != nil || string(got) != "new" {
				t.Fatalf("sandbox=%v call=%v: %v, content %q", c.sandbox, c.call, err, got)
			}
			continue
		}
		if !errors.Is(err, c.want) || string(got) != "old" {
			t.Fatalf("sandbox=%v call=%v: %v, content %q", c.sandbox, c.call, err, got)
		}
	}
}

func TestExecutorFromOptions(t *testing.T) {
	d := tmp(t)
	ws := filepath.Join(d, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	x, err := sandgate.NewExecutorWith(sandgate.WriteRoot(ws), sandgate.ExecEnabled(true), sandgate.TimeoutMs(5000))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	r, err := x.Exec(context.Background(), "pwd", sandgate.ExecOptions{Cwd: filepath.Join(ws, "sub")})
	if err != nil || r.ExitCode != 0 || !strings.HasSuffix(strings.TrimSpace(string(r.Stdout)), "/ws/sub") {
		t.Fatalf("pwd in an absolute cwd: %v %+v", err, r)
	}
	if _, err := x.Exec(context.Background(), "true", sandgate.ExecOptions{Cwd: d + "/ws-secrets"}); !errors.Is(err, sandgate.ErrPathEscape) {
		t.Fatalf("a sibling with the root's prefix: %v", err)
	}
	// Every typed option is a key the core knows.
	p, err := sandgate.NewPolicy(sandgate.BaseDir(d), sandgate.SecurityMode("restricted"),
		sandgate.ReadRoots("ws"), sandgate.WriteRoot("ws"), sandgate.DenyWrite("*.lock"),
		sandgate.ExecEnabled(true), sandgate.Shell("/bin/sh"), sandgate.TimeoutMs(1000),
		sandgate.MaxOutputBytes(1000), sandgate.EnvInherit("LANG"), sandgate.Confine("best_effort"),
		sandgate.ProcessAllow("git:status"), sandgate.NetAllow("example.com"), sandgate.AllowHTTP(true),
		sandgate.ExecOps(3), sandgate.MaxMemoryBytes(64<<20), sandgate.MaxTasks(64), sandgate.MaxCPUMs(1000))
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	_, err = sandgate.NewPolicy(sandgate.BaseDir(d), sandgate.TimeoutMs(0))
	var se *sandgate.Error
	if !errors.As(err, &se) || se.Code != sandgate.CodePolicy || se.Key != "exec.timeout_ms" {
		t.Fatalf("timeout_ms = 0: %v", err)
	}
	if _, err := sandgate.NewPolicy(sandgate.Set("write_roots", "ws")); !errors.Is(err, sandgate.ErrPolicy) {
		t.Fatalf("an unknown key: %v", err)
	}
}
