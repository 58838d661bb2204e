package sandgate

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
)

// MkdirAll creates the directory name in the root and any missing parents,
// like os.Root.MkdirAll: every step is a confined Mkdir, and an existing
// directory (or symlink to one beneath the root) is accepted.
func (r *Root) MkdirAll(name string, perm os.FileMode) error {
	if perm&0o777 != perm {
		return &os.PathError{Op: "mkdirat", Path: name, Err: unsupportedMode(perm)}
	}
	parts := strings.Split(name, "/")
	for i := range parts {
		if parts[i] == "" || parts[i] == "." {
			continue
		}
		prefix := strings.Join(parts[:i+1], "/")
		err := r.Mkdir(prefix, perm)
		if err == nil || !errors.Is(err, fs.ErrExist) {
			if err != nil {
				return err
			}
			continue
		}
		fi, serr := r.Stat(prefix)
		if serr != nil {
			return serr
		}
		if !fi.IsDir() {
			return &os.PathError{Op: "mkdirat", Path: prefix, Err: syscall.ENOTDIR}
		}
	}
	return nil
}

// FS returns a file system (an fs.FS) for the tree of files in the root,
// like os.Root.FS. It implements fs.StatFS, fs.ReadFileFS, fs.ReadDirFS and
// ReadLink/Lstat (fs.ReadLinkFS). Its ReadDir takes each entry's metadata
// with a confined Lstat.
func (r *Root) FS() fs.FS { return rootFS{r} }

type rootFS struct{ r *Root }

func invalid(op, name string) error {
	return &os.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
}

func (f rootFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, invalid("open", name)
	}
	file, err := f.r.Open(name)
	if err != nil {
		return nil, err
	}
	return file, nil
}

func (f rootFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, invalid("readdir", name)
	}
	dir, err := f.r.Open(name)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	slices.Sort(names)
	out := make([]fs.DirEntry, 0, len(names))
	for _, n := range names {
		p := n
		if name != "." {
			p = name + "/" + n
		}
		info, lerr := f.r.Lstat(p)
		if lerr != nil {
			if errors.Is(lerr, fs.ErrNotExist) {
				continue // removed meanwhile
			}
			return out, lerr
		}
		out = append(out, fs.FileInfoToDirEntry(info))
	}
	return out, err
}

func (f rootFS) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, invalid("readfile", name)
	}
	file, err := f.r.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return io.ReadAll(file)
}

func (f rootFS) ReadLink(name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", invalid("readlink", name)
	}
	return f.r.Readlink(name)
}

func (f rootFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, invalid("stat", name)
	}
	return f.r.Stat(name)
}

func (f rootFS) Lstat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, invalid("lstat", name)
	}
	return f.r.Lstat(name)
}
