package sandgate

/*
#include "sandgate.h"
*/
import "C"

import (
	"io"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Resolver selects how a Root resolves names (docs/reference/resolution.md).
type Resolver uint32

const (
	// ResolverAuto uses openat2 where the kernel has it, else the walk.
	ResolverAuto Resolver = C.SG_RESOLVER_AUTO
	// ResolverOpenat2 forces openat2(RESOLVE_BENEATH).
	ResolverOpenat2 Resolver = C.SG_RESOLVER_OPENAT2
	// ResolverWalk forces the descriptor walk.
	ResolverWalk Resolver = C.SG_RESOLVER_WALK
)

// Root is a directory that names resolve beneath, with the method set and
// signatures of os.Root (docs/reference/resolution.md: `..` inside is allowed, escapes are
// refused). Its errors are *os.PathError / *os.LinkError wrapping *Error.
// A Root is safe for concurrent use; Close waits for calls in progress.
type Root struct {
	mu   sync.RWMutex
	ptr  *C.sg_root
	name string
}

// OpenRoot opens the named directory as a Root, like os.OpenRoot.
func OpenRoot(name string) (*Root, error) {
	return OpenRootWithResolver(name, ResolverAuto)
}

// OpenRootWithResolver is OpenRoot with a chosen resolver.
func OpenRootWithResolver(name string, resolver Resolver) (*Root, error) {
	var out *C.sg_root
	var e *C.sg_error
	p, n := cstr(name)
	if st := C.sg_root_open(p, n, C.sg_resolver(resolver), &out, &e); st != C.SG_OK {
		return nil, &os.PathError{Op: "open", Path: name, Err: takeError(st, e)}
	}
	return newRoot(out, name), nil
}

func newRoot(ptr *C.sg_root, fallback string) *Root {
	r := &Root{ptr: ptr, name: fallback}
	var b C.sg_bytes
	var e *C.sg_error
	if st := C.sg_root_name(ptr, &b, &e); st == C.SG_OK {
		r.name = string(takeBytes(&b))
	} else {
		takeError(st, e)
	}
	runtime.SetFinalizer(r, (*Root).Close)
	return r
}

// Name returns the name of the directory presented to OpenRoot (for a
// Root from Root.OpenRoot, the parent's name joined with the path). It is
// safe to call Name after Close.
func (r *Root) Name() string { return r.name }

// Close closes the Root. After Close, methods return errors (E_CLOSED,
// which errors.Is matches with fs.ErrClosed). Closing twice is fine.
func (r *Root) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ptr != nil {
		C.sg_root_free(r.ptr)
		r.ptr = nil
		runtime.SetFinalizer(r, nil)
	}
	return nil
}

// with runs f on the live handle, or answers E_CLOSED.
func (r *Root) with(f func(p *C.sg_root) error) error {
	if r == nil {
		return requestError("root is nil")
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.ptr == nil {
		return closedError("root")
	}
	return f(r.ptr)
}

// Open opens the named file in the root for reading.
func (r *Root) Open(name string) (*os.File, error) {
	return r.OpenFile(name, os.O_RDONLY, 0)
}

// Create creates or truncates the named file in the root.
func (r *Root) Create(name string) (*os.File, error) {
	return r.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// OpenFile opens the named file in the root with os.OpenFile-style flags
// (O_RDONLY, O_WRONLY, O_RDWR, O_CREATE, O_EXCL, O_TRUNC, O_APPEND; other
// flags such as O_SYNC, and bits beyond 32, answer E_REQUEST). perm may
// hold only 0o777 bits (any other is E_REQUEST).
func (r *Root) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	if perm&0o777 != perm {
		return nil, &os.PathError{Op: "openat", Path: name, Err: unsupportedMode(perm)}
	}
	if flag != int(int32(flag)) {
		// C.int32_t(flag) would keep the low 32 bits and drop the rest
		// unseen, past the library's check of unsupported flags.
		return nil, &os.PathError{Op: "openat", Path: name, Err: requestError("flags " + strconv.Itoa(flag) + " do not fit in 32 bits")}
	}
	var fd C.int32_t = -1
	err := r.with(func(p *C.sg_root) error {
		var e *C.sg_error
		s, n := cstr(name)
		if st := C.sg_root_open_file(p, s, n, C.int32_t(flag|syscall.O_CLOEXEC), C.uint32_t(perm), &fd, &e); st != C.SG_OK {
			return takeError(st, e)
		}
		return nil
	})
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), joinPath(r.name, name)), nil
}

// unsupportedMode is the refusal of a perm holding more than the 0o777
// permission bits (a setuid, setgid or sticky bit, a type bit): E_REQUEST
// naming it, as the Python and Node bindings refuse it.
func unsupportedMode(perm os.FileMode) *Error {
	return requestError("perm " + perm.String() + ": unsupported file mode (only the permission bits 0o777)")
}

// OpenRoot opens the named directory in the root as a Root of its own.
func (r *Root) OpenRoot(name string) (*Root, error) {
	var out *C.sg_root
	err := r.with(func(p *C.sg_root) error {
		var e *C.sg_error
		s, n := cstr(name)
		if st := C.sg_root_open_root(p, s, n, &out, &e); st != C.SG_OK {
			return takeError(st, e)
		}
		return nil
	})
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	return newRoot(out, joinPath(r.name, name)), nil
}

// Mkdir creates a new directory in the root with the permission bits perm
// (before the umask). perm may hold only 0o777 bits (any other is
// E_REQUEST).
func (r *Root) Mkdir(name string, perm os.FileMode) error {
	if perm&0o777 != perm {
		return &os.PathError{Op: "mkdirat", Path: name, Err: unsupportedMode(perm)}
	}
	err := r.with(func(p *C.sg_root) error {
		var e *C.sg_error
		s, n := cstr(name)
		if st := C.sg_root_mkdir(p, s, n, C.uint32_t(perm), &e); st != C.SG_OK {
			return takeError(st, e)
		}
		return nil
	})
	if err != nil {
		return &os.PathError{Op: "mkdirat", Path: name, Err: err}
	}
	return nil
}

// Remove removes the named file, symlink (not its target) or empty
// directory in the root.
func (r *Root) Remove(name string) error {
	err := r.with(func(p *C.sg_root) error {
		var e *C.sg_error
		s, n := cstr(name)
		if st := C.sg_root_remove(p, s, n, &e); st != C.SG_OK {
			return takeError(st, e)
		}
		return nil
	})
	if err != nil {
		return &os.PathError{Op: "removeat", Path: name, Err: err}
	}
	return nil
}

// Stat describes the named file in the root, following a final symlink
// beneath the root.
func (r *Root) Stat(name string) (fs.FileInfo, error) { return r.stat(name, false) }

// Lstat describes the named file in the root without following a final
// symlink.
func (r *Root) Lstat(name string) (fs.FileInfo, error) { return r.stat(name, true) }

func (r *Root) stat(name string, lstat bool) (fs.FileInfo, error) {
	var st C.sg_stat
	err := r.with(func(p *C.sg_root) error {
		var e *C.sg_error
		s, n := cstr(name)
		var rc C.sg_status
		if lstat {
			rc = C.sg_root_lstat(p, s, n, &st, &e)
		} else {
			rc = C.sg_root_stat(p, s, n, &st, &e)
		}
		if rc != C.SG_OK {
			return takeError(rc, e)
		}
		return nil
	})
	if err != nil {
		op := "statat"
		if lstat {
			op = "lstatat"
		}
		return nil, &os.PathError{Op: op, Path: name, Err: err}
	}
	return newFileInfo(basename(name), &st), nil
}

// Readlink returns the stored target of the named symlink in the root.
func (r *Root) Readlink(name string) (string, error) {
	var target string
	err := r.with(func(p *C.sg_root) error {
		var e *C.sg_error
		var b C.sg_bytes
		s, n := cstr(name)
		if st := C.sg_root_readlink(p, s, n, &b, &e); st != C.SG_OK {
			return takeError(st, e)
		}
		target = string(takeBytes(&b))
		return nil
	})
	if err != nil {
		return "", &os.PathError{Op: "readlinkat", Path: name, Err: err}
	}
	return target, nil
}

// Rename renames oldname to newname, both in the root, replacing a file at
// newname like os.Rename.
func (r *Root) Rename(oldname, newname string) error {
	err := r.with(func(p *C.sg_root) error {
		var e *C.sg_error
		a, an := cstr(oldname)
		b, bn := cstr(newname)
		if st := C.sg_root_rename(p, a, an, b, bn, &e); st != C.SG_OK {
			return takeError(st, e)
		}
		return nil
	})
	if err != nil {
		return &os.LinkError{Op: "renameat", Old: oldname, New: newname, Err: err}
	}
	return nil
}

// ReadFile reads the named file in the root (like os.Root.ReadFile).
func (r *Root) ReadFile(name string) ([]byte, error) {
	f, err := r.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// WriteFile writes data to the named file in the root, creating it with
// perm if needed and truncating it otherwise (like os.Root.WriteFile).
func (r *Root) WriteFile(name string, data []byte, perm os.FileMode) error {
	f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err1 := f.Close(); err == nil {
		err = err1
	}
	return err
}

func joinPath(dir, name string) string {
	if len(dir) > 0 && dir[len(dir)-1] == '/' {
		return dir + name
	}
	return dir + "/" + name
}

// basename is os's basename: the last element, trailing slashes removed.
func basename(name string) string {
	i := len(name) - 1
	for i > 0 && name[i] == '/' {
		name = name[0:i]
		i--
	}
	for i--; i >= 0; i-- {
		if name[i] == '/' {
			name = name[i+1:]
			break
		}
	}
	return name
}

// fileInfo is the fs.FileInfo of Root.Stat and Root.Lstat.
type fileInfo struct {
	name string
	size int64
	mode fs.FileMode
	mod  time.Time
	sys  syscall.Stat_t
}

func newFileInfo(name string, st *C.sg_stat) *fileInfo {
	fi := &fileInfo{
		name: name,
		size: int64(st.size),
		mod:  time.Unix(int64(st.mtime_sec), int64(st.mtime_nsec)),
	}
	perm := uint32(st.mode)
	fi.mode = fs.FileMode(perm & 0o777)
	if perm&syscall.S_ISUID != 0 {
		fi.mode |= fs.ModeSetuid
	}
	if perm&syscall.S_ISGID != 0 {
		fi.mode |= fs.ModeSetgid
	}
	if perm&syscall.S_ISVTX != 0 {
		fi.mode |= fs.ModeSticky
	}
	var typ uint32
	switch st.kind {
	case C.SG_KIND_DIR:
		fi.mode |= fs.ModeDir
		typ = syscall.S_IFDIR
	case C.SG_KIND_SYMLINK:
		fi.mode |= fs.ModeSymlink
		typ = syscall.S_IFLNK
	case C.SG_KIND_OTHER:
		// The ABI does not say which kind of special file: FIFO, socket
		// and devices all read as ModeIrregular.
		fi.mode |= fs.ModeIrregular
	default:
		typ = syscall.S_IFREG
	}
	fi.sys = syscall.Stat_t{
		Dev:   uint64(st.dev),
		Ino:   uint64(st.ino),
		Nlink: uint64(st.nlink),
		Mode:  typ | perm,
		Uid:   uint32(st.uid),
		Gid:   uint32(st.gid),
		Size:  int64(st.size),
		Mtim:  syscall.Timespec{Sec: int64(st.mtime_sec), Nsec: int64(st.mtime_nsec)},
	}
	return fi
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.size }
func (fi *fileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi *fileInfo) ModTime() time.Time { return fi.mod }
func (fi *fileInfo) IsDir() bool        { return fi.mode.IsDir() }

// Sys returns a *syscall.Stat_t with Dev, Ino, Nlink, Mode, Uid, Gid, Size
// and Mtim filled (the ABI reports no other fields).
func (fi *fileInfo) Sys() any { return &fi.sys }
