package sandgate

/*
#include "sandgate.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// Code is an error code name such as "E_PATH_ESCAPE" (the table is in
// docs/reference/errors.md).
type Code string

// The codes themselves (CodePathInvalid … CodeInternal), their sentinels
// (ErrPathInvalid … ErrInternal) and AllCodes are generated into codes.go.

// Error is a sandgate error: its code, a message, and, when known,
// the root-relative path, the deny pattern, the policy key and the errno.
//
// errors.Is(err, ErrX) compares codes; errors.Is also answers true for
// fs.ErrNotExist (E_NOT_FOUND), fs.ErrExist (E_EXISTS, and E_NOT_EMPTY as
// syscall.ENOTEMPTY does), fs.ErrPermission
// (E_DENIED, E_FS_PROTECTED, E_HARDLINK, E_NET_DENIED) and fs.ErrClosed
// (E_CLOSED). Unwrap yields the syscall.Errno when there is one.
type Error struct {
	Code    Code
	Message string
	Path    string // root-relative; "" when none
	Pattern string // the deny-write pattern; "" when none
	Key     string // the dotted policy key (E_POLICY); "" when none
	Errno   syscall.Errno
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// Unwrap returns the OS error behind e, or nil.
func (e *Error) Unwrap() error {
	if e.Errno != 0 {
		return e.Errno
	}
	return nil
}

// Is reports whether target is a sandgate error with the same code (a
// sentinel such as ErrNotFound) or the io/fs error that the code means.
func (e *Error) Is(target error) bool {
	if t, ok := target.(*Error); ok {
		return t.Code == e.Code
	}
	switch target {
	case fs.ErrNotExist:
		return e.Code == CodeNotFound
	case fs.ErrExist:
		// Like syscall.ENOTEMPTY, E_NOT_EMPTY also matches fs.ErrExist.
		return e.Code == CodeExists || e.Code == CodeNotEmpty
	case fs.ErrPermission:
		switch e.Code {
		case CodeDenied, CodeFSProtected, CodeHardlink, CodeNetDenied:
			return true
		}
	case fs.ErrClosed:
		return e.Code == CodeClosed
	}
	return false
}

// CodeName is the library's name for a status value ("" if not a code).
func CodeName(status uint32) Code {
	p := C.sg_code_name(C.sg_status(status))
	if p == nil {
		return ""
	}
	return Code(C.GoString(p))
}

func optString(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// takeError converts and frees an error object. status is the call's
// return value, used when the library handed back no object.
func takeError(status C.sg_status, e *C.sg_error) *Error {
	if e == nil {
		name := CodeName(uint32(status))
		if name == "" {
			name = CodeInternal
		}
		return &Error{Code: name, Message: fmt.Sprintf("status %d without an error object", status)}
	}
	defer C.sg_error_free(e)
	return &Error{
		Code:    Code(optString(C.sg_error_code_name(e))),
		Message: optString(C.sg_error_message(e)),
		Path:    optString(C.sg_error_path(e)),
		Pattern: optString(C.sg_error_pattern(e)),
		Key:     optString(C.sg_error_key(e)),
		Errno:   syscall.Errno(C.sg_error_errno(e)),
	}
}

// closedError is what a call on a closed handle answers (made in Go: the
// handle is gone, so the library is not asked).
func closedError(what string) *Error {
	return &Error{Code: CodeClosed, Message: "the " + what + " was closed"}
}

func requestError(msg string) *Error {
	return &Error{Code: CodeRequest, Message: msg}
}

// asError extracts the *Error inside err (through PathError/LinkError), or nil.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
