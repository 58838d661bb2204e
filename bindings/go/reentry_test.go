package sandgate_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandgate-dev/sandgate/bindings/go"
)

// returns runs f on its own goroutine and fails the test if it has not
// returned within 30 seconds: a deadlock fails instead of hanging the run.
func returns(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return within 30 s (deadlock)", what)
	}
}

func TestBind9AuditCallbackMayCloseItsSandbox(t *testing.T) {
	dir := tmp(t)
	write(t, filepath.Join(dir, "a.txt"), "A")
	var sb *sandgate.Sandbox
	var closeErr error
	var events atomic.Int32
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir), sandgate.WithAudit(func(sandgate.AuditEvent) {
		if events.Add(1) == 1 {
			closeErr = sb.Close()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	returns(t, "Read whose audit callback closes the sandbox", func() { data, err = sb.Read("a.txt") })
	if err != nil || string(data) != "A" {
		t.Errorf("the read the callback ran in: %q, %v", data, err)
	}
	if closeErr != nil {
		t.Errorf("Close in the callback: %v", closeErr)
	}
	if _, err := sb.Read("a.txt"); !errors.Is(err, sandgate.ErrClosed) {
		t.Errorf("read after Close: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestBind9AuditCallbackMayCallItsSandboxWhileCloseIsPending(t *testing.T) {
	dir := tmp(t)
	write(t, filepath.Join(dir, "a.txt"), "A")
	var sb *sandgate.Sandbox
	var nested error
	var events atomic.Int32
	closed := make(chan error, 1)
	sb, err := sandgate.NewSandbox(sandgate.WithReadRoots(dir), sandgate.WithAudit(func(sandgate.AuditEvent) {
		switch events.Add(1) {
		case 1: // the outer Stat: a call back in, no Close pending
			if _, err := sb.Stat("a.txt"); err != nil {
				nested = err
			}
		case 3: // the outer Read: Close from another goroutine, then a call back in
			go func() { closed <- sb.Close() }()
			time.Sleep(100 * time.Millisecond) // let Close reach the sandbox first
			_, nested = sb.Stat("a.txt")
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	returns(t, "Stat whose audit callback calls Stat", func() { _, err = sb.Stat("a.txt") })
	if err != nil || nested != nil {
		t.Fatalf("stat: %v; the callback's stat: %v", err, nested)
	}
	returns(t, "Read whose audit callback calls Stat while Close is pending", func() { _, err = sb.Read("a.txt") })
	if err != nil {
		t.Errorf("the read the callback ran in: %v", err)
	}
	if nested != nil && !errors.Is(nested, sandgate.ErrClosed) {
		t.Errorf("the callback's stat: %v", nested)
	}
	returns(t, "Close from another goroutine", func() { err = <-closed })
	if err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := sb.Stat("a.txt"); !errors.Is(err, sandgate.ErrClosed) {
		t.Errorf("stat after Close: %v", err)
	}
}

func TestBind9ExecAuditCallbackMayCloseItsExecutor(t *testing.T) {
	var x *sandgate.Executor
	var closeErr error
	var events atomic.Int32
	x, err := sandgate.NewExecutor(execPolicy(t, ""), sandgate.WithExecAudit(func(sandgate.AuditEvent) {
		if events.Add(1) == 1 {
			closeErr = x.Close()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	var r *sandgate.ExecResult
	returns(t, "Exec whose audit callback closes the executor", func() {
		r, err = x.Exec(context.Background(), "echo hi", sandgate.ExecOptions{})
	})
	if err != nil || r.ExitCode != 0 || string(r.Stdout) != "hi\n" {
		t.Errorf("the exec the callback ran in: %+v, %v", r, err)
	}
	if closeErr != nil {
		t.Errorf("Close in the callback: %v", closeErr)
	}
	if _, err := x.Exec(context.Background(), "true", sandgate.ExecOptions{}); !errors.Is(err, sandgate.ErrClosed) {
		t.Errorf("exec after Close: %v", err)
	}
	if err := x.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Close from another goroutine while a command runs: the command ends with
// its own result (the executor is freed when it returns, not under it), and
// every call after Close, on any goroutine, answers E_CLOSED.
func TestBind9CloseWhileACommandRuns(t *testing.T) {
	x, err := sandgate.NewExecutor(execPolicy(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var r *sandgate.ExecResult
	var execErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		close(started)
		r, execErr = x.Exec(context.Background(), "sleep 2; echo done", sandgate.ExecOptions{})
	}()
	<-started
	time.Sleep(300 * time.Millisecond) // let the command start
	returns(t, "Close while a command runs", func() { err = x.Close() })
	if err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := x.Exec(context.Background(), "true", sandgate.ExecOptions{}); !errors.Is(err, sandgate.ErrClosed) {
		t.Errorf("exec after Close: %v", err)
	}
	returns(t, "the running Exec", wg.Wait)
	if execErr != nil {
		if !errors.Is(execErr, sandgate.ErrClosed) {
			t.Errorf("the running exec: %v", execErr)
		}
	} else if r.ExitCode != 0 || string(r.Stdout) != "done\n" {
		t.Errorf("the running exec: %+v", r)
	}
}
