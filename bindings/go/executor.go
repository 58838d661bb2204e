package sandgate

/*
#include <stdint.h>
#include "sandgate.h"

// The exported Go audit callback (audit.go), set on an executor with the
// cgo.Handle as user data (no Go-side uintptr -> pointer conversion).
extern void sandgateGoAudit(void *user, struct sg_audit_event *event);
static sg_status sandgate_executor_set_audit(const sg_executor *x, uintptr_t handle, sg_error **err) {
	return sg_executor_set_audit(x, (sg_audit_fn)sandgateGoAudit, (void *)handle, err);
}
*/
import "C"

import (
	"context"
	"encoding/json"
	"runtime"
	"runtime/cgo"
	"sync"
	"time"
)

// Executor runs shell commands as a policy grants (docs/reference/executor.md). Exec may be
// called from several goroutines at once.
type Executor struct {
	calls inflight
	ptr   *C.sg_executor // set once; freed by the last to leave calls
	audit cgo.Handle
	sink  *auditSink
}

// ExecutorOption configures an Executor (NewExecutor).
type ExecutorOption func(*executorConfig)

type executorConfig struct {
	audit func(AuditEvent)
}

// WithExecAudit sets the executor's audit sink, called synchronously once
// per Exec (refused ones too) on the goroutine that ran it, with the exit
// code and the limit that stopped the command; never the command's text or
// output. It may call back into the same executor, Close included: Close
// from the callback refuses later calls at once, and the executor is
// disposed of and freed when the Exec the callback runs in returns. A
// panic in it is recovered (it must not unwind through the library) and
// kept for AuditErrors.
func WithExecAudit(f func(AuditEvent)) ExecutorOption {
	return func(c *executorConfig) { c.audit = f }
}

// NewExecutor is the executor p grants (not started; Exec starts it on
// first use), configured by opts (e.g. WithExecAudit). With exec disabled
// and no process_allow, every command is refused with E_DENIED.
func NewExecutor(p *Policy, opts ...ExecutorOption) (*Executor, error) {
	var c executorConfig
	for _, opt := range opts {
		opt(&c)
	}
	var out *C.sg_executor
	err := p.with(func(pp *C.sg_policy) error {
		var e *C.sg_error
		if st := C.sg_executor_new(pp, &out, &e); st != C.SG_OK {
			return takeError(st, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	x := &Executor{ptr: out, sink: newAuditSink(c.audit)}
	if x.sink != nil {
		x.audit = cgo.NewHandle(x.sink)
		var e *C.sg_error
		if st := C.sandgate_executor_set_audit(out, C.uintptr_t(x.audit), &e); st != C.SG_OK {
			C.sg_executor_free(out)
			x.audit.Delete()
			return nil, takeError(st, e)
		}
	}
	runtime.SetFinalizer(x, (*Executor).Close)
	return x, nil
}

func (x *Executor) with(f func(p *C.sg_executor, e **C.sg_error) C.sg_status) error {
	if x == nil {
		return requestError("executor is nil")
	}
	if x.ptr == nil { // a zero Executor, never built
		return closedError("executor")
	}
	ok, free := x.calls.enter()
	if free {
		x.free()
	}
	if !ok {
		return closedError("executor")
	}
	defer x.leave()
	var e *C.sg_error
	if st := f(x.ptr, &e); st != C.SG_OK {
		return takeError(st, e)
	}
	return nil
}

// leave counts a call (or Close) out, freeing the executor when it was the
// last one out after Close.
func (x *Executor) leave() {
	if x.calls.leave() {
		x.free()
	}
}

func (x *Executor) free() {
	C.sg_executor_free(x.ptr)
	if x.audit != 0 {
		x.audit.Delete()
	}
}

// AuditErrors answers the panics the audit callback raised, recovered
// and kept (the last 100, oldest first), after Close too; nil without a
// callback.
func (x *Executor) AuditErrors() []error {
	if x == nil {
		return nil
	}
	return x.sink.kept()
}

// Start creates the private temporary directory and prepares confinement
// (E_CONFINE_UNAVAILABLE with confine = "required" on a kernel lacking a
// part). Starting twice does nothing.
func (x *Executor) Start() error {
	return x.with(func(p *C.sg_executor, e **C.sg_error) C.sg_status {
		return C.sg_executor_start(p, e)
	})
}

// Dispose ends the session (removes the temporary directory); the executor
// can be started again.
func (x *Executor) Dispose() error {
	return x.with(func(p *C.sg_executor, e **C.sg_error) C.sg_status {
		return C.sg_executor_dispose(p, e)
	})
}

// Close closes the executor: every later call answers E_CLOSED. It does
// not wait: commands already running run to their end, and the executor is
// disposed of (its temporary directory removed) and freed when the last of
// them returns, at once when none runs. So it may be called from an audit
// callback, or while another goroutine's Exec runs. Closing twice is fine.
func (x *Executor) Close() error {
	if x == nil || x.ptr == nil || !x.calls.close() {
		return nil
	}
	runtime.SetFinalizer(x, nil)
	x.leave()
	return nil
}

// ExecOptions are the per-command settings.
type ExecOptions struct {
	// Cwd is a name beneath the write root (or the first read root), or
	// an absolute host path inside that root; "" means that root itself.
	Cwd string
	// Timeout ends the command (exit code 124); 0 means the policy's
	// timeout_ms. A longer one runs under the policy's, and
	// Confinement["notes"] says so. Rounded up to whole milliseconds.
	Timeout time.Duration
}

// ExecResult is what one command did.
type ExecResult struct {
	ExitCode  int           // the shell's; 124 timeout, 130 abort, 127 could not start
	Stdout    []byte        // redacted
	Stderr    []byte        // redacted
	Truncated bool          // output past max_output_bytes was dropped
	TimedOut  bool          // the timeout ended it
	Aborted   bool          // ctx cancellation ended it
	Duration  time.Duration // wall-clock time
	// Confinement is the report of what was in force, as the JSON
	// endpoint's "confined": "fs", "net", "scoped", "seccomp",
	// "namespaces" and "view" (booleans), "missing" (each guarantee not in
	// force, e.g. "namespaces"), "notes".
	Confinement    map[string]any
	EnvNamesDigest string // sha256 of the sorted names of the child's environment
	// Limit names the limit that ended the command, when known: "memory",
	// "tasks", "cpu", "output", "timeout" or "file_size"; empty otherwise.
	Limit string
	// ProtectedChanges lists what the command did to protected paths and
	// what was done about it.
	ProtectedChanges []ProtectedChange
}

// ProtectedChange is one protected entry a command changed.
type ProtectedChange struct {
	Path    string `json:"path"`    // beneath the write root
	Pattern string `json:"pattern"` // the deny-write pattern, as written
	Action  string `json:"action"`  // "restored", "quarantined" or "reported"
}

// Exec runs command with the policy's shell. Cancelling ctx ends the
// command (and everything it started) with exit code 130 and Aborted set;
// a ctx already done when Exec is called ends the command at once. A
// command that ran answers a result whatever its exit code; an error means
// it was refused before anything ran.
func (x *Executor) Exec(ctx context.Context, command string, opts ExecOptions) (*ExecResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	var timeoutMS uint64
	if opts.Timeout < 0 {
		return nil, requestError("timeout must not be negative")
	}
	if opts.Timeout > 0 {
		timeoutMS = ceilMillis(opts.Timeout)
	}
	abort, release, err := abortOn(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	var r C.sg_exec_result
	err = x.with(func(p *C.sg_executor, e **C.sg_error) C.sg_status {
		c, cn := cstr(command)
		var cwd *C.char
		var cwdn C.size_t
		if opts.Cwd != "" {
			cwd, cwdn = cstr(opts.Cwd)
		}
		return C.sg_executor_exec(p, c, cn, cwd, cwdn, C.uint64_t(timeoutMS), abort, &r, e)
	})
	defer C.sg_exec_result_free(&r)
	if err != nil {
		return nil, err
	}
	res := &ExecResult{
		ExitCode:       int(r.exit_code),
		Stdout:         takeBytes(&r.stdout_bytes),
		Stderr:         takeBytes(&r.stderr_bytes),
		Truncated:      bool(r.truncated),
		TimedOut:       bool(r.timed_out),
		Aborted:        bool(r.aborted),
		Duration:       time.Duration(r.duration_ms) * time.Millisecond,
		EnvNamesDigest: string(takeBytes(&r.env_names_digest)),
		Limit:          string(takeBytes(&r.limit)),
	}
	if pc := takeBytes(&r.protected_changes_json); len(pc) > 0 {
		_ = json.Unmarshal(pc, &res.ProtectedChanges)
	}
	if conf := takeBytes(&r.confinement_json); len(conf) > 0 {
		_ = json.Unmarshal(conf, &res.Confinement)
	}
	return res, nil
}

// ceilMillis is d (positive) in whole milliseconds, rounded up. Adding
// 999,999 ns before dividing would overflow past math.MaxInt64 - 999,999
// and send a wrapped count of about 1.8e19 ms (which the library echoes
// back in its notes) instead of the 9.2e12 asked for.
func ceilMillis(d time.Duration) uint64 {
	ms := uint64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// abortOn is an abort signal triggered when ctx is done (nil when ctx can
// never be), and the function that stops watching ctx and frees it.
func abortOn(ctx context.Context) (*C.sg_abort, func(), error) {
	if ctx.Done() == nil {
		return nil, func() {}, nil
	}
	var abort *C.sg_abort
	var e *C.sg_error
	if st := C.sg_abort_new(&abort, &e); st != C.SG_OK {
		return nil, nil, takeError(st, e)
	}
	trigger := func() {
		var e *C.sg_error
		if C.sg_abort_trigger(abort, &e) != C.SG_OK {
			C.sg_error_free(e)
		}
	}
	// Done already: triggered before the call, not whenever the watcher
	// runs (a short call would be over by then).
	if ctx.Err() != nil {
		trigger()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			trigger()
		case <-stop:
		}
	}()
	return abort, func() {
		close(stop)
		// The watcher is gone before the signal is freed.
		wg.Wait()
		C.sg_abort_free(abort)
	}, nil
}
