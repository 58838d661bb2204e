package sandgate

/*
#include "sandgate.h"
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

// AuditEvent is one audited operation. It never holds file content, nor a
// command's text or output.
//
// An Executor's event (WithExecAudit) has Op "exec", Path the working
// directory as asked ("" for the root), Size the bytes of output returned,
// ExitCode when the command ran and Limit when a limit stopped it. File
// operations and refused commands have no exit code and an empty Limit.
type AuditEvent struct {
	Op      string    // "read", "write", …, "exec"
	Path    string    // root-relative ("from -> to" for rename)
	Size    uint64    // bytes read or written, when HasSize
	HasSize bool      //
	Outcome Code      // "OK" or the refusal's code
	Time    time.Time // when the operation finished
	// ExitCode is the command's exit code, when HasExitCode.
	ExitCode    int
	HasExitCode bool
	// Limit names the limit that stopped the command ("memory", "tasks",
	// "cpu", "output", "timeout" or "file_size"), when one did and sandgate saw it;
	// empty otherwise.
	Limit string
}

// maxAuditErrors is how many of a callback's panics AuditErrors keeps
// (the last ones), as the Python binding keeps the last 100 exceptions.
const maxAuditErrors = 100

// auditSink is what an audit callback's cgo.Handle holds: the callback,
// and the panics it raised, recovered (a panic must not unwind through the
// library) and kept for AuditErrors rather than dropped.
type auditSink struct {
	fn     func(AuditEvent)
	mu     sync.Mutex
	errors []error
}

func newAuditSink(fn func(AuditEvent)) *auditSink {
	if fn == nil {
		return nil
	}
	return &auditSink{fn: fn}
}

// call runs the callback, keeping a panic it raises.
func (s *auditSink) call(e AuditEvent) {
	defer func() {
		if r := recover(); r != nil {
			s.keep(r)
		}
	}()
	s.fn(e)
}

func (s *auditSink) keep(r any) {
	var err error
	if e, ok := r.(error); ok {
		err = fmt.Errorf("sandgate: the audit callback panicked: %w", e)
	} else {
		err = fmt.Errorf("sandgate: the audit callback panicked: %v", r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors = append(s.errors, err)
	if n := len(s.errors); n > maxAuditErrors {
		s.errors = append(s.errors[:0:0], s.errors[n-maxAuditErrors:]...)
	}
}

// kept is a copy of the panics kept (nil for no sink).
func (s *auditSink) kept() []error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errors...)
}

//export sandgateGoAudit
func sandgateGoAudit(user unsafe.Pointer, ev *C.struct_sg_audit_event) {
	defer func() { _ = recover() }() // never unwind through the library
	sink, ok := cgo.Handle(uintptr(user)).Value().(*auditSink)
	if !ok || sink == nil || ev == nil {
		return
	}
	e := AuditEvent{
		Op:      C.GoString(ev.op),
		Size:    uint64(ev.size),
		HasSize: bool(ev.has_size),
		Outcome: CodeName(uint32(ev.outcome)),
		Time:    time.Unix(int64(ev.time_sec), int64(ev.time_nsec)),

		ExitCode:    int(ev.exit_code),
		HasExitCode: bool(ev.has_exit_code),
	}
	if ev.limit != nil {
		e.Limit = C.GoString(ev.limit)
	}
	if ev.path != nil && ev.path_len > 0 {
		e.Path = string(cView(unsafe.Pointer(ev.path), uint64(ev.path_len)))
	}
	sink.call(e)
}
