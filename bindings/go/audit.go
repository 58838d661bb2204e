package sandgate

/*
#include "sandgate.h"
*/
import "C"

import (
	"runtime/cgo"
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

//export sandgateGoAudit
func sandgateGoAudit(user unsafe.Pointer, ev *C.struct_sg_audit_event) {
	defer func() { _ = recover() }() // never unwind through the library
	f, ok := cgo.Handle(uintptr(user)).Value().(func(AuditEvent))
	if !ok || ev == nil {
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
	f(e)
}
