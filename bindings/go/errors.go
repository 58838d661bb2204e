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

// Code is a SPEC §8 error code name such as "E_PATH_ESCAPE".
type Code string

// The SPEC §8 codes, in C-value order (E_PATH_INVALID = 1 … E_INTERNAL = 25).
const (
	CodePathInvalid        Code = "E_PATH_INVALID"
	CodePathEscape         Code = "E_PATH_ESCAPE"
	CodeNotFound           Code = "E_NOT_FOUND"
	CodeExists             Code = "E_EXISTS"
	CodeNotFile            Code = "E_NOT_FILE"
	CodeNotDir             Code = "E_NOT_DIR"
	CodeNotEmpty           Code = "E_NOT_EMPTY"
	CodeDenied             Code = "E_DENIED"
	CodeFSProtected        Code = "E_FS_PROTECTED"
	CodeTooLarge           Code = "E_TOO_LARGE"
	CodeSymlink            Code = "E_SYMLINK"
	CodeHardlink           Code = "E_HARDLINK"
	CodeLoop               Code = "E_LOOP"
	CodeEditNoMatch        Code = "E_EDIT_NO_MATCH"
	CodeEditAmbiguous      Code = "E_EDIT_AMBIGUOUS"
	CodePolicy             Code = "E_POLICY"
	CodeTimeout            Code = "E_TIMEOUT"
	CodeAborted            Code = "E_ABORTED"
	CodeNotStarted         Code = "E_NOT_STARTED"
	CodeConfineUnavailable Code = "E_CONFINE_UNAVAILABLE"
	CodeNetDenied          Code = "E_NET_DENIED"
	CodeClosed             Code = "E_CLOSED"
	CodeRequest            Code = "E_REQUEST"
	CodeIO                 Code = "E_IO"
	CodeInternal           Code = "E_INTERNAL"
)

// Error is a sandgate error: its SPEC §8 code, a message, and, when known,
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

// Sentinels, one per SPEC §8 code, for errors.Is.
var (
	ErrPathInvalid        = &Error{Code: CodePathInvalid}
	ErrPathEscape         = &Error{Code: CodePathEscape}
	ErrNotFound           = &Error{Code: CodeNotFound}
	ErrExists             = &Error{Code: CodeExists}
	ErrNotFile            = &Error{Code: CodeNotFile}
	ErrNotDir             = &Error{Code: CodeNotDir}
	ErrNotEmpty           = &Error{Code: CodeNotEmpty}
	ErrDenied             = &Error{Code: CodeDenied}
	ErrFSProtected        = &Error{Code: CodeFSProtected}
	ErrTooLarge           = &Error{Code: CodeTooLarge}
	ErrSymlink            = &Error{Code: CodeSymlink}
	ErrHardlink           = &Error{Code: CodeHardlink}
	ErrLoop               = &Error{Code: CodeLoop}
	ErrEditNoMatch        = &Error{Code: CodeEditNoMatch}
	ErrEditAmbiguous      = &Error{Code: CodeEditAmbiguous}
	ErrPolicy             = &Error{Code: CodePolicy}
	ErrTimeout            = &Error{Code: CodeTimeout}
	ErrAborted            = &Error{Code: CodeAborted}
	ErrNotStarted         = &Error{Code: CodeNotStarted}
	ErrConfineUnavailable = &Error{Code: CodeConfineUnavailable}
	ErrNetDenied          = &Error{Code: CodeNetDenied}
	ErrClosed             = &Error{Code: CodeClosed}
	ErrRequest            = &Error{Code: CodeRequest}
	ErrIO                 = &Error{Code: CodeIO}
	ErrInternal           = &Error{Code: CodeInternal}
)

// AllCodes lists every SPEC §8 error code in C-value order (index i is
// value i+1).
var AllCodes = []Code{
	CodePathInvalid, CodePathEscape, CodeNotFound, CodeExists, CodeNotFile,
	CodeNotDir, CodeNotEmpty, CodeDenied, CodeFSProtected, CodeTooLarge,
	CodeSymlink, CodeHardlink, CodeLoop, CodeEditNoMatch, CodeEditAmbiguous,
	CodePolicy, CodeTimeout, CodeAborted, CodeNotStarted,
	CodeConfineUnavailable, CodeNetDenied, CodeClosed, CodeRequest, CodeIO,
	CodeInternal,
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
