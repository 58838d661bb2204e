package sandgate_test

// A careless or hostile Go caller: zero values, closed handles, NUL bytes
// and invalid UTF-8, huge and negative numbers, runtime.Goexit in a
// callback, finalizers racing calls, cancelled contexts, many goroutines.
// Each answer is an *Error naming what was refused, never a crash, a hang
// or a leak.

import (
	"context"
	"errors"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

// wantCode fails unless err is a *sandgate.Error (through any wrapping)
// with code and a message holding each of words.
func wantCode(t *testing.T, what string, err error, code error, words ...string) {
	t.Helper()
	var se *sandgate.Error
	if !errors.As(err, &se) || !errors.Is(err, code) {
		t.Errorf("%s: %T %v, want %v", what, err, err, code)
		return
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %v, want it to name %q", what, err, w)
		}
	}
}

// MkdirAll refused a mode beyond 0o777 with a bare errors.New, which no
// sentinel matched, unlike Mkdir and OpenFile.
func TestAbuse25MkdirAllRefusesAModeAsARequestError(t *testing.T) {
	dir := tmp(t)
	r, err := sandgate.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, perm := range []os.FileMode{os.ModeSetuid | 0o755, os.ModeSticky | 0o777, 0o4755} {
		err := r.MkdirAll("a/b", perm)
		wantCode(t, "MkdirAll "+perm.String(), err, sandgate.ErrRequest, "unsupported file mode")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refused MkdirAll created %v", ents)
	}
}

// A Timeout near math.MaxInt64 was rounded up by adding 999,999 ns, which
// wrapped: the library was asked for about 1.8e19 ms and said so in its
// notes. It is now the number of milliseconds asked for, rounded up.
func TestAbuse25AHugeExecTimeoutIsSentAsAsked(t *testing.T) {
	x, err := sandgate.NewExecutor(execPolicy(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for to, want := range map[time.Duration]string{
		math.MaxInt64:          "9223372036855 ms",
		math.MaxInt64 - 999998: "9223372036854 ms",
		1<<62 + 1:              "4611686018428 ms",
	} {
		r, err := x.Exec(context.Background(), "echo hi", sandgate.ExecOptions{Timeout: to})
		if err != nil {
			t.Fatalf("timeout %d: %v", to, err)
		}
		notes := strings.Join(strings.Fields(fmtNotes(r.Confinement["notes"])), " ")
		if r.ExitCode != 0 || string(r.Stdout) != "hi\n" || !strings.Contains(notes, "asked for a "+want+" timeout") {
			t.Errorf("timeout %d: exit %d %q, notes %q, want them to say %q", to, r.ExitCode, r.Stdout, notes, want)
		}
	}
}

func fmtNotes(v any) string {
	var b strings.Builder
	if l, ok := v.([]any); ok {
		for _, n := range l {
			s, _ := n.(string)
			b.WriteString(s + "\n")
		}
	}
	return b.String()
}

// A zero value never built answers E_CLOSED on every method, and Close on
// it is a no-op; a nil policy is E_REQUEST.
func TestAbuse25ZeroValuesAnswerClosed(t *testing.T) {
	ctx := context.Background()
	var s sandgate.Sandbox
	_, err := s.Read("a")
	wantCode(t, "zero Sandbox.Read", err, sandgate.ErrClosed, "sandbox")
	_, err = s.Grep("x")
	wantCode(t, "zero Sandbox.Grep", err, sandgate.ErrClosed)
	if s.Close() != nil || s.Close() != nil || s.AuditErrors() != nil {
		t.Errorf("zero Sandbox.Close")
	}
	x := &sandgate.Executor{}
	_, err = x.Exec(ctx, "true", sandgate.ExecOptions{})
	wantCode(t, "zero Executor.Exec", err, sandgate.ErrClosed, "executor")
	wantCode(t, "zero Executor.Start", x.Start(), sandgate.ErrClosed)
	wantCode(t, "zero Executor.Dispose", x.Dispose(), sandgate.ErrClosed)
	if x.Close() != nil {
		t.Errorf("zero Executor.Close")
	}
	f := &sandgate.Fetcher{}
	_, err = f.Fetch(ctx, "https://example.com/", sandgate.FetchOptions{})
	wantCode(t, "zero Fetcher.Fetch", err, sandgate.ErrClosed, "fetcher")
	r := &sandgate.Root{}
	_, err = r.Stat("a")
	wantCode(t, "zero Root.Stat", err, sandgate.ErrClosed, "root")
	wantCode(t, "zero Root.MkdirAll", r.MkdirAll("a/b", 0o755), sandgate.ErrClosed)
	p := &sandgate.Policy{}
	_, err = p.Digest()
	wantCode(t, "zero Policy.Digest", err, sandgate.ErrClosed, "policy")
	_, err = sandgate.NewExecutor(p)
	wantCode(t, "NewExecutor(zero Policy)", err, sandgate.ErrClosed)
	_, err = sandgate.NewExecutor(nil)
	wantCode(t, "NewExecutor(nil)", err, sandgate.ErrRequest, "nil")
	_, err = sandgate.NewFetcher(nil)
	wantCode(t, "NewFetcher(nil)", err, sandgate.ErrRequest, "nil")
	_, err = sandgate.SandboxFromPolicy(nil)
	wantCode(t, "SandboxFromPolicy(nil)", err, sandgate.ErrRequest, "nil")
}

// NUL bytes and invalid UTF-8 in every string an agent or caller gives
// are refused by name; nothing runs, nothing is written.
func TestAbuse25NulAndInvalidUTF8AreRefusedByName(t *testing.T) {
	ctx := context.Background()
	x, err := sandgate.NewExecutor(execPolicy(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	_, err = x.Exec(ctx, "echo a\x00b", sandgate.ExecOptions{})
	wantCode(t, "exec NUL", err, sandgate.ErrRequest, "NUL")
	_, err = x.Exec(ctx, "echo \xff", sandgate.ExecOptions{})
	wantCode(t, "exec invalid UTF-8", err, sandgate.ErrRequest, "command is not UTF-8")
	_, err = x.Exec(ctx, "pwd", sandgate.ExecOptions{Cwd: "a\x00b"})
	wantCode(t, "exec cwd NUL", err, sandgate.ErrPathInvalid, "NUL")
	_, err = x.Exec(ctx, "pwd", sandgate.ExecOptions{Cwd: "\xff"})
	wantCode(t, "exec cwd invalid UTF-8", err, sandgate.ErrRequest, "cwd is not UTF-8")

	dir := tmp(t)
	write(t, filepath.Join(dir, "a.txt"), "hit\n")
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir), sandgate.WithWriteRoot(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	_, err = sb.Grep("hit", sandgate.GrepIn("\x00"))
	wantCode(t, "grep in NUL", err, sandgate.ErrPathInvalid, "NUL")
	_, err = sb.Grep("hit", sandgate.GrepIn("\xff"))
	wantCode(t, "grep in invalid", err, sandgate.ErrRequest, "path is not UTF-8")
	_, err = sb.Grep("\xff")
	wantCode(t, "grep pattern invalid", err, sandgate.ErrRequest, "pattern is not UTF-8")
	_, err = sb.Glob("\xff", "")
	wantCode(t, "glob pattern invalid", err, sandgate.ErrRequest, "pattern is not UTF-8")
	_, err = sb.Write("b\x00.txt", []byte("x"), false)
	wantCode(t, "write NUL", err, sandgate.ErrPathInvalid)
	_, err = sb.Write("\xff.txt", []byte("x"), false)
	if err == nil {
		t.Errorf("write to an invalid UTF-8 name succeeded")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("refused writes left %v", ents)
	}

	pol, err := sandgate.NewPolicy(sandgate.BaseDir(dir), sandgate.NetAllow("127.0.0.1:1"), sandgate.AllowHTTP(true))
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	d, err := pol.Authorize(sandgate.AuthorizeRequest{Scheme: "http", Host: "127.0.0.1\x00.evil", Port: 1})
	wantCode(t, "authorize NUL host", err, sandgate.ErrNetDenied, "neither a valid DNS name")
	if d.Allowed {
		t.Errorf("NUL host allowed")
	}
	_, err = pol.Authorize(sandgate.AuthorizeRequest{Scheme: "http", Host: "\xff", Port: 1})
	wantCode(t, "authorize invalid host", err, sandgate.ErrRequest, "host is not UTF-8")
	_, err = pol.Authorize(sandgate.AuthorizeRequest{Scheme: "", Host: "127.0.0.1", Port: 1})
	wantCode(t, "authorize empty scheme", err, sandgate.ErrNetDenied, "scheme")
	f, err := sandgate.NewFetcher(pol)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, c := range map[string]struct {
		url   string
		o     sandgate.FetchOptions
		words string
	}{
		"crlf header value": {"http://127.0.0.1:1/", sandgate.FetchOptions{Header: http.Header{"X-A": {"a\r\nHost: evil"}}}, "header `x-a`"},
		"nul header value":  {"http://127.0.0.1:1/", sandgate.FetchOptions{Header: http.Header{"X-A": {"a\x00b"}}}, "header `x-a`"},
		"crlf header name":  {"http://127.0.0.1:1/", sandgate.FetchOptions{Header: http.Header{"X A\r\n": {"a"}}}, "not a header name"},
		"empty header name": {"http://127.0.0.1:1/", sandgate.FetchOptions{Header: http.Header{"": {"a"}}}, "not a header name"},
		"method injection":  {"http://127.0.0.1:1/", sandgate.FetchOptions{Method: "GET / HTTP/1.1\r\nX:"}, "not an HTTP method"},
		"method NUL":        {"http://127.0.0.1:1/", sandgate.FetchOptions{Method: "G\x00"}, "not an HTTP method"},
		"url NUL":           {"http://127.0.0.1:1/\x00", sandgate.FetchOptions{}, "control character"},
		"url invalid":       {"http://127.0.0.1:1/\xff", sandgate.FetchOptions{}, "UTF-8"},
		"header invalid":    {"http://127.0.0.1:1/", sandgate.FetchOptions{Header: http.Header{"X-A": {"\xff"}}}, "UTF-8"},
	} {
		_, err := f.Fetch(ctx, c.url, c.o)
		wantCode(t, "fetch "+name, err, sandgate.ErrRequest, c.words)
	}
}

// Numbers past every cap, and negative ones, are refused naming the
// limit; never wrapped into a small or default value.
func TestAbuse25HugeAndNegativeNumbersAreRefused(t *testing.T) {
	dir := tmp(t)
	write(t, filepath.Join(dir, "a.txt"), strings.Repeat("hit\n", 3000))
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, n := range []int{math.MaxInt, 1 << 53, 1<<53 + 1, 1001, 0, -1, math.MinInt} {
		_, err := sb.Grep("hit", sandgate.GrepMaxResults(n))
		wantCode(t, "GrepMaxResults("+strconv.Itoa(n)+")", err, sandgate.ErrRequest, "max_results")
	}
	for _, n := range []int{math.MaxInt, 1<<32 + 1, 101} {
		_, err := sb.Grep("hit", sandgate.GrepContext(n, 0))
		wantCode(t, "GrepContext before "+strconv.Itoa(n), err, sandgate.ErrRequest, "before")
		_, err = sb.Grep("hit", sandgate.GrepContext(0, n))
		wantCode(t, "GrepContext after "+strconv.Itoa(n), err, sandgate.ErrRequest, "after")
	}
	_, err = sb.Grep("hit", sandgate.GrepContext(-1, 0))
	wantCode(t, "GrepContext -1", err, sandgate.ErrRequest, "negative")
	for _, ol := range [][2]int{{1, 2001}, {1, math.MaxInt}, {0, 1}, {1, 0}, {math.MinInt, 1}, {1, -1}} {
		_, err := sb.ReadLines("a.txt", ol[0], ol[1])
		wantCode(t, "ReadLines "+strconv.Itoa(ol[0])+","+strconv.Itoa(ol[1]), err, sandgate.ErrRequest)
	}
	// An offset past the end is an empty range of the whole file's count.
	for _, off := range []int{math.MaxInt, 1 << 40} {
		l, err := sb.ReadLines("a.txt", off, 5)
		if err != nil || l.Lines != 0 || l.TotalLines != 3000 || len(l.Content) != 0 {
			t.Errorf("ReadLines offset %d: %+v %v", off, l, err)
		}
	}
	x, err := sandgate.NewExecutor(execPolicy(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	_, err = x.Exec(context.Background(), "true", sandgate.ExecOptions{Timeout: -1})
	wantCode(t, "exec timeout -1", err, sandgate.ErrRequest, "timeout")
	pol, err := sandgate.NewPolicy(sandgate.BaseDir(dir), sandgate.NetAllow("127.0.0.1:1"), sandgate.AllowHTTP(true))
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	f, err := sandgate.NewFetcher(pol)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = f.Fetch(context.Background(), "http://127.0.0.1:1/", sandgate.FetchOptions{Timeout: math.MinInt64})
	wantCode(t, "fetch timeout min", err, sandgate.ErrRequest, "timeout")
	_, err = f.Fetch(context.Background(), "http://127.0.0.1:1/", sandgate.FetchOptions{MaxBytes: math.MinInt64})
	wantCode(t, "fetch max_bytes min", err, sandgate.ErrRequest, "max_bytes")
}

// runtime.Goexit in an audit callback (t.FailNow in a test's callback)
// is not stopped by recover: the handle keeps working afterwards and
// closes.
func TestAbuse25GoexitInAnAuditCallbackLeavesTheHandleUsable(t *testing.T) {
	goexitOnce := func() func(sandgate.AuditEvent) {
		var once sync.Once
		return func(sandgate.AuditEvent) { once.Do(runtime.Goexit) }
	}
	inGoroutine := func(f func()) {
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		<-done
	}
	x, err := sandgate.NewExecutor(execPolicy(t, ""), sandgate.WithExecAudit(goexitOnce()))
	if err != nil {
		t.Fatal(err)
	}
	inGoroutine(func() { x.Exec(context.Background(), "echo 1", sandgate.ExecOptions{}) })
	returns(t, "an Exec after the Goexit", func() {
		r, err := x.Exec(context.Background(), "echo 2", sandgate.ExecOptions{})
		if err != nil || string(r.Stdout) != "2\n" {
			t.Errorf("exec after Goexit: %v %v", r, err)
		}
	})
	returns(t, "Executor.Close", func() { x.Close() })

	dir := tmp(t)
	sb, err := sandgate.NewSandbox(sandgate.WithWriteRoot(dir), sandgate.WithReadRoots(dir), sandgate.WithAudit(goexitOnce()))
	if err != nil {
		t.Fatal(err)
	}
	inGoroutine(func() { sb.Write("a.txt", []byte("x"), false) })
	returns(t, "a Write after the Goexit", func() {
		if _, err := sb.Write("b.txt", []byte("y"), false); err != nil {
			t.Errorf("write after Goexit: %v", err)
		}
		if b, err := sb.Read("a.txt"); err != nil || string(b) != "x" {
			t.Errorf("the write the Goexit interrupted: %q %v", b, err)
		}
	})
	returns(t, "Sandbox.Close", func() { sb.Close() })
	_, err = sb.Read("a.txt")
	wantCode(t, "read after Close", err, sandgate.ErrClosed)
}

// Finalizers run while calls are in flight (GC at every allocation, GC
// in a loop and inside the audit callback); a dropped handle is never
// freed under a call that uses it.
func TestAbuse25FinalizersNeverFreeAHandleInUse(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	dir := tmp(t)
	write(t, filepath.Join(dir, "a.txt"), "A")
	stop := make(chan struct{})
	var gcs sync.WaitGroup
	gcs.Add(1)
	go func() {
		defer gcs.Done()
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	rounds := 200
	if raceEnabled || testing.Short() {
		rounds = 40
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir), sandgate.WithAudit(func(sandgate.AuditEvent) { runtime.GC() }))
				if err != nil {
					t.Error(err)
					return
				}
				// sb is dropped after its last use here, while the call runs.
				if b, err := sb.Read("a.txt"); err != nil || string(b) != "A" {
					t.Errorf("read: %q %v", b, err)
					return
				}
				r, err := sandgate.OpenRoot(dir)
				if err != nil {
					t.Error(err)
					return
				}
				if fi, err := r.Stat("a.txt"); err != nil || fi.Size() != 1 {
					t.Errorf("stat: %v", err)
					return
				}
				p, err := sandgate.ParsePolicy([]byte("[net]\nallow = [\"example.com\"]\n"), dir)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := p.Digest(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	gcs.Wait()
}

// procs lists the pids whose command line holds marker.
func procs(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), marker) {
			out = append(out, e.Name())
		}
	}
	return out
}

// A ctx cancelled during `sleep 30` (with a grandchild in the background),
// or done before Exec, ends the call promptly, and the whole process tree
// with it.
func TestAbuse25CancelledExecEndsItsProcessTree(t *testing.T) {
	x, err := sandgate.NewExecutor(execPolicy(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	marker := "30.0" + strconv.Itoa(os.Getpid()%1000+1000)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	start := time.Now()
	r, err := x.Exec(ctx, "sleep "+marker+" & sleep "+marker, sandgate.ExecOptions{})
	took := time.Since(start)
	if err != nil || !r.Aborted || r.ExitCode != 130 || took > 10*time.Second {
		t.Fatalf("cancelled exec: %+v %v after %v", r, err, took)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(procs(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if p := procs(marker); len(p) > 0 {
		t.Errorf("processes outlived the cancelled exec: %v", p)
	}
	done, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop()
	start = time.Now()
	r, err = x.Exec(done, "sleep "+marker, sandgate.ExecOptions{})
	if err != nil || !r.Aborted || time.Since(start) > 10*time.Second {
		t.Errorf("exec with a ctx past its deadline: %+v %v after %v", r, err, time.Since(start))
	}
}

// Hundreds of goroutines share one sandbox, root, executor and fetcher
// (run under -race by xtask), then one goroutine closes each while calls
// run: every answer is a result or E_CLOSED.
func TestAbuse25HundredsOfGoroutinesShareEachHandle(t *testing.T) {
	dir := tmp(t)
	write(t, filepath.Join(dir, "a.txt"), "A\n")
	var audits sync.Map
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir), sandgate.WithAudit(func(e sandgate.AuditEvent) { audits.Store(e.Op, true) }))
	if err != nil {
		t.Fatal(err)
	}
	r, err := sandgate.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	x, err := sandgate.NewExecutor(execPolicy(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := sandgate.NewPolicy(sandgate.BaseDir(dir), sandgate.NetAllow("127.0.0.1:1"), sandgate.AllowHTTP(true))
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	f, err := sandgate.NewFetcher(pol)
	if err != nil {
		t.Fatal(err)
	}
	okOrClosed := func(what string, err error) bool {
		if err != nil && !errors.Is(err, sandgate.ErrClosed) {
			t.Errorf("%s: %v", what, err)
			return false
		}
		return true
	}
	var wg sync.WaitGroup
	for g := 0; g < 200; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for i := 0; i < 10; i++ {
				if b, err := sb.Read("a.txt"); okOrClosed("read", err) && err == nil && string(b) != "A\n" {
					t.Errorf("read: %q", b)
				}
				if _, err := sb.Grep("A", sandgate.GrepAbortOn(ctx)); !okOrClosed("grep", err) {
					return
				}
				if _, err := r.Stat("a.txt"); !okOrClosed("stat", err) {
					return
				}
				_, err := f.Fetch(ctx, "http://127.0.0.1:1/", sandgate.FetchOptions{})
				if err != nil && !errors.Is(err, sandgate.ErrClosed) && !errors.Is(err, sandgate.ErrIO) {
					t.Errorf("fetch: %v", err)
				}
				if g%20 == 0 && i < 2 {
					res, err := x.Exec(ctx, "echo "+strconv.Itoa(g), sandgate.ExecOptions{})
					if okOrClosed("exec", err) && err == nil && string(res.Stdout) != strconv.Itoa(g)+"\n" {
						t.Errorf("exec %d: %+v", g, res)
					}
				}
			}
		}(g)
	}
	time.Sleep(200 * time.Millisecond)
	var closers sync.WaitGroup
	for _, c := range []func() error{sb.Close, r.Close, x.Close, f.Close, sb.Close, x.Close} {
		closers.Add(1)
		go func() { defer closers.Done(); c() }()
	}
	returns(t, "the goroutines", wg.Wait)
	closers.Wait()
	if _, ok := audits.Load("read"); !ok {
		t.Errorf("no read was audited")
	}
}

func fds(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// 10,000 calls with a ctx (each an abort signal and a watcher goroutine),
// refused and served, leave no goroutine and no descriptor behind.
func TestAbuse25TenThousandCallsLeaveNoGoroutineOrDescriptor(t *testing.T) {
	dir := tmp(t)
	write(t, filepath.Join(dir, "a.txt"), "hit\n")
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	r, err := sandgate.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	round := func(n int) {
		for i := 0; i < n; i++ {
			sb.ReadLinesContext(ctx, "a.txt", 1, 1)
			sb.ReadLinesContext(ctx, "missing\x00", 1, 1)
			sb.GlobContext(ctx, "*.txt", "")
			r.ReadFile("a.txt")
			r.Stat("../escape")
		}
	}
	round(100)
	runtime.GC()
	g0, f0 := runtime.NumGoroutine(), fds(t)
	round(2000) // 10,000 calls
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if g1, f1 := runtime.NumGoroutine(), fds(t); g1 > g0+2 || f1 > f0 {
		t.Errorf("goroutines %d -> %d, descriptors %d -> %d", g0, g1, f0, f1)
	}
}
