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

// AuditEvent is one audited operation. It never holds file content.
type AuditEvent struct {
	Op      string    // "read", "write", …
	Path    string    // root-relative ("from -> to" for rename)
	Size    uint64    // bytes read or written, when HasSize
	HasSize bool      //
	Outcome Code      // "OK" or the refusal's code
	Time    time.Time // when the operation finished
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
	}
	if ev.path != nil && ev.path_len > 0 {
		e.Path = C.GoStringN(ev.path, C.int(ev.path_len))
	}
	f(e)
}
