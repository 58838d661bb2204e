// Package sandgate is the Go binding of sandgate
// (https://github.com/sandgate-dev/sandgate): confined file access beneath a
// root (Root, a drop-in for os.Root), the agent-facing Sandbox, policies and
// the shell Executor.
//
// It links the installed libsandgate statically: cgo asks pkg-config for
// the module sandgate-static, whose flags name libsandgate.a and the system
// libraries it needs, so a built program needs no shared library. Install
// the C library first (see the README) and, for a prefix pkg-config does not
// search, set PKG_CONFIG_PATH to its lib/pkgconfig directory.
package sandgate

/*
#cgo pkg-config: sandgate-static
#include <stdlib.h>
#include "sandgate.h"

*/
import "C"

import (
	"bytes"
	"unsafe"
)

// ABIMajor and ABIMinor are the ABI version this binding was built against.
const (
	ABIMajor = C.SANDGATE_ABI_MAJOR
	ABIMinor = C.SANDGATE_ABI_MINOR
)

// Version is the version of the linked library ("0.1.0").
func Version() string { return C.GoString(C.sg_version()) }

// ABIVersion is (major << 16) | minor of the linked library.
func ABIVersion() uint32 { return uint32(C.sg_abi_version()) }

// cstr returns a pointer to s's bytes and their length for a (ptr, len)
// argument. The bytes are Go memory, which cgo keeps alive for the call.
func cstr(s string) (*C.char, C.size_t) {
	if len(s) == 0 {
		return nil, 0
	}
	return (*C.char)(unsafe.Pointer(unsafe.StringData(s))), C.size_t(len(s))
}

// cbytes is cstr for a byte slice.
func cbytes(b []byte) (*C.uint8_t, C.size_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(b))), C.size_t(len(b))
}

// takeBytes copies and frees library-owned bytes.
func takeBytes(b *C.sg_bytes) []byte {
	defer C.sg_bytes_free(b)
	if b.ptr == nil || b.len == 0 {
		return []byte{}
	}
	return bytes.Clone(cView(unsafe.Pointer(b.ptr), uint64(b.len)))
}

// cView is the n bytes of C memory at p, not copied: valid while the
// library owns them. The length is the size_t itself: C.GoBytes (and
// C.GoStringN) take a C int, which wraps past 2 GiB, so a larger result
// would come back cut short, or panic.
func cView(p unsafe.Pointer, n uint64) []byte {
	return unsafe.Slice((*byte)(p), n)
}
