package sandgate_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

func tmp(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func write(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestVersion(t *testing.T) {
	if sandgate.Version() == "" {
		t.Fatal("empty version")
	}
	if got := sandgate.ABIVersion(); got>>16 != sandgate.ABIMajor || got&0xffff < sandgate.ABIMinor {
		t.Fatalf("ABI %#x, built against %d.%d", got, sandgate.ABIMajor, sandgate.ABIMinor)
	}
}

func TestSentinelsMatchTheLibrary(t *testing.T) {
	for i, c := range sandgate.AllCodes {
		if got := sandgate.CodeName(uint32(i + 1)); got != c {
			t.Errorf("library names %d %q, binding %q", i+1, got, c)
		}
		err := error(&sandgate.Error{Code: c, Message: "m"})
		for _, d := range sandgate.AllCodes {
			if errors.Is(err, &sandgate.Error{Code: d}) != (c == d) {
				t.Errorf("errors.Is(%s, %s) = %v", c, d, c != d)
			}
		}
	}
	if !errors.Is(&sandgate.Error{Code: sandgate.CodeFSProtected, Message: "m"}, sandgate.ErrFSProtected) ||
		errors.Is(&sandgate.Error{Code: sandgate.CodeIO}, sandgate.ErrInternal) {
		t.Error("sentinels")
	}
	if sandgate.CodeName(0) != "OK" || sandgate.CodeName(999) != "" {
		t.Error("CodeName of 0 / 999")
	}
	is := func(c sandgate.Code, target error) bool { return errors.Is(&sandgate.Error{Code: c}, target) }
	if !is(sandgate.CodeNotFound, fs.ErrNotExist) || !is(sandgate.CodeExists, fs.ErrExist) ||
		!is(sandgate.CodeDenied, fs.ErrPermission) || !is(sandgate.CodeFSProtected, fs.ErrPermission) ||
		!is(sandgate.CodeClosed, fs.ErrClosed) || is(sandgate.CodePathEscape, fs.ErrNotExist) ||
		is(sandgate.CodeNotFound, fs.ErrExist) {
		t.Error("io/fs sentinel mapping")
	}
}

func TestErrorsFromTheLibrary(t *testing.T) {
	dir := tmp(t)
	write(t, filepath.Join(dir, "ws/a.txt"), "hello\n")
	write(t, filepath.Join(dir, "ws/.github/ci.yml"), "x")
	write(t, filepath.Join(dir, "outside/s.txt"), "S")
	os.Symlink("../outside/s.txt", filepath.Join(dir, "ws/esc"))
	ws := filepath.Join(dir, "ws")
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(ws), sandgate.WithWriteRoot(ws),
		sandgate.WithDenyWrite(".github/**"), sandgate.WithAllowOverwrite(true))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()

	_, err = sb.Read("missing.txt")
	var se *sandgate.Error
	if !errors.As(err, &se) || se.Code != sandgate.CodeNotFound || !errors.Is(err, sandgate.ErrNotFound) ||
		!errors.Is(err, fs.ErrNotExist) || se.Path != "missing.txt" || se.Message == "" {
		t.Errorf("read missing: %#v", err)
	}
	if _, err := sb.Read("esc"); !errors.Is(err, sandgate.ErrPathEscape) || strings.Contains(err.Error(), dir) {
		t.Errorf("read esc: %v", err)
	}
	if _, err := sb.Read("../outside/s.txt"); !errors.Is(err, sandgate.ErrPathInvalid) {
		t.Errorf("read ..: %v", err)
	}
	if _, err := sb.Write("a.txt", []byte("x"), false); !errors.Is(err, sandgate.ErrExists) || !errors.Is(err, fs.ErrExist) {
		t.Errorf("write existing: %v", err)
	}
	_, err = sb.Write(".github/new.yml", []byte("x"), false)
	if !errors.As(err, &se) || se.Code != sandgate.CodeFSProtected || se.Pattern != ".github/**" || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("write protected: %#v", err)
	}
	if _, err := sb.Edit("a.txt", "nope", "x", false); !errors.Is(err, sandgate.ErrEditNoMatch) {
		t.Errorf("edit: %v", err)
	}
	if _, err := sb.ReadLines("a.txt", 0, 1); !errors.Is(err, sandgate.ErrRequest) {
		t.Errorf("offset 0: %v", err)
	}

	// Unwrap to syscall.Errno through the *os.PathError of a Root.
	r, err := sandgate.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Open("missing")
	var pe *os.PathError
	var errno syscall.Errno
	if !errors.As(err, &pe) || pe.Op != "openat" || pe.Path != "missing" || !errors.Is(err, fs.ErrNotExist) ||
		!errors.Is(err, sandgate.ErrNotFound) || !errors.As(err, &errno) || errno != syscall.ENOENT {
		t.Errorf("root open missing: %#v (errno %v)", err, errno)
	}
	if err := r.Mkdir("a.txt", 0o755); !errors.Is(err, syscall.EEXIST) || !errors.Is(err, fs.ErrExist) {
		t.Errorf("mkdir existing: %v", err)
	}
	err = r.Rename("a.txt", "../x")
	var le *os.LinkError
	if !errors.As(err, &le) || !errors.Is(err, sandgate.ErrPathEscape) {
		t.Errorf("rename escape: %#v", err)
	}
	_, err = sandgate.LoadPolicy(filepath.Join(dir, "nope.toml"))
	if !errors.As(err, &se) {
		t.Errorf("load missing policy: %v", err)
	}
	_, err = sandgate.ParsePolicy([]byte("[fs]\nwrite_root = 3\n"), dir)
	if !errors.As(err, &se) || se.Code != sandgate.CodePolicy || se.Key != "fs.write_root" {
		t.Errorf("bad policy: %#v", err)
	}
}

func TestGrepOptions(t *testing.T) {
	dir := tmp(t)
	write(t, filepath.Join(dir, "src/m.rs"), "one\nFn alpha\nthree\nfn beta\n")
	write(t, filepath.Join(dir, "src/skip.rs"), "fn gamma\n")
	write(t, filepath.Join(dir, "notes.md"), "fn in a note\n")
	write(t, filepath.Join(dir, ".gitignore"), "src/skip.rs\n")
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ms, err := sb.Grep("fn", sandgate.GrepGlob("*.rs"), sandgate.GrepCaseInsensitive(), sandgate.GrepContext(1, 1))
	if err != nil || len(ms) != 3 || ms[0].Path != "src/m.rs" || ms[0].Line != 2 || ms[2].Path != "src/skip.rs" {
		t.Fatalf("grep: %+v %v", ms, err)
	}
	if !reflect.DeepEqual(ms[0].Before, []string{"one"}) || !reflect.DeepEqual(ms[0].After, []string{"three"}) || len(ms[1].After) != 0 {
		t.Errorf("context: %+v", ms)
	}
	if files, err := sb.GrepFiles("fn", sandgate.GrepGlob("*.rs"), sandgate.GrepGitignore()); err != nil || !reflect.DeepEqual(files, []string{"src/m.rs"}) {
		t.Errorf("files, gitignore: %v %v", files, err)
	}
	if files, err := sb.GrepFiles("fn"); err != nil || !reflect.DeepEqual(files, []string{"notes.md", "src/m.rs", "src/skip.rs"}) {
		t.Errorf("files: %v %v", files, err)
	}
	if files, err := sb.GrepFiles("fn", sandgate.GrepMaxResults(1)); err != nil || !reflect.DeepEqual(files, []string{"notes.md"}) {
		t.Errorf("files, head limit: %v %v", files, err)
	}
	counts, err := sb.GrepCount("fn", sandgate.GrepCaseInsensitive(), sandgate.GrepGlob("*.rs"))
	if err != nil || !reflect.DeepEqual(counts, []sandgate.FileCount{{Path: "src/m.rs", Count: 2}, {Path: "src/skip.rs", Count: 1}}) {
		t.Errorf("count: %+v %v", counts, err)
	}
	if _, err := sb.GrepFiles("fn", sandgate.GrepContext(2, 0)); !errors.Is(err, sandgate.ErrRequest) {
		t.Errorf("context in files mode: %v", err)
	}
	if _, err := sb.Grep("fn", sandgate.GrepContext(-1, 0)); !errors.Is(err, sandgate.ErrRequest) {
		t.Errorf("negative context: %v", err)
	}
}

func TestSearchSaysWhenItWasCut(t *testing.T) {
	dir := tmp(t)
	write(t, filepath.Join(dir, "c.txt"), "hit\nhit\n")
	for i := 0; i < 1001; i++ {
		write(t, filepath.Join(dir, "many", fmt.Sprintf("f%04d", i)), "")
	}
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var cut sandgate.Cut
	ms, err := sb.Grep("hit", sandgate.GrepMaxResults(1), sandgate.GrepReport(&cut))
	if err != nil || len(ms) != 1 || cut != (sandgate.Cut{Truncated: true, Limit: "max_results"}) {
		t.Errorf("grep cut at 1 of 2 matches: %+v %+v %v", ms, cut, err)
	}
	counts, err := sb.GrepCount("hit", sandgate.GrepReport(&cut))
	if err != nil || len(counts) != 1 || cut != (sandgate.Cut{}) {
		t.Errorf("grep within its cap: %+v %+v %v", counts, cut, err)
	}
	paths, cut, err := sb.GlobFound("many/*", "")
	if err != nil || len(paths) != 1000 || cut != (sandgate.Cut{Truncated: true, Limit: "max_results"}) {
		t.Errorf("glob cut at 1000 of 1001 paths: %d %+v %v", len(paths), cut, err)
	}
	paths, cut, err = sb.GlobFound("*.txt", "")
	if err != nil || !reflect.DeepEqual(paths, []string{"c.txt"}) || cut != (sandgate.Cut{}) {
		t.Errorf("glob within its cap: %v %+v %v", paths, cut, err)
	}
}

func TestGrep7GrepSaysWhichLinesWereCutAndWhatWentUnread(t *testing.T) {
	dir := tmp(t)
	long := strings.Repeat("y", 1500)
	write(t, filepath.Join(dir, "g.txt"), long+"\nhit"+long+"\n"+long+"\nshort\n")
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var cut sandgate.Cut
	ms, err := sb.Grep("hit", sandgate.GrepContext(1, 2), sandgate.GrepReport(&cut))
	if err != nil || len(ms) != 1 || len(ms[0].Text) != 1000 || !ms[0].LineTruncated ||
		!reflect.DeepEqual(ms[0].BeforeTruncated, []int{0}) ||
		!reflect.DeepEqual(ms[0].AfterTruncated, []int{0}) || cut.Unreadable != 0 {
		t.Errorf("cut lines: %d %+v %v", len(ms), cut, err)
	}
	if ms, err := sb.Grep("short"); err != nil || len(ms) != 1 || ms[0].LineTruncated {
		t.Errorf("a whole line: %+v %v", ms, err)
	}
	locked := filepath.Join(dir, "locked.txt")
	write(t, locked, "hit\n")
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	if f, err := os.Open(locked); err == nil {
		f.Close()
		return // this uid reads a mode-000 file: nothing to show
	}
	if _, err := sb.GrepFiles("hit", sandgate.GrepReport(&cut)); err != nil || cut.Unreadable != 1 {
		t.Errorf("an unreadable file: %+v %v", cut, err)
	}
}

func TestSandboxOperations(t *testing.T) {
	dir := tmp(t)
	write(t, filepath.Join(dir, "ro/readme.md"), "alpha\nbeta\n")
	os.MkdirAll(filepath.Join(dir, "ws"), 0o755)
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(filepath.Join(dir, "ws"), filepath.Join(dir, "ro")),
		sandgate.WithWriteRoot(filepath.Join(dir, "ws")), sandgate.WithAllowOverwrite(true),
		sandgate.WithMaxWriteBytes(10), sandgate.WithRestricted(true), sandgate.WithResolver(sandgate.ResolverWalk))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if n, err := sb.Write("d/f.txt", []byte("one\ntwo\n"), false); err != nil || n != 8 {
		t.Fatalf("write: %d %v", n, err)
	}
	if _, err := sb.Write("big", make([]byte, 11), false); !errors.Is(err, sandgate.ErrTooLarge) {
		t.Errorf("cap: %v", err)
	}
	if _, err := sb.Write(".git/config", []byte("x"), false); !errors.Is(err, sandgate.ErrFSProtected) {
		t.Errorf(".git: %v", err)
	}
	if n, err := sb.Edit("d/f.txt", "two", "TWO", false); err != nil || n != 1 {
		t.Errorf("edit: %d %v", n, err)
	}
	l, err := sb.ReadLines("d/f.txt", 2, 5)
	if err != nil || string(l.Content) != "TWO\n" || l.TotalLines != 2 || l.Offset != 2 || l.Lines != 1 {
		t.Errorf("lines: %+v %v", l, err)
	}
	if b, err := sb.Read("readme.md"); err != nil || string(b) != "alpha\nbeta\n" {
		t.Errorf("read second root: %q %v", b, err)
	}
	if es, err := sb.List("."); err != nil || len(es) != 1 || es[0].Name != "d" || es[0].Kind != "dir" {
		t.Errorf("list: %+v %v", es, err)
	}
	if st, err := sb.Stat("d/f.txt"); err != nil || st.Kind != "file" || st.Size != 8 {
		t.Errorf("stat: %+v %v", st, err)
	}
	if err := sb.Mkdir("e/f"); err != nil {
		t.Error(err)
	}
	if err := sb.Rename("d/f.txt", "e/f/g.txt"); err != nil {
		t.Error(err)
	}
	if err := sb.Delete("d"); err != nil {
		t.Error(err)
	}
	if ps, err := sb.Glob("**/*.txt", ""); err != nil || len(ps) != 1 || ps[0] != "e/f/g.txt" {
		t.Errorf("glob: %v %v", ps, err)
	}
	if ms, err := sb.Grep("^al", sandgate.GrepMaxResults(1)); err != nil || len(ms) != 1 || ms[0].Path != "readme.md" || ms[0].Line != 1 {
		t.Errorf("grep: %+v %v", ms, err)
	}
	if _, err := sb.Grep("x", sandgate.GrepMaxResults(0)); !errors.Is(err, sandgate.ErrRequest) {
		t.Errorf("grep 0: %v", err)
	}
	if w, err := sb.Warnings(); err != nil || w == nil {
		t.Errorf("warnings: %v %v", w, err)
	}
}

func TestNothingGrantedByDefault(t *testing.T) {
	sb, err := sandgate.NewSandbox()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if _, err := sb.Read("a"); !errors.Is(err, sandgate.ErrDenied) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("read: %v", err)
	}
	if _, err := sb.Write("a", nil, false); !errors.Is(err, sandgate.ErrDenied) {
		t.Errorf("write: %v", err)
	}
	if _, err := sandgate.NewSandbox(sandgate.WithReadRoots("/nonexistent/sandgate")); err == nil {
		t.Error("a missing read root was accepted")
	}
}

func TestAuditCallback(t *testing.T) {
	dir := tmp(t)
	var mu sync.Mutex
	var events []sandgate.AuditEvent
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir), sandgate.WithWriteRoot(dir),
		sandgate.WithAudit(func(e sandgate.AuditEvent) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Write("a.txt", []byte("hello"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Read("a.txt"); err != nil {
		t.Fatal(err)
	}
	sb.Read("missing")
	sb.Rename("a.txt", "b.txt")
	// From many goroutines at once (the callback runs on each caller's thread).
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				sb.Stat("b.txt")
			}
		}()
	}
	wg.Wait()
	sb.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 4+16*20 {
		t.Fatalf("%d events", len(events))
	}
	want := []struct {
		op, path string
		outcome  sandgate.Code
		size     uint64
		hasSize  bool
	}{
		{"write", "a.txt", "OK", 5, true},
		{"read", "a.txt", "OK", 5, true},
		{"read", "missing", sandgate.CodeNotFound, 0, false},
		{"rename", "a.txt -> b.txt", "OK", 0, false},
	}
	for i, w := range want {
		e := events[i]
		if e.Op != w.op || e.Path != w.path || e.Outcome != w.outcome || e.HasSize != w.hasSize || (w.hasSize && e.Size != w.size) {
			t.Errorf("event %d: %+v, want %+v", i, e, w)
		}
		if time.Since(e.Time) > time.Minute || e.Time.After(time.Now()) {
			t.Errorf("event %d time %v", i, e.Time)
		}
	}
}

func TestAuditPanicIsContained(t *testing.T) {
	dir := tmp(t)
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir), sandgate.WithAudit(func(sandgate.AuditEvent) { panic("boom") }))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if _, err := sb.Read("x"); !errors.Is(err, sandgate.ErrNotFound) {
		t.Errorf("read: %v", err)
	}
}

// A panic in an audit callback is recovered (it must not unwind through
// the library) but not lost: the sandbox, executor and fetcher keep it,
// with the panic's value, for AuditErrors, as the Python binding keeps an
// exception in audit_errors. Before, it was recovered and dropped.
func TestBind20AuditPanicIsKeptNotDropped(t *testing.T) {
	dir := tmp(t)
	boom := errors.New("boom")
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir), sandgate.WithAudit(func(e sandgate.AuditEvent) {
		if e.Outcome == sandgate.CodeNotFound {
			panic(boom)
		}
		panic(fmt.Sprintf("event %s", e.Op))
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if got := sb.AuditErrors(); len(got) != 0 {
		t.Fatalf("before any call: %v", got)
	}
	if _, err := sb.Read("x"); !errors.Is(err, sandgate.ErrNotFound) {
		t.Errorf("read: %v", err)
	}
	if _, err := sb.List("."); err != nil {
		t.Errorf("list: %v", err)
	}
	got := sb.AuditErrors()
	if len(got) != 2 || !errors.Is(got[0], boom) || !strings.Contains(got[1].Error(), "event list") {
		t.Fatalf("sandbox audit errors: %v", got)
	}
	for i := 0; i < 150; i++ {
		sb.Read("x")
	}
	if n := len(sb.AuditErrors()); n != 100 {
		t.Errorf("kept %d audit errors, want the last 100", n)
	}
	sb.Close()
	if n := len(sb.AuditErrors()); n != 100 {
		t.Errorf("after Close: %d audit errors", n)
	}
	var none *sandgate.Sandbox
	if none.AuditErrors() != nil {
		t.Errorf("nil sandbox has audit errors")
	}

	x, err := sandgate.NewExecutor(execPolicy(t, ""), sandgate.WithExecAudit(func(sandgate.AuditEvent) { panic("exec boom") }))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if r, err := x.Exec(context.Background(), "echo hi", sandgate.ExecOptions{}); err != nil || string(r.Stdout) != "hi\n" {
		t.Fatalf("exec: %+v %v", r, err)
	}
	if got := x.AuditErrors(); len(got) != 1 || !strings.Contains(got[0].Error(), "exec boom") {
		t.Errorf("executor audit errors: %v", got)
	}

	p, err := sandgate.NewPolicy(sandgate.BaseDir(dir), sandgate.NetAllow("127.0.0.1:1"), sandgate.AllowHTTP(true))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f, err := sandgate.NewFetcher(p, sandgate.WithFetchAudit(func(sandgate.AuditEvent) { panic("fetch boom") }))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Fetch(context.Background(), "http://127.0.0.1:1/", sandgate.FetchOptions{})
	f.Fetch(context.Background(), "http://127.0.0.1:1/", sandgate.FetchOptions{Timeout: -1})
	if got := f.AuditErrors(); len(got) != 2 || !strings.Contains(got[0].Error(), "fetch boom") {
		t.Errorf("fetcher audit errors: %v", got)
	}
}

func execPolicy(t *testing.T, extra string) *sandgate.Policy {
	t.Helper()
	dir := tmp(t)
	write(t, filepath.Join(dir, "ws/a.txt"), "alpha\n")
	text := "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 20000\n" + extra
	write(t, filepath.Join(dir, "policy.toml"), text)
	p, err := sandgate.LoadPolicy(filepath.Join(dir, "policy.toml"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestExecutor(t *testing.T) {
	p := execPolicy(t, "")
	x, err := sandgate.NewExecutor(p)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := x.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := x.Exec(ctx, "cat a.txt; echo err >&2; exit 4", sandgate.ExecOptions{})
	if err != nil || r.ExitCode != 4 || string(r.Stdout) != "alpha\n" || string(r.Stderr) != "err\n" || r.TimedOut || r.Aborted || r.Truncated {
		t.Fatalf("exec: %+v %v", r, err)
	}
	if !strings.HasPrefix(r.EnvNamesDigest, "sha256:") && len(r.EnvNamesDigest) < 64 {
		t.Errorf("env digest %q", r.EnvNamesDigest)
	}
	start := time.Now()
	r, err = x.Exec(ctx, "sleep 10", sandgate.ExecOptions{Timeout: 200 * time.Millisecond})
	if err != nil || r.ExitCode != 124 || !r.TimedOut || time.Since(start) > 5*time.Second {
		t.Fatalf("timeout: %+v %v", r, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	r, err = x.Exec(cctx, "sleep 10", sandgate.ExecOptions{})
	if err != nil || r.ExitCode != 130 || !r.Aborted || time.Since(start) > 5*time.Second {
		t.Fatalf("cancel: %+v %v", r, err)
	}
	done, cancel2 := context.WithCancel(ctx)
	cancel2()
	r, err = x.Exec(done, "sleep 10", sandgate.ExecOptions{})
	if err != nil || r.ExitCode != 130 {
		t.Fatalf("cancelled before: %+v %v", r, err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer dcancel()
	r, err = x.Exec(dctx, "sleep 10", sandgate.ExecOptions{})
	if err != nil || r.ExitCode != 130 {
		t.Fatalf("deadline: %+v %v", r, err)
	}
	if _, err := x.Exec(ctx, "true", sandgate.ExecOptions{Cwd: "../"}); !errors.Is(err, sandgate.ErrPathInvalid) {
		t.Errorf("cwd: %v", err)
	}
	// Concurrent commands.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, err := x.Exec(ctx, "echo hi", sandgate.ExecOptions{}); err != nil || string(r.Stdout) != "hi\n" {
				t.Errorf("concurrent: %+v %v", r, err)
			}
		}()
	}
	wg.Wait()
	if err := x.Dispose(); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Exec(ctx, "true", sandgate.ExecOptions{}); err != nil && !errors.Is(err, sandgate.ErrNotStarted) {
		t.Errorf("after dispose: %v", err)
	}
}

func TestExecutorAudit(t *testing.T) {
	p := execPolicy(t, "")
	const secret = "marker-7f3a-not-in-audit"
	var mu sync.Mutex
	var events []sandgate.AuditEvent
	x, err := sandgate.NewExecutor(p, sandgate.WithExecAudit(func(e sandgate.AuditEvent) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if r, err := x.Exec(ctx, "echo "+secret+"; exit 3", sandgate.ExecOptions{}); err != nil || r.ExitCode != 3 {
		t.Fatalf("exit 3: %+v %v", r, err)
	}
	if r, err := x.Exec(ctx, "sleep 10 # "+secret, sandgate.ExecOptions{Timeout: 200 * time.Millisecond}); err != nil || !r.TimedOut {
		t.Fatalf("timeout: %+v %v", r, err)
	}
	if _, err := x.Exec(ctx, "echo "+secret, sandgate.ExecOptions{Cwd: "../"}); !errors.Is(err, sandgate.ErrPathInvalid) {
		t.Fatalf("cwd: %v", err)
	}
	// From several goroutines at once.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := x.Exec(ctx, "true", sandgate.ExecOptions{}); err != nil {
				t.Errorf("concurrent: %v", err)
			}
		}()
	}
	wg.Wait()
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 3+4 {
		t.Fatalf("%d events: %+v", len(events), events)
	}
	want := []struct {
		path     string
		outcome  sandgate.Code
		hasExit  bool
		exitCode int
		limit    string
	}{
		{"", "OK", true, 3, ""},
		{"", "OK", true, 124, "timeout"},
		{"../", sandgate.CodePathInvalid, false, 0, ""},
	}
	for i, w := range want {
		e := events[i]
		if e.Op != "exec" || e.Path != w.path || e.Outcome != w.outcome || e.HasExitCode != w.hasExit ||
			(w.hasExit && e.ExitCode != w.exitCode) || e.Limit != w.limit {
			t.Errorf("event %d: %+v, want %+v", i, e, w)
		}
	}
	if !events[0].HasSize || events[0].Size != uint64(len(secret)+1) {
		t.Errorf("size of event 0: %+v", events[0])
	}
	for i, e := range events {
		if strings.Contains(fmt.Sprintf("%+v", e), secret) {
			t.Errorf("event %d holds the command: %+v", i, e)
		}
		if i >= 3 && (e.Op != "exec" || !e.HasExitCode || e.ExitCode != 0 || e.Limit != "") {
			t.Errorf("event %d: %+v", i, e)
		}
	}
}

func TestExecutorAuditPanicIsContained(t *testing.T) {
	x, err := sandgate.NewExecutor(execPolicy(t, ""), sandgate.WithExecAudit(func(sandgate.AuditEvent) { panic("boom") }))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if r, err := x.Exec(context.Background(), "echo hi", sandgate.ExecOptions{}); err != nil || string(r.Stdout) != "hi\n" {
		t.Fatalf("exec: %+v %v", r, err)
	}
}

func TestExecutorDenied(t *testing.T) {
	dir := tmp(t)
	os.MkdirAll(filepath.Join(dir, "ws"), 0o755)
	p, err := sandgate.ParsePolicy([]byte("[fs]\nwrite_root = \"ws\"\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	x, err := sandgate.NewExecutor(p)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if _, err := x.Exec(context.Background(), "true", sandgate.ExecOptions{}); !errors.Is(err, sandgate.ErrDenied) {
		t.Errorf("exec: %v", err)
	}
}

func TestPolicy(t *testing.T) {
	dir := tmp(t)
	os.MkdirAll(filepath.Join(dir, "ws"), 0o755)
	text := []byte("[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n[net]\nallow = [\"api.example.com\"]\n[budgets]\nfs_ops = 7\n")
	p, err := sandgate.ParsePolicy(text, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sum := sha256.Sum256(text)
	if d, err := p.Digest(); err != nil || d != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("digest %q %v", d, err)
	}
	s, err := p.Summary()
	if err != nil || s["write_root"] != filepath.Join(dir, "ws") || s["mode"] != "restricted" {
		t.Errorf("summary %v %v", s, err)
	}
	if b, _ := s["budgets"].(map[string]any); b["fs_ops"] != float64(7) {
		t.Errorf("budgets %v", s["budgets"])
	}
	if txt, err := p.SummaryText(); err != nil || txt == "" {
		t.Errorf("text summary %q %v", txt, err)
	}
	d, err := p.Authorize(sandgate.AuthorizeRequest{Scheme: "https", Host: "api.example.com"})
	if err != nil || !d.Allowed {
		t.Errorf("allowed: %+v %v", d, err)
	}
	d, err = p.Authorize(sandgate.AuthorizeRequest{Scheme: "https", Host: "evil.example.com", Port: 443})
	if !errors.Is(err, sandgate.ErrNetDenied) || d.Allowed || d.Reason == "" {
		t.Errorf("denied: %+v %v", d, err)
	}
	// The budget reaches the sandbox made from the policy.
	sb, err := sandgate.SandboxFromPolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for i := 0; i < 7; i++ {
		sb.Stat(".")
	}
	if _, err := sb.Stat("."); !errors.Is(err, sandgate.ErrDenied) {
		t.Errorf("budget: %v", err)
	}
}

func TestUseAfterClose(t *testing.T) {
	dir := tmp(t)
	write(t, filepath.Join(dir, "a.txt"), "A")
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir))
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
	if err := sb.Close(); err != nil {
		t.Error(err)
	}
	if _, err := sb.Read("a.txt"); !errors.Is(err, sandgate.ErrClosed) || !errors.Is(err, fs.ErrClosed) {
		t.Errorf("sandbox: %v", err)
	}
	if _, err := sb.Glob("*", ""); !errors.Is(err, sandgate.ErrClosed) {
		t.Errorf("sandbox glob: %v", err)
	}
	r, err := sandgate.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	r.Close()
	if r.Name() != dir {
		t.Errorf("name after close %q", r.Name())
	}
	if _, err := r.Open("a.txt"); !errors.Is(err, sandgate.ErrClosed) || !errors.Is(err, fs.ErrClosed) {
		t.Errorf("root: %v", err)
	}
	if _, err := r.Stat("a.txt"); !errors.Is(err, sandgate.ErrClosed) {
		t.Errorf("root stat: %v", err)
	}
	p, err := sandgate.ParsePolicy([]byte("[fs]\nread_roots = [\".\"]\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	x, err := sandgate.NewExecutor(p)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := p.Digest(); !errors.Is(err, sandgate.ErrClosed) {
		t.Errorf("policy: %v", err)
	}
	if _, err := sandgate.SandboxFromPolicy(p); !errors.Is(err, sandgate.ErrClosed) {
		t.Errorf("sandbox from closed policy: %v", err)
	}
	x.Close()
	if _, err := x.Exec(context.Background(), "true", sandgate.ExecOptions{}); !errors.Is(err, sandgate.ErrClosed) {
		t.Errorf("executor: %v", err)
	}
	if err := x.Start(); !errors.Is(err, sandgate.ErrClosed) {
		t.Errorf("executor start: %v", err)
	}
}

func TestCloseWhileInUse(t *testing.T) {
	dir := tmp(t)
	write(t, filepath.Join(dir, "a.txt"), "A")
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir))
	if err != nil {
		t.Fatal(err)
	}
	r, err := sandgate.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				if _, err := sb.Read("a.txt"); err != nil && !errors.Is(err, sandgate.ErrClosed) {
					t.Errorf("read: %v", err)
					return
				}
				if _, err := r.Stat("a.txt"); err != nil && !errors.Is(err, sandgate.ErrClosed) {
					t.Errorf("stat: %v", err)
					return
				}
			}
		}()
	}
	time.Sleep(time.Millisecond)
	sb.Close()
	r.Close()
	wg.Wait()
}

func TestRootFiles(t *testing.T) {
	dir := tmp(t)
	write(t, filepath.Join(dir, "a.txt"), "A")
	r, err := sandgate.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := r.Create("d.txt")
	if err != nil {
		t.Fatal(err)
	}
	if f.Name() != filepath.Join(dir, "d.txt") {
		t.Errorf("name %q", f.Name())
	}
	f.WriteString("data")
	f.Close()
	if err := r.WriteFile("e.txt", []byte("E"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := r.ReadFile("e.txt"); err != nil || string(b) != "E" {
		t.Errorf("readfile %q %v", b, err)
	}
	fi, err := r.Stat("e.txt")
	if err != nil || fi.Mode() != 0o600 || fi.Size() != 1 || fi.Name() != "e.txt" {
		t.Fatalf("stat %v %v", fi, err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	var host syscall.Stat_t
	syscall.Stat(filepath.Join(dir, "e.txt"), &host)
	if st.Ino != host.Ino || st.Dev != host.Dev || st.Mode != host.Mode || st.Nlink != host.Nlink || st.Mtim != host.Mtim {
		t.Errorf("sys %+v, host %+v", st, host)
	}
	if _, err := r.OpenFile("x", os.O_CREATE|os.O_WRONLY, 0o1777); err == nil {
		t.Error("mode beyond 0o777 accepted")
	}
	if _, err := r.OpenFile("x", os.O_CREATE|os.O_WRONLY|os.O_SYNC, 0o644); !errors.Is(err, sandgate.ErrRequest) {
		t.Errorf("O_SYNC: %v", err)
	}
	// The descriptor is close-on-exec.
	f, _ = r.Open("a.txt")
	defer f.Close()
	flags, _, e := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_GETFD, 0)
	if e != 0 || flags&syscall.FD_CLOEXEC == 0 {
		t.Errorf("FD_CLOEXEC not set")
	}
	b, _ := io.ReadAll(f)
	if string(b) != "A" {
		t.Errorf("read %q", b)
	}
	sub, err := r.OpenRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if sub.Name() != dir+"/." {
		t.Errorf("sub name %q", sub.Name())
	}
}

// A program built against the binding links libsandgate statically: its
// binary needs no libsandgate.so.
func TestStaticLinking(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	if _, err := exec.LookPath("ldd"); err != nil {
		t.Skip("no ldd")
	}
	mod, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "go.mod"), "module tiny\n\ngo 1.24\n\nrequire github.com/sandgate-dev/sandgate/bindings/go v0.0.0\n\nreplace github.com/sandgate-dev/sandgate/bindings/go => "+mod+"\n")
	write(t, filepath.Join(dir, "main.go"), `package main

import (
	"fmt"
	"os"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

func main() {
	r, err := sandgate.OpenRoot(".")
	if err != nil {
		panic(err)
	}
	defer r.Close()
	_, err = r.Open("../x")
	fmt.Println(sandgate.Version(), err != nil)
	os.Exit(0)
}
`)
	bin := filepath.Join(dir, "tiny")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("ldd: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "libsandgate") {
		t.Fatalf("the binary depends on libsandgate:\n%s", out)
	}
	cmd = exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin"} // no LD_LIBRARY_PATH
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), " true") {
		t.Fatalf("run: %v\n%s", err, out)
	}
	t.Logf("ldd:\n%s", out)
}

func TestRootFS(t *testing.T) {
	dir := tmp(t)
	write(t, filepath.Join(dir, "a.txt"), "A")
	write(t, filepath.Join(dir, "d/b.txt"), "B")
	os.Symlink("a.txt", filepath.Join(dir, "l"))
	r, err := sandgate.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := fstest.TestFS(r.FS(), "a.txt", "d/b.txt", "l"); err != nil {
		t.Fatal(err)
	}
	os.Symlink("../outside", filepath.Join(dir, "esc"))
	if _, err := fs.ReadFile(r.FS(), "esc/x"); !errors.Is(err, sandgate.ErrPathEscape) {
		t.Errorf("escape through FS: %v", err)
	}
	if _, err := r.FS().Open("../x"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("invalid FS path: %v", err)
	}
}

func TestExecutorProtectedChanges(t *testing.T) {
	dir := tmp(t)
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "Cargo.lock"), []byte("v1\n"), 0o644)
	text := []byte("[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\ndeny_write = [\"*.lock\"]\n[exec]\nenabled = true\nshell = \"/bin/sh\"\n")
	p, err := sandgate.ParsePolicy(text, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	x, err := sandgate.NewExecutor(p)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	r, err := x.Exec(context.Background(), "echo evil > Cargo.lock; touch new.lock", sandgate.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []sandgate.ProtectedChange{
		{Path: "Cargo.lock", Pattern: "*.lock", Action: "restored"},
		{Path: "new.lock", Pattern: "*.lock", Action: "quarantined"},
	}
	// In namespaces Cargo.lock is bound read-only: the write fails in the
	// command, and only the new file is undone afterwards.
	if binds, _ := r.Confinement["protected_binds"].(map[string]any); binds != nil && binds["bound"] != float64(0) {
		if !strings.Contains(string(r.Stderr), "Read-only file system") {
			t.Errorf("stderr: %q", r.Stderr)
		}
		want = want[1:]
	}
	if len(r.ProtectedChanges) != len(want) {
		t.Fatalf("protected changes: %+v", r.ProtectedChanges)
	}
	for i := range want {
		if r.ProtectedChanges[i] != want[i] {
			t.Fatalf("protected changes: %+v", r.ProtectedChanges)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "Cargo.lock")); string(b) != "v1\n" {
		t.Errorf("Cargo.lock: %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.lock")); !os.IsNotExist(err) {
		t.Errorf("new.lock stayed: %v", err)
	}
}

// A method called on a nil handle answers E_REQUEST (Close answers nil)
// instead of panicking in the binding.
func TestNilHandlesAnswerRequestErrors(t *testing.T) {
	isRequest := func(what string, err error) {
		t.Helper()
		var se *sandgate.Error
		if !errors.As(err, &se) || se.Code != sandgate.CodeRequest {
			t.Fatalf("%s on a nil handle: %v, want E_REQUEST", what, err)
		}
	}
	var s *sandgate.Sandbox
	_, err := s.Read("a.txt")
	isRequest("Sandbox.Read", err)
	_, err = s.List(".")
	isRequest("Sandbox.List", err)
	isRequest("Sandbox.Mkdir", s.Mkdir("d"))
	if err := s.Close(); err != nil {
		t.Fatalf("Sandbox.Close on nil: %v", err)
	}
	var x *sandgate.Executor
	_, err = x.Exec(context.Background(), "true", sandgate.ExecOptions{})
	isRequest("Executor.Exec", err)
	isRequest("Executor.Start", x.Start())
	if err := x.Close(); err != nil {
		t.Fatalf("Executor.Close on nil: %v", err)
	}
	var f *sandgate.Fetcher
	_, err = f.Fetch(context.Background(), "https://example.com/", sandgate.FetchOptions{})
	isRequest("Fetcher.Fetch", err)
	if err := f.Close(); err != nil {
		t.Fatalf("Fetcher.Close on nil: %v", err)
	}
	var r *sandgate.Root
	_, err = r.ReadFile("a.txt")
	isRequest("Root.ReadFile", err)
	_, err = r.Stat("a.txt")
	isRequest("Root.Stat", err)
	if err := r.Close(); err != nil {
		t.Fatalf("Root.Close on nil: %v", err)
	}
	var p *sandgate.Policy
	_, err = p.Digest()
	isRequest("Policy.Digest", err)
	if err := p.Close(); err != nil {
		t.Fatalf("Policy.Close on nil: %v", err)
	}
}

// Grep says how many binary files (a NUL in the first 8 KiB) it passed
// over: one holding the pattern after its NUL was skipped in silence.
func TestGrep8GrepCountsBinaryFilesPassedOver(t *testing.T) {
	dir := tmp(t)
	write(t, filepath.Join(dir, "blob.bin"), "head\x00hit after the NUL\n")
	write(t, filepath.Join(dir, "t/a.txt"), "hit\n")
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var cut sandgate.Cut
	ms, err := sb.Grep("hit", sandgate.GrepReport(&cut))
	if err != nil || len(ms) != 1 || cut != (sandgate.Cut{Binary: 1}) {
		t.Errorf("lines: %+v %+v %v", ms, cut, err)
	}
	if fs, err := sb.GrepFiles("hit", sandgate.GrepReport(&cut)); err != nil || len(fs) != 1 || cut.Binary != 1 {
		t.Errorf("files: %+v %+v %v", fs, cut, err)
	}
	if _, err := sb.Grep("hit", sandgate.GrepIn("t"), sandgate.GrepReport(&cut)); err != nil || cut != (sandgate.Cut{}) {
		t.Errorf("no binary file: %+v %v", cut, err)
	}
}

// A ranged read stops with ErrAborted once its ctx is done; a ctx never
// done (or a live one) is served.
// A grep and a glob over 20,000 files stop once their ctx is cancelled
// while the walk runs, with the walk's own error (not the check made before
// a call starts); a ctx already done stops them before they start. The
// cancel races the walk, so a few tries are allowed: a call that ignored
// the ctx would answer every time.
func TestGrepAndGlobStopOnceTheirCtxIsDone(t *testing.T) {
	dir := t.TempDir()
	text := []byte(strings.Repeat("nothing to see\n", 20))
	for d := 0; d < 40; d++ {
		sub := filepath.Join(dir, "big", fmt.Sprintf("d%02d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 500; i++ {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.txt", i)), text, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	live := context.Background()
	if files, err := sb.GrepFiles("needle", sandgate.GrepIn("big"), sandgate.GrepAbortOn(live)); err != nil || len(files) != 0 {
		t.Fatalf("live ctx grep: %v %v", files, err)
	}
	if paths, err := sb.GlobContext(live, "*.txt", "big/d00"); err != nil || len(paths) != 500 {
		t.Fatalf("live ctx glob: %d %v", len(paths), err)
	}
	calls := map[string]func(ctx context.Context) error{
		"grep": func(ctx context.Context) error {
			_, err := sb.GrepFiles("needle", sandgate.GrepIn("big"), sandgate.GrepAbortOn(ctx))
			return err
		},
		"glob": func(ctx context.Context) error {
			_, _, err := sb.GlobFoundContext(ctx, "**/*.md", "big")
			return err
		},
	}
	for name, call := range calls {
		stopped := false
		for try := 0; try < 20 && !stopped; try++ {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(2*time.Millisecond, cancel)
			err := call(ctx)
			cancel()
			if errors.Is(err, sandgate.ErrAborted) && strings.Contains(err.Error(), "cancelled") {
				stopped = true
			} else if err != nil && !errors.Is(err, sandgate.ErrAborted) {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if !stopped {
			t.Fatalf("%s: never stopped by a cancel during the walk", name)
		}
		done, cancel := context.WithCancel(context.Background())
		cancel()
		err := call(done)
		var se *sandgate.Error
		if !errors.As(err, &se) || se.Code != sandgate.CodeAborted || se.Path != "big" || !strings.Contains(se.Message, "before the call started") {
			t.Fatalf("%s with a done ctx: %v", name, err)
		}
	}
}

func TestRanged9ReadLinesContextStopsOnceCancelled(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "r9.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	l, err := sb.ReadLinesContext(ctx, "r9.txt", 2, 1)
	if err != nil || string(l.Content) != "two\n" || l.TotalLines != 3 {
		t.Fatalf("live ctx: %+v %v", l, err)
	}
	cancel()
	_, err = sb.ReadLinesContext(ctx, "r9.txt", 1, 1)
	if !errors.Is(err, sandgate.ErrAborted) {
		t.Fatalf("cancelled ctx: want E_ABORTED, got %v", err)
	}
	if l, err := sb.ReadLines("r9.txt", 1, 1); err != nil || string(l.Content) != "one\n" {
		t.Fatalf("plain: %+v %v", l, err)
	}
}
